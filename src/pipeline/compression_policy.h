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
  // before it tries again (data changes: a tensor may start to compress).
  static constexpr uint32_t kBypassBlocks = 32;

  explicit CompressionPolicy(size_t min_compress_bytes) : min_compress_bytes_(min_compress_bytes) {}

  // True to send the block as a frame.
  bool ShouldCompress(CompressionMode mode, DataType dtype, uint64_t block_bytes, int peer, uint64_t tensor);
  // What a compressed block came to.
  void Record(int peer, uint64_t tensor, uint64_t payload_bytes, uint64_t frame_bytes);

 private:
  static uint64_t Key(int peer, uint64_t tensor) { return tensor * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(peer); }
  const size_t min_compress_bytes_;
  // Plain blocks still to send, per (peer, tensor); bounded (cleared when it grows large).
  std::unordered_map<uint64_t, uint32_t> bypass_;
};

}  // namespace ucclzip::pipeline
