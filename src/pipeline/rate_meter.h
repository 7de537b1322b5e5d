// The throughput of one kind of block on a link: bytes finished over the time the link spent on
// them. The caller passes each block's time, its share of the link (LinkShare), so that blocks
// queued behind others are charged only for their own turn, blocks moved together each for its
// own bytes, and overlapping blocks are not counted twice. Samples of at least kSampleBytes are
// folded into a moving average. Pipeline thread only; times are passed in, so tests can drive
// it with any clock.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/time/time.h"

namespace ucclzip::pipeline {

class RateMeter {
 public:
  // `skip_first`: the first sample is left out (below).
  explicit RateMeter(bool skip_first = true) : skip_first_(skip_first) {}

  // Bytes a sample covers before it is folded in (a few blocks: one block's time is noisy).
  static constexpr uint64_t kSampleBytes = uint64_t{8} << 20;
  // Weight of a new sample in the average.
  static constexpr double kWeight = 0.3;

  void Begin() { ++active_; }
  // One item that Begin started is over: `bytes` of it were done (0 for a failed one) in
  // `service` of the link's time.
  void End(absl::Duration service, uint64_t bytes) {
    if (active_ == 0) return;
    --active_;
    bytes_ += bytes;
    busy_ += service;
    // A sample every kSampleBytes, or at an idle moment once an eighth of that is done (fewer
    // bytes are dominated by latency, not throughput).
    if (bytes_ < kSampleBytes && (active_ > 0 || bytes_ < kSampleBytes / 8)) return;
    const double seconds = absl::ToDoubleSeconds(busy_);
    // The first sample holds the first item, which pays what happens once (endpoints wired up,
    // memory registered or mapped for IPC, kernels loaded): it is no sample of throughput, and a
    // rate that starts from it needs many samples to forget it. The whole sample goes, not the
    // item alone: items that moved together with it (LinkShare) may hold its time.
    if (skip_first_) {
      skip_first_ = false;
    } else if (seconds > 0) {
      const double rate = static_cast<double>(bytes_) / seconds;
      rate_ = rate_ ? (1 - kWeight) * *rate_ + kWeight * rate : rate;
    }
    bytes_ = 0;
    busy_ = absl::ZeroDuration();
  }
  // Bytes per second, once a sample was taken.
  std::optional<double> rate() const { return rate_; }

 private:
  int active_ = 0;
  bool skip_first_;
  absl::Duration busy_ = absl::ZeroDuration();
  uint64_t bytes_ = 0;
  std::optional<double> rate_;
};

}  // namespace ucclzip::pipeline
