// The compress-or-not decision for each block a rank sends, and its memory of which tensors
// did not compress. Only the pipeline thread uses it.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "ucclzip/communicator.h"

namespace ucclzip::pipeline {

class CompressionPolicy {
 public:
  // Blocks of a tensor below this ratio (payload / frame bytes) are not worth their codec time.
  static constexpr double kMinRatio = 1.05;
  // After a block that did not compress, kAuto sends this many blocks of the tensor plainly
  // before it tries again (data changes: a tensor may start to compress). Each further failed
  // try doubles the wait, up to kMaxBypassBlocks: a tensor that never compresses then costs
  // one wasted encode in about a thousand blocks instead of one in 33.
  static constexpr uint32_t kBypassBlocks = 32;
  static constexpr uint32_t kMaxBypassBlocks = 1024;

  explicit CompressionPolicy(size_t min_compress_bytes) : min_compress_bytes_(min_compress_bytes) {}

  // True to send the block as a frame.
  bool ShouldCompress(CompressionMode mode, DataType dtype, uint64_t block_bytes, int peer, uint64_t tensor);
  // What a compressed block came to.
  void Record(int peer, uint64_t tensor, uint64_t payload_bytes, uint64_t frame_bytes);

 private:
  static uint64_t Key(int peer, uint64_t tensor) { return tensor * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(peer); }
  const size_t min_compress_bytes_;
  struct Bypass {
    uint32_t remaining = 0;  // plain blocks still to send before the next try
    uint32_t length = 0;     // the current wait, doubled by each failed try
  };
  // Tensors that did not compress, per (peer, tensor); bounded (cleared when it grows large).
  std::unordered_map<uint64_t, Bypass> bypass_;
};

}  // namespace ucclzip::pipeline
