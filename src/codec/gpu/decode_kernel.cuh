// Decode stage, in one kernel for every mode. Each block checks the header against what the
// caller expects before touching anything else; in rANS mode it checks the table, builds the
// 4096-entry slot table in shared memory, and its warps decode whole chunks (their words
// streamed through a shared-memory ring), joining symbols with the raw plane as they go. Any check that
// fails records an error word and stops the work that depended on it.
//
// Every decoded element goes through a store (DecodeFrame's `Store`): StoreDecoded writes it to
// the output, which is DecodeKernel; combine_kernel.cuh's store combines it with the caller's
// element first, which fuses a reduction into the decode.
#pragma once

#include <cuda_pipeline.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "codec/gpu/element_access.cuh"
#include "codec/gpu/word_ring.cuh"
#include "codec/rans_model.h"

namespace ucclzip::codec::gpu {

inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeWarps = kDecodeThreads / 32;
inline constexpr size_t kDecodeSharedBytes = kProbScale * 4 + kDecodeWarps * WordRing::kRingBytes;

struct DecodeArgs {
  const uint8_t* frame;
  uint64_t frame_capacity;
  uint8_t dtype;
  uint32_t element_size;
  bool splittable;  // false for types that are only ever stored
  uint8_t* output;
  uint64_t count;
  uint32_t* error_word;
};

__device__ __forceinline__ void RecordError(uint32_t* error_word, uint32_t error) {
  atomicCAS(error_word, 0u, error);
}

// A store takes element i as `store(i, bits, operand)`, where `operand = store.Load(i)` is what
// it needs of the element besides its bits, loaded ahead by the decoder (with the raw parts of
// the next steps, so that its latency hides behind this step's decoding); `store.At(first)` is
// the store for the elements from `first` on, as one lane addresses them; `store.Stored(...)`
// handles a stored frame's elements.
template <typename Split, bool kAligned>
struct StoreDecoded {
  using Bits = typename Split::Bits;
  struct Operand {};  // nothing: the element is stored as decoded
  uint8_t* output;

  __device__ __forceinline__ StoreDecoded At(uint64_t first) const { return {output + first * sizeof(Bits)}; }
  __device__ __forceinline__ Operand Load(uint64_t) const { return {}; }
  __device__ __forceinline__ void operator()(uint64_t i, Bits v, Operand) const {
    StoreElement<Split, kAligned>(output, i, v);
  }
  // Copies a stored frame's elements; raw_offset is 16-byte aligned in the (aligned) frame, so
  // the copies are of 16 bytes where the output is aligned too. Byte-wise: stored-only types of
  // any width share Split8's kernel.
  __device__ __forceinline__ void Stored(const uint8_t* frame, const Header& h, uint64_t thread,
                                         uint64_t threads) const {
    uint64_t done = 0;
    if ((reinterpret_cast<uintptr_t>(output) & 15) == 0) {
      const auto* src = reinterpret_cast<const uint4*>(frame + h.raw_offset);
      auto* dst = reinterpret_cast<uint4*>(output);
      for (uint64_t v = thread; v < h.raw_bytes / 16; v += threads) dst[v] = src[v];
      done = h.raw_bytes & ~uint64_t{15};
    }
    for (uint64_t i = done + thread; i < h.raw_bytes; i += threads) output[i] = frame[h.raw_offset + i];
  }
};

template <typename Split, typename Store>
__device__ void DecodeChunk(const DecodeArgs& args, const Header& h, const uint32_t* slots, uint8_t* ring_memory,
                            uint32_t chunk, const Store& store) {
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t chunk_elements = uint64_t{kLanes} << h.lane_symbols_log2;
  const uint64_t num_chunks = DivCeil(h.count, chunk_elements);
  const uint32_t* index = reinterpret_cast<const uint32_t*>(args.frame + kHeaderBytes + kTableBytes);
  const uint32_t begin = index[chunk];
  const uint32_t end = chunk + 1 < num_chunks ? index[chunk + 1] : static_cast<uint32_t>(h.coded_bytes / 4);
  if (begin > end || uint64_t{end} * 4 > h.coded_bytes || end - begin < kChunkStateBytes / 4) {
    if (lane == 0) RecordError(args.error_word, MakeErrorWord(DecodeError::kBadIndex, chunk));
    return;
  }
  const uint8_t* chunk_data = args.frame + h.coded_offset + uint64_t{begin} * 4;
  const uint32_t available = ((end - begin) * 4 - kChunkStateBytes) / 2;
  WordRing words(ring_memory, chunk_data + kChunkStateBytes, available);

  uint32_t x = reinterpret_cast<const uint32_t*>(chunk_data)[lane];
  if (!__all_sync(~0u, x >= kStateLow && x < (1u << 31))) {
    if (lane == 0) RecordError(args.error_word, MakeErrorWord(DecodeError::kCorruptStream, chunk));
    __pipeline_wait_prior(0);  // leave no copy in flight into memory the next chunk reuses
    return;
  }
  const uint32_t lower_lanes = (1u << lane) - 1;
  const uint64_t first = chunk * chunk_elements;
  const uint64_t chunk_count = min(chunk_elements, h.count - first);
  const uint8_t* lane_raw = args.frame + h.raw_offset + (first + lane) * Split::kRawWidth;
  const Store lane_store = store.At(first + lane);
  const int full_steps = static_cast<int>(chunk_count / kLanes);
  const int steps = static_cast<int>(DivCeil(chunk_count, kLanes));
  const uint32_t tail_lanes = static_cast<uint32_t>(chunk_count % kLanes);
  uint32_t consumed = 0;
  // One step of the 32 lanes. kChecked: some lanes may be past the chunk's end, and the ring is
  // topped up and the chunk's bounds checked at every step; otherwise the caller has done both
  // for the whole batch. Returns false on a read past the chunk.
  using Operand = typename Store::Operand;
  auto decode_step = [&]<bool kChecked>(int k, uint32_t raw, Operand operand) -> bool {
    const bool active = !kChecked || k < full_steps || lane < tail_lanes;
    const uint32_t entry = slots[x & (kProbScale - 1)];
    uint32_t next = DecodeStep(x, entry);
    const bool refill = active && next < kStateLow;
    const uint32_t ballot = __ballot_sync(~0u, refill);
    if constexpr (kChecked) {
      if (ballot != 0) {
        if (consumed + __popc(ballot) > available) return false;
        words.Ensure(consumed);
      }
    }
    if (refill) next = (next << 16) | words.Word(consumed + __popc(ballot & lower_lanes));
    consumed += __popc(ballot);
    if constexpr (kChecked) words.Refill(consumed);
    if (active) {
      x = next;
      lane_store(uint64_t(k) * kLanes, Split::Join(raw, EntrySymbol(entry)), operand);
    }
    return true;
  };
  // Batches of kBatch steps; the raw parts (and the store's operands) of the next batch load
  // while this one decodes. A batch that lies within the full steps and within the chunk's
  // words runs unchecked.
  constexpr int kBatch = 8;
  auto load_batch = [&](int k0, uint32_t (&batch)[kBatch], Operand (&operands)[kBatch]) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int k = k0 + j;
      const bool active = k < full_steps || (k < steps && lane < tail_lanes);
      batch[j] = active ? LoadRaw<Split>(lane_raw, uint64_t(k) * kLanes) : 0;
      operands[j] = active ? lane_store.Load(uint64_t(k) * kLanes) : Operand{};
    }
  };
  uint32_t raw[kBatch], next_raw[kBatch];
  Operand operands[kBatch], next_operands[kBatch];
  load_batch(0, raw, operands);
  bool corrupt = false;
  for (int k0 = 0; k0 < steps && !corrupt; k0 += kBatch) {
    load_batch(k0 + kBatch, next_raw, next_operands);
    if (k0 + kBatch <= full_steps && consumed + kBatch * kLanes <= available) {
      words.EnsureSpan(consumed, kBatch * kLanes);
#pragma unroll
      for (int j = 0; j < kBatch; ++j) decode_step.template operator()<false>(k0 + j, raw[j], operands[j]);
    } else {
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (k0 + j >= steps || corrupt) break;
        corrupt = !decode_step.template operator()<true>(k0 + j, raw[j], operands[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) raw[j] = next_raw[j], operands[j] = next_operands[j];
  }
  // A sound chunk ends where the encoder began, with every word read but the pad.
  bool padded = false;
  if (!corrupt && consumed + 1 == available && (consumed & 1)) {
    words.Ensure(consumed);
    padded = words.Word(consumed) == 0;
  }
  __pipeline_wait_prior(0);  // leave no copy in flight into memory the next chunk reuses
  __syncwarp();
  if (corrupt || !__all_sync(~0u, x == kStateLow) || !(consumed == available || padded)) {
    if (lane == 0) RecordError(args.error_word, MakeErrorWord(DecodeError::kCorruptStream, chunk));
  }
}

// Fills the slot table from a checked frequency table: warp w expands symbols w, w+4, ...
__device__ inline void BuildSlots(const uint16_t* freqs, uint32_t* slots) {
  using Scan = cub::BlockScan<uint32_t, kDecodeThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ uint32_t starts[kAlphabetSize];
  uint32_t local[2] = {freqs[2 * threadIdx.x], freqs[2 * threadIdx.x + 1]};
  uint32_t prefix[2];
  Scan(scan).ExclusiveSum(local, prefix);
  starts[2 * threadIdx.x] = prefix[0];
  starts[2 * threadIdx.x + 1] = prefix[1];
  __syncthreads();
  const uint32_t lane = threadIdx.x & 31;
  for (uint32_t s = threadIdx.x / 32; s < kAlphabetSize; s += kDecodeWarps) {
    const uint32_t f = freqs[s];
    for (uint32_t i = lane; i < f; i += 32) slots[starts[s] + i] = MakeDecoderEntry(s, f, i);
  }
  __syncthreads();
}

// The body of a decode kernel: checks, then every element of the frame through `store`.
template <typename Split, typename Store>
__device__ __forceinline__ void DecodeFrame(const DecodeArgs& args, const Store& store) {
  extern __shared__ __align__(16) uint8_t shared[];
  __shared__ Header h;
  __shared__ uint16_t freqs[kAlphabetSize];
  __shared__ uint32_t verdict;
  if (threadIdx.x == 0) {
    verdict = static_cast<uint32_t>(DecodeError::kTruncated);
    if (args.frame_capacity >= kHeaderBytes) {
      h = *reinterpret_cast<const Header*>(args.frame);
      verdict = static_cast<uint32_t>(
          CheckHeader(h, args.frame_capacity, args.dtype, args.count, args.element_size, args.splittable));
    }
  }
  __syncthreads();
  if (verdict == 0 && static_cast<Mode>(h.mode) == Mode::kSplitRans) {
    for (uint32_t s = threadIdx.x; s < kAlphabetSize; s += kDecodeThreads) {
      freqs[s] = reinterpret_cast<const uint16_t*>(args.frame + kHeaderBytes)[s];
    }
    __syncthreads();
    // The table check of frame_checks.h, one pair of symbols per thread.
    static_assert(2 * kDecodeThreads == kAlphabetSize);
    using Reduce = cub::BlockReduce<uint32_t, kDecodeThreads>;
    __shared__ typename Reduce::TempStorage reduce;
    const uint32_t f0 = freqs[2 * threadIdx.x], f1 = freqs[2 * threadIdx.x + 1];
    const uint32_t sum = Reduce(reduce).Sum(f0 + f1);
    const uint32_t present = __syncthreads_count(f0 != 0) + __syncthreads_count(f1 != 0);
    if (threadIdx.x == 0 && (sum != kProbScale || present < 2)) verdict = static_cast<uint32_t>(DecodeError::kBadTable);
    __syncthreads();
  }
  if (verdict != 0) {
    if (threadIdx.x == 0) RecordError(args.error_word, verdict);
    return;
  }
  const uint64_t thread = blockIdx.x * uint64_t{kDecodeThreads} + threadIdx.x;
  const uint64_t threads = gridDim.x * uint64_t{kDecodeThreads};
  const Mode mode = static_cast<Mode>(h.mode);
  if (mode == Mode::kStored) {
    store.Stored(args.frame, h, thread, threads);
    return;
  }
  const uint8_t* raw_plane = args.frame + h.raw_offset;
  if (mode != Mode::kSplitRans) {
    const uint8_t* symbols = args.frame + h.coded_offset;
    for (uint64_t i = thread; i < h.count; i += threads) {
      const uint32_t symbol = mode == Mode::kSplitConstant ? h.constant_symbol : symbols[i];
      store(i, Split::Join(LoadRaw<Split>(raw_plane, i), symbol), store.Load(i));
    }
    return;
  }
  uint32_t* slots = reinterpret_cast<uint32_t*>(shared);
  BuildSlots(freqs, slots);
  uint8_t* ring = shared + kProbScale * 4 + (threadIdx.x / 32) * WordRing::kRingBytes;
  const uint32_t num_chunks = static_cast<uint32_t>(DivCeil(h.count, uint64_t{kLanes} << h.lane_symbols_log2));
  for (uint32_t chunk = blockIdx.x * kDecodeWarps + threadIdx.x / 32; chunk < num_chunks;
       chunk += gridDim.x * kDecodeWarps) {
    DecodeChunk<Split>(args, h, slots, ring, chunk, store);
  }
}

// Decompress: the decoded elements to args.output.
template <typename Split, bool kAligned>
__global__ void __launch_bounds__(kDecodeThreads, 8) DecodeKernel(DecodeArgs args) {
  DecodeFrame<Split>(args, StoreDecoded<Split, kAligned>{args.output});
}

}  // namespace ucclzip::codec::gpu
