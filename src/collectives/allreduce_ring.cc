// Ring allreduce = ring reduce-scatter over near-equal chunks of the count (reduce_scatter_ring.cc,
// the same steps and reduction order), then a ring allgather of the reduced chunks: rank r
// encodes its reduced chunk once, as soon as each block of it is combined, and the other
// ranks forward those frames untouched (allgather_ring.cc). Every rank decodes every other
// chunk once, so all ranks end with the same bits.
#include "collectives/schedules.h"

namespace ucclzip::collectives {

Schedule RingAllReduce(int rank, int size, uint64_t count, ReduceOp op, bool in_place) {
  Schedule schedule{.kind = pipeline::OperationKind::kAllReduce, .op = op, .count = count, .name = "allreduce"};
  if (size == 1) {
    if (!in_place) schedule.copies.push_back({Chunk{BufferRole::kInput, 0, count}, Chunk{BufferRole::kOutput, 0, count}});
    return schedule;
  }
  const std::vector<ChunkLayout> chunks = SplitEvenly(count, size);
  auto output_chunk = [&](int c) { return Chunk{BufferRole::kOutput, chunks[c].first, chunks[c].count}; };
  AppendRingReduceScatter(schedule, rank, size, chunks, output_chunk(rank));
  const int reduced = static_cast<int>(schedule.recvs.size()) - 1;  // the receive that completes chunk `rank`
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  for (int s = 0; s + 1 < size; ++s) {
    if (s == 0) {
      schedule.sends.push_back({.peer = next, .chunk = output_chunk(rank), .recv_step = reduced});
    } else {
      schedule.sends.push_back({.peer = next,
                                .chunk = output_chunk((rank - s + size) % size),
                                .source = SendStep::Source::kForward,
                                .recv_step = static_cast<int>(schedule.recvs.size()) - 1});
    }
    const int received = (rank - s - 1 + size) % size;
    schedule.recvs.push_back({.peer = previous, .count = chunks[received].count, .into = output_chunk(received)});
  }
  return schedule;
}

}  // namespace ucclzip::collectives
