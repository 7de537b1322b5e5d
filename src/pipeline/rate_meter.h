// The throughput of a resource that works on several items at once (a link with blocks in
// flight, a codec with blocks encoding): bytes finished over the time that at least one item was
// in progress, so that overlapping items are not counted twice and idle gaps are not counted at
// all. Samples of at least kSampleBytes are folded into a moving average. Pipeline thread only;
// times are passed in, so tests can drive it with any clock.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/time/time.h"

namespace ucclzip::pipeline {

class RateMeter {
 public:
  // Bytes a sample covers before it is folded in (a few blocks: one block's time is noisy).
  static constexpr uint64_t kSampleBytes = uint64_t{8} << 20;
  // Weight of a new sample in the average.
  static constexpr double kWeight = 0.3;

  void Begin(absl::Time now) {
    if (active_++ == 0) since_ = now;
  }
  // One item that Begin started is over; `bytes` of it were done (0 for a failed one).
  void End(absl::Time now, uint64_t bytes) {
    if (active_ == 0) return;
    bytes_ += bytes;
    if (--active_ == 0) busy_ += now - since_;
    // A sample every kSampleBytes while busy, or at an idle moment once an eighth of that is
    // done (fewer bytes are dominated by latency, not throughput).
    if (bytes_ < kSampleBytes && (active_ > 0 || bytes_ < kSampleBytes / 8)) return;
    absl::Duration busy = busy_;
    if (active_ > 0) {
      busy += now - since_;
      since_ = now;
    }
    const double seconds = absl::ToDoubleSeconds(busy);
    if (seconds > 0) {
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
  absl::Time since_;
  absl::Duration busy_ = absl::ZeroDuration();
  uint64_t bytes_ = 0;
  std::optional<double> rate_;
};

}  // namespace ucclzip::pipeline
