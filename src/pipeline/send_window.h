// How many bytes of blocks may be on their way to one peer at once. Without a bound, every
// block of every queued send (an RL weight sync queues hundreds) is handed to the transport at
// once, and the transport then interleaves them all: on the H200, 291 plain tensors in one
// group moved at 60-76 % of the rate of one large message. With the bound, a few blocks
// stream at full rate and the rest wait their turn, in call order. The bound is per peer, so
// a receiver that is late to post its receives holds up only the sends addressed to it.
// A plain run (plain_run.h) is one transfer however many blocks it carries, and takes the room
// of its first block: so the next block or run may start beside it, as beside a block, and a
// message of several runs or a group of large sends keeps the link busy between them.
// Pipeline thread only.
#pragma once

#include <cstdint>
#include <vector>

namespace ucclzip::pipeline {

class SendWindow {
 public:
  SendWindow(int peers, uint64_t window_bytes) : in_flight_(peers, 0), window_bytes_(window_bytes) {}

  // Takes room for a block of `bytes` to `peer`: always when nothing is in flight to it (so
  // that a block larger than the window still goes), else only within the window.
  bool TryTake(int peer, uint64_t bytes) {
    uint64_t& used = in_flight_[peer];
    if (used != 0 && used + bytes > window_bytes_) return false;
    used += bytes;
    return true;
  }
  void Release(int peer, uint64_t bytes) { in_flight_[peer] -= bytes; }

 private:
  std::vector<uint64_t> in_flight_;
  const uint64_t window_bytes_;
};

}  // namespace ucclzip::pipeline
