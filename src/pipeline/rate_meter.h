// The throughput of one kind of block on a link: bytes finished over the time the link spent on
// them. The caller passes each block's time, its share of the link (LinkShare), so that blocks
// queued behind others are charged only for their own turn, blocks moved together each for its
// own bytes, and overlapping blocks are not counted twice. Samples of at least kSampleBytes and
// two items are folded into moving averages of their bytes and of their time, and the rate is
// the one over the other. Two blocks that moved together finish apart by microseconds, the
// second's turn: taken alone, a block of a sample's size would be one sample at half the link's
// speed and the next at tens of times it, and an average of such rates comes out at many times
// the link's (docs/PIPELINE.md, "Compress or not"; likely why plain blocks over staged tcp on the
// H200 seemed to move at 13-69 GB/s on a 5 GB/s link: benchmarks/RESULTS.md, run s11-2).
// Pipeline thread only; times are passed in, so tests can drive it with any clock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/time/time.h"

namespace ucclzip::pipeline {

// Moving averages of samples' bytes and of their time, whose quotient is the rate: unlike an
// average of the samples' rates, a sample of little time cannot pull it far up (see above).
// Nor can a sample of much time pull it far down: a sample is taken at most kMostStretch times
// the average's time per byte. Frames charged the time their receiver was away (the gap between
// a benchmark's phases, a peer busy elsewhere) came to 70 ms for 4 MB and 828 ms for 16 MB where
// most took about 2 ms for 16 MB (H100 run s26-2, staged shm): such samples held auto's
// compressed estimate near 5 GB/s, a near tie with plain, while compressing delivered 7.8. Bounded
// so, the average's time grows at most 1.45 times a sample, as it shrinks at most 1 / 0.7 times:
// a link that really slowed down is followed within a few samples.
class ByteTimeAverage {
 public:
  // Weight of a new sample in the averages.
  static constexpr double kWeight = 0.3;
  static constexpr double kMostStretch = 2.5;

  // A sample of no time says nothing of a rate and is left out.
  void Add(double bytes, double seconds) {
    if (seconds <= 0) return;
    if (sampled_) seconds = std::min(seconds, kMostStretch * bytes * seconds_ / bytes_);
    bytes_ = sampled_ ? (1 - kWeight) * bytes_ + kWeight * bytes : bytes;
    seconds_ = sampled_ ? (1 - kWeight) * seconds_ + kWeight * seconds : seconds;
    sampled_ = true;
  }
  // Bytes per second, once a sample was added.
  std::optional<double> rate() const {
    if (!sampled_) return std::nullopt;
    return bytes_ / seconds_;
  }

 private:
  bool sampled_ = false;
  double bytes_ = 0;
  double seconds_ = 0;
};

class RateMeter {
 public:
  // `skip_first`: the first sample is left out (below).
  explicit RateMeter(bool skip_first = true) : skip_first_(skip_first) {}

  // Bytes and items a sample covers before it is folded in (a few blocks: one block's time is
  // noisy, and the send window keeps two on the link).
  static constexpr uint64_t kSampleBytes = uint64_t{8} << 20;
  static constexpr int kSampleItems = 2;

  void Begin() { ++active_; }
  // One item that Begin started is over: `bytes` of it were done (0 for a failed one) in
  // `service` of the link's time.
  void End(absl::Duration service, uint64_t bytes) {
    if (active_ == 0) return;
    --active_;
    bytes_ += bytes;
    busy_ += service;
    ++items_;
    // A sample every kSampleBytes and kSampleItems, or at an idle moment once an eighth of the
    // bytes are done (fewer bytes are dominated by latency, not throughput).
    const bool full = bytes_ >= kSampleBytes && items_ >= kSampleItems;
    if (!full && (active_ > 0 || bytes_ < kSampleBytes / 8)) return;
    const double seconds = absl::ToDoubleSeconds(busy_);
    // The first sample holds the first item, which pays what happens once (endpoints wired up,
    // memory registered or mapped for IPC, kernels loaded): it is no sample of throughput, and a
    // rate that starts from it needs many samples to forget it. The whole sample goes, not the
    // item alone: items that moved together with it (LinkShare) may hold its time.
    if (skip_first_) {
      skip_first_ = false;
    } else {
      average_.Add(static_cast<double>(bytes_), seconds);
    }
    bytes_ = 0;
    items_ = 0;
    busy_ = absl::ZeroDuration();
  }
  // Bytes per second, once a sample was taken.
  std::optional<double> rate() const { return average_.rate(); }

 private:
  int active_ = 0;
  bool skip_first_;
  absl::Duration busy_ = absl::ZeroDuration();
  uint64_t bytes_ = 0;
  int items_ = 0;
  ByteTimeAverage average_;
};

}  // namespace ucclzip::pipeline
