// Binomial-tree broadcast, for small messages, where the chain's n - 1 hops cost more than its
// pipelining saves (a message of one pipeline block is not pipelined at all). Ranks are
// numbered from the root (v = rank - root, modulo n); v > 0 receives from v minus its lowest
// set bit and forwards the frames as they arrived to v + 2^k for each 2^k below that bit,
// largest first; the root sends to every power of two below n, largest first. So
// ceil(log2 n) hops. Every leaf answers the root with an empty message once its block has
// arrived: the root receives no data, so without them a root whose ranks disagree would
// return success.
#include <bit>

#include "collectives/schedules.h"

namespace ucclzip::collectives {

Schedule BinomialTreeBroadcast(int rank, int size, uint64_t count, int root, bool in_place) {
  Schedule schedule{.kind = pipeline::OperationKind::kBroadcast, .root = root, .count = count, .name = "broadcast"};
  const int position = (rank - root + size) % size;
  auto rank_at = [root, size](int v) { return (v + root) % size; };
  const Chunk output{BufferRole::kOutput, 0, count};
  const Chunk nothing{BufferRole::kOutput, 0, 0};
  // The subtree below `position` hangs from the powers of two under `below`.
  auto send_to_subtrees = [&](unsigned below, SendStep step) {
    for (unsigned bit = below >> 1; bit > 0; bit >>= 1) {
      if (position + static_cast<int>(bit) >= size) continue;
      step.peer = rank_at(position + static_cast<int>(bit));
      schedule.sends.push_back(step);
    }
  };
  if (position == 0) {
    if (!in_place) schedule.copies.push_back({Chunk{BufferRole::kInput, 0, count}, output});
    if (size == 1) return schedule;
    send_to_subtrees(std::bit_ceil(static_cast<unsigned>(size)), SendStep{.chunk = {BufferRole::kInput, 0, count}});
    for (int v = 1; v < size; ++v) {
      // A leaf: no position v + 2^k below its lowest set bit.
      if ((v & -v) == 1 || v + 1 >= size) schedule.recvs.push_back({.peer = rank_at(v), .count = 0, .into = nothing});
    }
    return schedule;
  }
  const unsigned lowest = static_cast<unsigned>(position & -position);
  schedule.recvs.push_back({.peer = rank_at(position - static_cast<int>(lowest)), .count = count, .into = output});
  send_to_subtrees(lowest, SendStep{.chunk = output, .source = SendStep::Source::kForward, .recv_step = 0});
  if (schedule.sends.empty()) schedule.sends.push_back({.peer = root, .chunk = nothing, .recv_step = 0});
  return schedule;
}

}  // namespace ucclzip::collectives
