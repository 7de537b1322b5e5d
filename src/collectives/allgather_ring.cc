// Ring allgather. Step s (0 <= s < n-1): rank r sends chunk (r - s) to r+1 and receives chunk
// (r - s - 1) from r-1. Step 0 sends r's own elements, encoded once; every later step forwards
// the frames of the previous step's receive untouched, so each block is encoded once by its
// owner and decoded once by each other rank, and decoding overlaps forwarding.
#include "collectives/collective_args.h"
#include "collectives/schedules.h"

namespace ucclzip {
namespace collectives {

Schedule RingAllGather(int rank, int size, uint64_t sendcount, bool in_place) {
  Schedule schedule{.kind = pipeline::OperationKind::kAllGather, .count = sendcount, .name = "allgather"};
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  auto output_chunk = [&](int owner) { return Chunk{BufferRole::kOutput, uint64_t(owner) * sendcount, sendcount}; };
  if (!in_place) schedule.copies.push_back({Chunk{BufferRole::kInput, 0, sendcount}, output_chunk(rank)});
  for (int s = 0; s + 1 < size; ++s) {
    if (s == 0) {
      schedule.sends.push_back({.peer = next, .chunk = {BufferRole::kInput, 0, sendcount}});
    } else {
      schedule.sends.push_back(
          {.peer = next, .chunk = output_chunk((rank - s + size) % size), .source = SendStep::Source::kForward, .recv_step = s - 1});
    }
    schedule.recvs.push_back({.peer = previous, .count = sendcount, .into = output_chunk((rank - s - 1 + size) % size)});
  }
  return schedule;
}

}  // namespace collectives

Operation Communicator::AllGather(const void* sendbuff, void* recvbuff, size_t sendcount, DataType dtype,
                                  cudaStream_t stream, const CollectiveOptions& options) {
  const collectives::CollectiveArgs args{
      .kind = pipeline::OperationKind::kAllGather,
      .rank = rank(),
      .sendbuff = sendbuff,
      .recvbuff = recvbuff,
      .count = sendcount,
      .send_elements = sendcount,
      .recv_elements = sendcount * size(),
      .in_place_offset = static_cast<int64_t>(uint64_t(rank()) * sendcount),
      .dtype = dtype,
      .world_size = size()};
  collectives::CollectiveCall built = collectives::BuildCall(
      args, stream, options, [&](bool in_place) { return collectives::RingAllGather(rank(), size(), sendcount, in_place); });
  return built.placed ? Submit(std::move(built.call)) : RefusedUnplacedCollective(built.call);
}

}  // namespace ucclzip
