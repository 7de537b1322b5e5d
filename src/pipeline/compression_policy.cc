#include "pipeline/compression_policy.h"

#include <algorithm>

namespace ucclzip::pipeline {
namespace {
constexpr size_t kMaxRemembered = 1 << 16;
}

bool CompressionPolicy::ShouldCompress(CompressionMode mode, DataType dtype, uint64_t block_bytes, int peer,
                                       uint64_t tensor) {
  if (mode == CompressionMode::kOff || !IsCompressibleType(dtype) || block_bytes == 0) return false;
  if (mode == CompressionMode::kOn) return true;
  if (block_bytes < min_compress_bytes_) return false;
  auto it = bypass_.find(Key(peer, tensor));
  if (it == bypass_.end() || it->second.remaining == 0) return true;  // compresses, or time to try again
  --it->second.remaining;
  return false;
}

void CompressionPolicy::Record(int peer, uint64_t tensor, uint64_t payload_bytes, uint64_t frame_bytes) {
  const uint64_t key = Key(peer, tensor);
  if (static_cast<double>(payload_bytes) >= kMinRatio * static_cast<double>(frame_bytes)) {
    bypass_.erase(key);
    return;
  }
  if (bypass_.size() >= kMaxRemembered) bypass_.clear();
  Bypass& bypass = bypass_[key];
  bypass.length = bypass.length == 0 ? kBypassBlocks : std::min(2 * bypass.length, kMaxBypassBlocks);
  bypass.remaining = bypass.length;
}

}  // namespace ucclzip::pipeline
