#include "pipeline/compression_policy.h"

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
  if (it == bypass_.end()) return true;
  if (--it->second == 0) bypass_.erase(it);
  return false;
}

void CompressionPolicy::Record(int peer, uint64_t tensor, uint64_t payload_bytes, uint64_t frame_bytes) {
  if (static_cast<double>(payload_bytes) >= kMinRatio * static_cast<double>(frame_bytes)) return;
  if (bypass_.size() >= kMaxRemembered) bypass_.clear();
  bypass_[Key(peer, tensor)] = kBypassBlocks;
}

}  // namespace ucclzip::pipeline
