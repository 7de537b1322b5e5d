// How many bytes of blocks may be on their way to one peer at once. Without a bound, every
// block of every queued send (an RL weight sync queues hundreds) is handed to the transport at
// once, and the transport then interleaves them all: on the H200, 291 plain tensors in one
// group moved at 60-76 % of the rate of one large message. With the bound, a few blocks
// stream at full rate and the rest wait their turn, in call order. The bound is per peer, so
// a receiver that is late to post its receives holds up only the sends addressed to it.
// A plain run (plain_run.h) is one transfer however many blocks it carries, and takes the room
// of its first block: so the next block or run may start beside it, as beside a block, and a
// message of several runs or a group of large sends keeps the link busy between them.
// A block of a message cut into several takes the room of a largest pipeline block, however
// small its message's blocks were cut (schedule.h, PipelineBlockElements): `blocks` of them
// stream at once, as with the largest blocks, and the blocks of a 16 MB message cut into four
// go one after the other, each decoded while the next arrives, not all four side by side to
// arrive together. A message's only block takes its bytes, so that many small messages go at
// once. A block of a chain's message cut into several (Schedule::chain_hops) may take the whole
// window and so go alone: two side by side share the link and land together (UCX interleaves
// their bytes), and the next rank forwards neither before both have landed. A 4 MB broadcast
// chain of 4 ranks in two 2 MB blocks took as long as in one block, three hops one after the
// other, with two on their way (shaped 1 Gbit/s link, benchmarks/RESULTS.md, twenty-second
// session). Which blocks go alone: OperationTask::WindowRoom.
// The next frames to a peer may encode ahead while the window is full, and take it in link
// order once there is room: kEncodeAheadBlocks of them per peer, across tasks. So a block that
// goes alone does not put the next one's encode after its transfer. Pipeline thread only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ucclzip::pipeline {

// Frames per peer that may encode ahead of the window: device frames in send slots beyond the
// window's blocks (DeviceSlotPool), host frames in buffers of their own (PeerPlaces).
inline constexpr int kEncodeAheadBlocks = 2;

class SendWindow {
 public:
  SendWindow(int peers, int blocks, uint64_t largest_block_bytes)
      : in_flight_(peers, 0), largest_block_bytes_(largest_block_bytes), window_bytes_(blocks * largest_block_bytes) {}

  // The room a block of `bytes` takes; `one_of_several`: its message is cut into more than one;
  // `alone`: nothing else may be on its way to the peer beside it.
  uint64_t RoomOf(uint64_t bytes, bool one_of_several, bool alone) const {
    if (alone) return std::max(bytes, window_bytes_);
    return one_of_several ? std::max(bytes, largest_block_bytes_) : bytes;
  }

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
  const uint64_t largest_block_bytes_;
  const uint64_t window_bytes_;
};

}  // namespace ucclzip::pipeline
