// Chain broadcast: root -> root+1 -> ... -> root-1 (ranks modulo n), pipelined by blocks. The
// root encodes each block once; every other rank receives it, forwards the frame as it arrived
// to the next rank and decodes its own copy meanwhile. With B blocks per message a chain of n
// ranks takes about B + n - 2 block times, against B for one receiver, so the chain's n - 1
// hops cut its data into more blocks than one hop's (Schedule::chain_hops). The last rank of the
// chain answers the root with an empty message once its first block has arrived: the root
// never receives data, so without it a root whose ranks disagree on the root (or on anything
// else the envelopes carry) would return success; with it, it fails too.
#include <algorithm>

#include "collectives/schedules.h"

namespace ucclzip::collectives {

Schedule ChainBroadcast(int rank, int size, uint64_t count, int root, bool in_place) {
  Schedule schedule{.kind = pipeline::OperationKind::kBroadcast,
                    .root = root,
                    .count = count,
                    .name = "broadcast",
                    .chain_hops = static_cast<uint32_t>(std::max(size - 1, 1))};
  const int position = (rank - root + size) % size;
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  const Chunk output{BufferRole::kOutput, 0, count};
  const Chunk nothing{BufferRole::kOutput, 0, 0};
  const int tail = (root + size - 1) % size;
  if (position == 0) {
    if (!in_place) schedule.copies.push_back({Chunk{BufferRole::kInput, 0, count}, output});
    if (size > 1) {
      schedule.sends.push_back({.peer = next, .chunk = {BufferRole::kInput, 0, count}});
      schedule.recvs.push_back({.peer = tail, .count = 0, .into = nothing});
    }
    return schedule;
  }
  schedule.recvs.push_back({.peer = previous, .count = count, .into = output});
  if (position + 1 < size) {
    schedule.sends.push_back({.peer = next, .chunk = output, .source = SendStep::Source::kForward, .recv_step = 0});
  } else {
    schedule.sends.push_back({.peer = root, .chunk = nothing, .recv_step = 0});
  }
  return schedule;
}

}  // namespace ucclzip::collectives
