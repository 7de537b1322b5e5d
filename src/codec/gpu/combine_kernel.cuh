// Decompress-and-combine: decode_kernel.cuh's decoder with a store that combines each decoded
// element with the caller's before writing it, by reduce_math.h's ReduceElement (the arithmetic
// of the pipeline's reductions on either memory), so that one kernel gives the bits of a decode
// followed by a reduction, without writing and reading back a decoded copy. Templated on the
// type, which fixes the conversions; the operator stays a runtime argument (the kernel is bound by
// decoding, not by the store's arithmetic).
#pragma once

#include "codec/dtype_dispatch.h"
#include "codec/gpu/decode_kernel.cuh"
#include "codec/gpu/launch.h"
#include "codec/reduce_math.h"

namespace ucclzip::codec::gpu {

// result[i] = decoded[i] op local[i] (then / divisor). Each element's operand is read and its
// result written by the same thread, so `result` may be `local` itself.
template <DataType kType, bool kAligned>
struct StoreCombined {
  using Split = SplitOf<kType>;
  using Bits = typename Split::Bits;
  using Operand = Bits;  // the caller's element
  uint8_t* result;
  CombineArgs combine;

  __device__ __forceinline__ StoreCombined At(uint64_t first) const {
    return {result + first * sizeof(Bits), {combine.local + first * sizeof(Bits), combine.op, combine.divisor}};
  }
  __device__ __forceinline__ Operand Load(uint64_t i) const { return LoadElement<Split, kAligned>(combine.local, i); }
  __device__ __forceinline__ void operator()(uint64_t i, Bits decoded, Operand local) const {
    Bits out;
    reduce::ReduceElement(kType, combine.op, combine.divisor, reinterpret_cast<const uint8_t*>(&decoded),
                          reinterpret_cast<const uint8_t*>(&local), reinterpret_cast<uint8_t*>(&out));
    StoreElement<Split, kAligned>(result, i, out);
  }
  // A stored frame holds the elements themselves, 16-byte aligned at raw_offset; the header
  // check has tied raw_bytes to count elements of kType.
  __device__ __forceinline__ void Stored(const uint8_t* frame, const Header& h, uint64_t thread,
                                         uint64_t threads) const {
    const uint8_t* elements = frame + h.raw_offset;
    for (uint64_t i = thread; i < h.count; i += threads) (*this)(i, LoadElement<Split, true>(elements, i), Load(i));
  }
};

// Resident blocks per multiprocessor that the combining kernel is compiled for: fewer than the
// plain decoder's 8, whose 64 registers per thread left no room for the operands loaded ahead
// (ptxas spilled them for 16- and 32-bit types; 5 allow 96, and none spill). The default
// lane lengths cut a frame of up to 2^26 elements into at most 2048 chunks, 512 blocks, which 5
// per multiprocessor of an H200 (660) still hold at once.
inline constexpr int kCombineBlocksPerMultiprocessor = 5;

// args.output is the result.
template <DataType kType, bool kAligned>
__global__ void __launch_bounds__(kDecodeThreads, kCombineBlocksPerMultiprocessor)
    DecodeCombineKernel(DecodeArgs args, CombineArgs combine) {
  DecodeFrame<SplitOf<kType>>(args, StoreCombined<kType, kAligned>{args.output, combine});
}

}  // namespace ucclzip::codec::gpu
