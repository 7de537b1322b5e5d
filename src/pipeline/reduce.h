// Elementwise reduction of two buffers, on the CPU (host buffers) or on a CUDA stream (device
// buffers), with the arithmetic of reduce_math.h on both, so that they give the same bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "ucclzip/types.h"

namespace ucclzip::pipeline {

struct Combiner {
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // kAvg combines as kSum; the divisor does the rest
  uint32_t divisor = 1;          // applied after combining (avg's last hop)
};

// Which build of the CPU loop runs: the best the CPU has (AVX2 where it has it), or the
// baseline's (SSE2), which must give the same bits (the tests hold them to it).
enum class HostLoop { kBest, kBaseline };

// out[i] = received[i] op local[i] (then / divisor), for `count` elements. `out` may alias
// either input exactly; any alignment.
void ReduceHost(const Combiner& combiner, const void* received, const void* local, void* out, uint64_t count,
                HostLoop loop = HostLoop::kBest);

// The same on `stream`; all three pointers in device memory. Never synchronises.
absl::Status ReduceDevice(const Combiner& combiner, const void* received, const void* local, void* out, uint64_t count,
                          cudaStream_t stream);

// The public ReduceOnHost's and ReduceOnDevice's checks of their arguments, whose errors
// begin with `function` and name the call's type, operator, count and divisor.
absl::Status CheckReduceArguments(const char* function, const Combiner& combiner, const void* received,
                                  const void* local, const void* out, uint64_t count);

// Loads the reduction kernel now: CUDA loads kernels lazily at their first launch, and that
// load may synchronise the context (docs/PIPELINE.md, "Stream waits and lazy kernel loading").
absl::Status PreloadReduceKernel();

}  // namespace ucclzip::pipeline
