// The arithmetic of ucclzip's reducing collectives, on the CPU: what one hop of a ring does
// to two buffers. With the fixed order of docs/COLLECTIVES.md it lets a caller compute the
// exact bits a ReduceScatter or AllReduce returns (the benchmarks check results this way).
//
// bf16, fp16 and fp8 are widened to fp32 exactly, combined in fp32 and rounded once to
// nearest even (fp8 e4m3 saturates at +-448; the other types overflow to infinity); fp32 and
// fp64 combine in their own type; any NaN result is the type's canonical quiet NaN; min and
// max return NaN if either operand is, and order -0 below +0 (IEEE 754-2019's minimum and
// maximum), so that every operator gives the same bits with its operands swapped; integers
// wrap, and avg's division truncates towards zero.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "ucclzip/types.h"

namespace ucclzip {

// out[i] = received[i] op local[i], then divided by `divisor` (kAvg passes the world size on
// the last hop and combines as a sum before it; 1 elsewhere). `out` may be either input, but
// may not overlap one partly. InvalidArgument, with nothing written, for a type or operator
// outside its enum, a divisor of 0 (an integer division by it stopped the process), a null
// buffer with count > 0, or an output that partly overlaps an input.
absl::Status ReduceOnHost(DataType dtype, ReduceOp op, const void* received, const void* local, void* out,
                          uint64_t count, uint32_t divisor = 1);

// The same on `stream`, all three buffers in device memory, with the same bits: what a hop does
// to a plain (uncompressed) device block. Never synchronises; errors are ReduceOnHost's, checked
// before anything is launched, or a failed launch. (A compressed block is decoded and combined in one kernel instead:
// GpuCodec::DecompressAndCombine in ucclzip/codec.h.)
absl::Status ReduceOnDevice(DataType dtype, ReduceOp op, const void* received, const void* local, void* out,
                            uint64_t count, cudaStream_t stream, uint32_t divisor = 1);

}  // namespace ucclzip
