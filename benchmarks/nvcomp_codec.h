// nvCOMP's batched ANS codec, measured beside ucclzip by `ucclzip-bench codec --vs nvcomp`.
//
// nvCOMP is an optional, benchmark-only dependency: nvcomp_codec.cc calls it where CMake found
// it, nvcomp_codec_absent.cc answers in a build without it. The caller hands in its own timer,
// so that both codecs are measured by exactly the same method.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ucclzip/types.h"

namespace ucclzip::bench {

// What the codec benchmark reports for one codec on one tensor. The *_streamed_us times are the
// GPU's only (zero on the CPU): see GpuTiming.
struct CodecResult {
  uint64_t compressed_bytes = 0;
  double compress_us = 0, decompress_us = 0;
  double compress_streamed_us = 0, decompress_streamed_us = 0;
  bool roundtrip_ok = false;
};

// One operation's time on the GPU, two ways. `single_us`: the median of calls timed one at a
// time on an idle stream, so that each pays its own launches (a lone tensor's latency).
// `streamed_us`: the mean of calls enqueued back to back between one pair of events, so that
// the host's launches overlap the GPU's work: the larger of the two per call, what a pipeline of
// blocks pays per block. Where the GPU's work is the larger, their difference is what a lone
// call spends on its launches and on the idle GPU's start.
struct GpuTiming {
  double single_us = 0, streamed_us = 0;
};

// Times `op`, which enqueues its work on `stream`.
using GpuTimer = std::function<GpuTiming(const std::function<void()>& op, cudaStream_t stream)>;

// nvCOMP's version ("6.0.0"), or why this build cannot run it.
absl::StatusOr<std::string> NvcompVersion();

// Compresses `tensor` (host memory, `dtype` elements) on the current GPU with nvCOMP's batched
// ANS in chunks of `chunk_bytes` (the last may be shorter), decompresses it and compares the
// result bit for bit. compressed_bytes counts every chunk's payload and the 8-byte size of each
// chunk, which the batched API needs back to decode.
absl::StatusOr<CodecResult> RunNvcompAns(const std::vector<uint8_t>& tensor, DataType dtype, uint64_t chunk_bytes,
                                         const GpuTimer& time);

}  // namespace ucclzip::bench
