// Ring reduce-scatter. Step s (0 <= s < n-1): rank r sends chunk (r - s - 1) to r+1 and
// receives chunk (r - s - 2) from r-1, which it combines with its own input chunk. Step 0 sends
// r's own input; every later step sends what the previous receive combined, re-encoded (on the
// GPU in the receive slot that decoded and reduced it, with no copy between). The last receive
// (chunk r) is combined straight into the output. Chunk c is thus reduced in the fixed order
// ((in[c+1] op in[c+2]) op ...) op in[c], ranks counted modulo n; avg divides once at the end.
#include "collectives/collective_args.h"
#include "collectives/schedules.h"

namespace ucclzip {
namespace collectives {

std::vector<ChunkLayout> SplitEvenly(uint64_t count, int size) {
  std::vector<ChunkLayout> chunks(size);
  uint64_t first = 0;
  for (int i = 0; i < size; ++i) {
    chunks[i] = {first, count / size + (uint64_t(i) < count % size ? 1 : 0)};
    first += chunks[i].count;
  }
  return chunks;
}

void AppendRingReduceScatter(Schedule& schedule, int rank, int size, const std::vector<ChunkLayout>& chunks, Chunk result) {
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  auto input_chunk = [&](int c) { return Chunk{BufferRole::kInput, chunks[c].first, chunks[c].count}; };
  for (int s = 0; s + 1 < size; ++s) {
    const int sent = (rank - s - 1 + 2 * size) % size, received = (rank - s - 2 + 2 * size) % size;
    if (s == 0) {
      schedule.sends.push_back({.peer = next, .chunk = input_chunk(sent)});
    } else {
      schedule.sends.push_back({.peer = next,
                                .chunk = input_chunk(sent),
                                .source = SendStep::Source::kReduced,
                                .recv_step = static_cast<int>(schedule.recvs.size()) - 1});
    }
    const bool last = s + 2 == size;
    pipeline::RecvStep step{.peer = previous, .count = chunks[received].count, .reduce_with = input_chunk(received)};
    if (last) {
      step.into = result;
      if (schedule.op == ReduceOp::kAvg) step.divisor = static_cast<uint32_t>(size);
    }
    schedule.recvs.push_back(step);
  }
}

Schedule RingReduceScatter(int rank, int size, uint64_t recvcount, ReduceOp op, bool in_place) {
  Schedule schedule{.kind = pipeline::OperationKind::kReduceScatter, .op = op, .count = recvcount, .name = "reducescatter"};
  std::vector<ChunkLayout> chunks(size);
  for (int i = 0; i < size; ++i) chunks[i] = {uint64_t(i) * recvcount, recvcount};
  const Chunk result{BufferRole::kOutput, 0, recvcount};
  if (size == 1) {
    if (!in_place) schedule.copies.push_back({Chunk{BufferRole::kInput, 0, recvcount}, result});
    return schedule;
  }
  AppendRingReduceScatter(schedule, rank, size, chunks, result);
  return schedule;
}

}  // namespace collectives

Operation Communicator::ReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, DataType dtype, ReduceOp op,
                                      cudaStream_t stream, const CollectiveOptions& options) {
  const collectives::CollectiveArgs args{
      .kind = pipeline::OperationKind::kReduceScatter,
      .rank = rank(),
      .sendbuff = sendbuff,
      .recvbuff = recvbuff,
      .count = recvcount,
      .send_elements = recvcount * size(),
      .recv_elements = recvcount,
      .in_place_offset = static_cast<int64_t>(0 - uint64_t(rank()) * recvcount),
      .dtype = dtype,
      .reduces = true,
      .op = op,
      .world_size = size()};
  collectives::CollectiveCall built = collectives::BuildCall(args, stream, options, [&](bool in_place) {
    return collectives::RingReduceScatter(rank(), size(), recvcount, op, in_place);
  });
  return built.placed ? Submit(std::move(built.call)) : RefusedUnplacedCollective(built.call);
}

}  // namespace ucclzip
