#include "pipeline/compression_policy.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "logging/logging.h"

namespace ucclzip::pipeline {
namespace {
constexpr size_t kMaxRemembered = 1 << 16;

// An estimate for the log, divided by `scale`.
std::string Estimate(std::optional<double> value, double scale, const char* unit) {
  return value ? absl::StrFormat("%.3f%s", *value / scale, unit) : "unknown";
}
}  // namespace

bool CompressionPolicy::ShouldCompress(CompressionMode mode, DataType dtype, uint64_t block_bytes,
                                       uint32_t message_blocks, int peer, transport::MemoryType memory, uint64_t tensor) {
  if (mode == CompressionMode::kOff || !IsCompressibleType(dtype) || block_bytes == 0) return false;
  if (mode == CompressionMode::kOn) return true;
  if (block_bytes < min_compress_bytes_) return false;
  auto it = bypass_.find(Key(peer, tensor));
  if (it != bypass_.end() && it->second.remaining > 0) {
    --it->second.remaining;
    return false;
  }
  // The tensor compresses (or it is time to try it again): does compressing pay on this path?
  const bool pays = ExpectedToPay(peer, memory, message_blocks);
  PathState& path = Path(peer, memory);
  if (pays != path.last_choice) {
    UCCLZIP_LOG(kDebug) << "auto: blocks to peer " << peer << " from " << transport::MemoryTypeName(memory)
                        << " memory now go " << (pays ? "compressed" : "plain") << " (link "
                        << Estimate(link_rate(peer, memory), 1e9, " GB/s") << ", codec "
                        << Estimate(codec_rate(memory), 1e9, " GB/s") << ", ratio " << Estimate(ratio(memory), 1, "")
                        << ", messages of " << message_blocks << " blocks)";
    path.last_choice = pays;
    path.since_probe = 0;
    path.probe_interval = pays ? kFirstPlainProbe : kFirstCompressedProbe;
  }
  if (++path.since_probe < path.probe_interval) return pays;
  path.since_probe = 0;
  path.probe_interval = std::min(2 * path.probe_interval, pays ? kMaxPlainProbe : kMaxCompressedProbe);
  return !pays;
}

bool CompressionPolicy::ExpectedToPay(int peer, transport::MemoryType memory, uint32_t message_blocks) const {
  const std::optional<double> link = link_rate(peer, memory);
  if (!link) return false;  // learn the link first, with plain blocks (no codec time)
  const std::optional<double> codec = codec_rate(memory), gain = ratio(memory);
  if (!codec || !gain) return true;  // then the codec
  // Time per byte of each stage. Compressed, a message of n blocks passes three stages (encode,
  // the link carrying 1/ratio of the bytes, decode, taken to be as fast as encode) that overlap
  // across blocks: the first block pays all three, every later one the slowest. Plain, the link
  // alone.
  const double encode = 1 / *codec, wire = 1 / (*gain * *link), plain = 1 / *link;
  const double n = std::max<uint32_t>(message_blocks, 1);
  const double compressed = encode + wire + encode + (n - 1) * std::max(encode, wire);
  return n * plain > kMinGain * compressed;
}

CompressionPolicy::PathState& CompressionPolicy::Path(int peer, transport::MemoryType memory) {
  if (static_cast<size_t>(peer) >= paths_.size()) paths_.resize(peer + 1);
  return paths_[peer][Index(memory)];
}

std::optional<double> CompressionPolicy::link_rate(int peer, transport::MemoryType memory) const {
  if (static_cast<size_t>(peer) >= paths_.size()) return std::nullopt;
  return paths_[peer][Index(memory)].link.rate();
}

void CompressionPolicy::PlainSendStarted(int peer, transport::MemoryType memory, uint64_t bytes, absl::Time now) {
  if (bytes >= min_compress_bytes_ && bytes > 0) Path(peer, memory).link.Begin(now);
}

void CompressionPolicy::PlainSendDone(int peer, transport::MemoryType memory, uint64_t bytes, bool ok, absl::Time now) {
  if (bytes >= min_compress_bytes_ && bytes > 0) Path(peer, memory).link.End(now, ok ? bytes : 0);
}

void CompressionPolicy::EncodeStarted(transport::MemoryType memory, uint64_t bytes, absl::Time now) {
  if (bytes > 0) codec_[Index(memory)].Begin(now);
}

void CompressionPolicy::EncodeDone(transport::MemoryType memory, uint64_t bytes, bool ok, absl::Time now) {
  if (bytes > 0) codec_[Index(memory)].End(now, ok ? bytes : 0);
}

void CompressionPolicy::Record(int peer, transport::MemoryType memory, uint64_t tensor, uint64_t payload_bytes,
                               uint64_t frame_bytes) {
  // The path's ratio is that of what compresses; what does not is the bypass's business.
  if (frame_bytes > 0 && static_cast<double>(payload_bytes) >= kMinRatio * static_cast<double>(frame_bytes)) {
    const double block_ratio = static_cast<double>(payload_bytes) / static_cast<double>(frame_bytes);
    std::optional<double>& average = ratio_[Index(memory)];
    average = average ? (1 - RateMeter::kWeight) * *average + RateMeter::kWeight * block_ratio : block_ratio;
  }
  const uint64_t key = Key(peer, tensor);
  if (static_cast<double>(payload_bytes) >= kMinRatio * static_cast<double>(frame_bytes)) {
    bypass_.erase(key);
    return;
  }
  if (bypass_.size() >= kMaxRemembered) bypass_.clear();
  Bypass& bypass = bypass_[key];
  bypass.length = bypass.length == 0 ? kBypassBlocks : std::min(2 * bypass.length, kMaxBypassBlocks);
  bypass.remaining = bypass.length;
  UCCLZIP_LOG(kDebug) << "auto: tensor " << absl::StrFormat("%#x", tensor) << " to peer " << peer
                      << " did not compress (" << payload_bytes << " B to " << frame_bytes << " B); its next "
                      << bypass.length << " blocks go plain";
}

}  // namespace ucclzip::pipeline
