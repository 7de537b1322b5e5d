#include "pipeline/compression_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
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

bool CompressionPolicy::ShouldCompress(CompressionMode mode, DataType dtype, uint64_t block_bytes, int peer,
                                       transport::MemoryType memory, uint64_t tensor) {
  if (mode == CompressionMode::kOff || !IsCompressibleType(dtype) || block_bytes == 0) return false;
  if (mode == CompressionMode::kOn) return true;
  if (block_bytes < min_compress_bytes_) return false;
  auto it = bypass_.find(Key(peer, tensor));
  if (it != bypass_.end() && it->second.remaining > 0) {
    --it->second.remaining;
    return false;
  }
  // The tensor compresses (or it is time to try it again): does compressing pay on this path?
  const std::optional<double> gain = ExpectedGain(peer, memory);
  const bool pays = gain && *gain > kMinGain;
  PathState& path = Path(peer, memory);
  if (pays != path.last_choice) {
    UCCLZIP_LOG(kDebug) << "auto: blocks to peer " << peer << " from " << transport::MemoryTypeName(memory)
                        << " memory now go " << (pays ? "compressed" : "plain") << " (plain "
                        << Estimate(plain_rate(peer, memory), 1e9, " GB/s") << ", compressed "
                        << Estimate(compressed_rate(peer, memory), 1e9, " GB/s") << ", codec "
                        << Estimate(memory == transport::MemoryType::kHost ? host_codec_.rate() : device_codec_rate(), 1e9,
                                    " GB/s")
                        << ")";
    path.last_choice = pays;
    path.since_probe = 0;
    path.probe_interval = pays || NearTie(gain) ? kFirstPlainProbe : kFirstCompressedProbe;
  } else if (!pays && NearTie(gain) && !path.near_tie) {
    // The compressed estimate climbed to a near tie while blocks went plainly (probes, or frames
    // that `on` or a forward sent on this path): its probes follow the plain probes' schedule
    // from here, as they would had the choice changed to plain at a near tie.
    path.since_probe = 0;
    path.probe_interval = kFirstPlainProbe;
  }
  path.near_tie = !pays && NearTie(gain);
  const uint32_t longest = pays || NearTie(gain) ? kMaxPlainProbe : kMaxCompressedProbe;
  path.probe_interval = std::min(path.probe_interval, longest);
  const uint32_t interval =
      pays || path.near_tie ? path.probe_interval : std::max(path.probe_interval, AffordableProbeInterval(gain));
  if (++path.since_probe < interval) return pays;
  path.since_probe = 0;
  path.probe_interval = std::min(2 * path.probe_interval, longest);
  return !pays;
}

uint32_t CompressionPolicy::AffordableProbeInterval(std::optional<double> gain) {
  if (!gain || !(*gain < 1)) return 0;  // a NaN too
  const double blocks = (1 / *gain - 1) / kProbeCostShare;
  return blocks < kMaxAffordableProbe ? static_cast<uint32_t>(std::ceil(blocks)) : kMaxAffordableProbe;
}

std::optional<double> CompressionPolicy::ExpectedGain(int peer, transport::MemoryType memory) const {
  const std::optional<double> plain = plain_rate(peer, memory);
  if (!plain) return std::nullopt;
  std::optional<double> compressed = compressed_rate(peer, memory);
  if (!compressed) return std::numeric_limits<double>::infinity();
  if (const std::optional<double> host_codec = host_codec_.rate(); memory == transport::MemoryType::kHost && host_codec) {
    compressed = std::min(*compressed, *host_codec);
  }
  if (memory == transport::MemoryType::kDevice && device_codec_.rate()) {
    compressed = std::min(*compressed, *device_codec_.rate());
  }
  return *compressed / *plain;
}

void CompressionPolicy::HostEncoded(uint64_t bytes, absl::Duration took) {
  if (bytes >= min_compress_bytes_) host_codec_time_ += took;
}

void CompressionPolicy::HostDecoded(absl::Duration took) {
  host_decode_pending_ += took;
  ++host_decodes_pending_;
}

void CompressionPolicy::DeviceEncoded(uint64_t bytes, absl::Time started, absl::Time now) {
  if (bytes < min_compress_bytes_) return;
  const absl::Time from = std::max(started, device_codec_free_);
  device_codec_free_ = std::max(device_codec_free_, now);
  device_codec_.Begin();
  device_codec_.End(std::max(now - from, absl::ZeroDuration()), bytes);
}

void CompressionPolicy::SampleHostCodec() {
  if (host_frame_bytes_ < RateMeter::kSampleBytes) return;
  // Bytes with no codec time behind them make no sample (every frame the host path sends has
  // an encode or a decode).
  host_codec_.Add(static_cast<double>(host_frame_bytes_), absl::ToDoubleSeconds(host_codec_time_));
  host_frame_bytes_ = 0;
  host_codec_time_ = absl::ZeroDuration();
}

CompressionPolicy::PathState& CompressionPolicy::Path(int peer, transport::MemoryType memory) {
  if (static_cast<size_t>(peer) >= paths_.size()) paths_.resize(peer + 1);
  return paths_[peer][Index(memory)];
}

std::optional<double> CompressionPolicy::plain_rate(int peer, transport::MemoryType memory) const {
  if (static_cast<size_t>(peer) >= paths_.size()) return std::nullopt;
  return paths_[peer][Index(memory)].plain.rate();
}

std::optional<double> CompressionPolicy::compressed_rate(int peer, transport::MemoryType memory) const {
  if (static_cast<size_t>(peer) >= paths_.size()) return std::nullopt;
  return paths_[peer][Index(memory)].compressed.rate();
}

LinkShare& CompressionPolicy::Link(int peer) {
  if (static_cast<size_t>(peer) >= links_.size()) links_.resize(peer + 1);
  return links_[peer];
}

uint64_t CompressionPolicy::PlainSendStarted(int peer, transport::MemoryType memory, uint64_t bytes, absl::Time now) {
  if (bytes < min_compress_bytes_ || bytes == 0) return 0;
  Path(peer, memory).plain.Begin();
  if (memory == transport::MemoryType::kHost) {
    SampleHostCodec();
    host_decode_pending_ = absl::ZeroDuration();  // the decodes so far went with plain blocks
    host_decodes_pending_ = 0;
  }
  return Link(peer).Join(LinkKind(memory, false), bytes, now, now);
}

void CompressionPolicy::PlainSendDone(int peer, transport::MemoryType memory, uint64_t bytes, uint64_t ticket, bool ok,
                                      absl::Time now) {
  if (ticket == 0) return;
  const absl::Duration charged = Link(peer).Finish(ticket, now, ok);
  UCCLZIP_LOG(kDebug) << "auto: plain block of " << bytes << " B to peer " << peer << " from "
                      << transport::MemoryTypeName(memory) << " memory charged " << absl::FormatDuration(charged);
  Path(peer, memory).plain.End(charged, ok ? bytes : 0);
}

uint64_t CompressionPolicy::CompressedSendStarted(int peer, transport::MemoryType memory, uint64_t bytes,
                                                  uint64_t frame_bytes, absl::Time started, absl::Time now) {
  if (bytes < min_compress_bytes_ || bytes == 0) return 0;
  Path(peer, memory).compressed.Begin();
  if (memory == transport::MemoryType::kHost) {
    // This frame's encode (for a frame of this rank's) has been reported, and the decodes since
    // the last send go with it: the sample then covers whole frames.
    if (host_decodes_pending_ > 0) {
      host_codec_time_ += host_decode_pending_ * std::min(host_decodes_pending_, kDecodesPerFrame) / host_decodes_pending_;
    }
    host_decode_pending_ = absl::ZeroDuration();
    host_decodes_pending_ = 0;
    host_frame_bytes_ += bytes;
    SampleHostCodec();
  }
  return Link(peer).Join(LinkKind(memory, true), frame_bytes, started, now);
}

void CompressionPolicy::CompressedSendDone(int peer, transport::MemoryType memory, uint64_t bytes, uint64_t ticket,
                                           bool ok, absl::Time now) {
  if (ticket == 0) return;
  const absl::Duration charged = Link(peer).Finish(ticket, now, ok);
  UCCLZIP_LOG(kDebug) << "auto: frame of " << bytes << " B to peer " << peer << " from "
                      << transport::MemoryTypeName(memory) << " memory charged " << absl::FormatDuration(charged);
  Path(peer, memory).compressed.End(charged, ok ? bytes : 0);
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
  UCCLZIP_LOG(kDebug) << "auto: tensor " << absl::StrFormat("%#x", tensor) << " to peer " << peer
                      << " did not compress (" << payload_bytes << " B to " << frame_bytes << " B); its next "
                      << bypass.length << " blocks go plain";
}

}  // namespace ucclzip::pipeline
