// Chain reduce towards the root: root+1 -> root+2 -> ... -> root-1 -> root (ranks modulo n),
// pipelined by blocks. The chain's head sends its input; every later rank combines each block
// it receives with its own elements (received op local) and sends the result on, re-encoded,
// as soon as that block is combined, so that block b+1 arrives while block b is reduced; the
// root combines into its output (avg divides there). The order is thus
// ((in[root+1] op in[root+2]) op ...) op in[root], the ring reduce-scatter's order for chunk
// `root`. Its n - 1 hops cut its data into more blocks than one hop's, as the broadcast chain's
// (Schedule::chain_hops). The head never receives data, so the root answers it with an empty
// message once its first block has arrived: a head whose peers called something else fails
// too, as in broadcast_chain.cc.
#include <algorithm>

#include "collectives/collective_args.h"
#include "collectives/schedules.h"

namespace ucclzip {
namespace collectives {

Schedule ChainReduce(int rank, int size, uint64_t count, ReduceOp op, int root, bool in_place) {
  Schedule schedule{.kind = pipeline::OperationKind::kReduce,
                    .op = op,
                    .root = root,
                    .count = count,
                    .name = "reduce",
                    .chain_hops = static_cast<uint32_t>(std::max(size - 1, 1))};
  const int position = (rank - root + size) % size;
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  const Chunk input{BufferRole::kInput, 0, count};
  const Chunk nothing{BufferRole::kOutput, 0, 0};
  const int head = (root + 1) % size;
  if (position == 0) {
    const Chunk output{BufferRole::kOutput, 0, count};
    if (size == 1) {
      if (!in_place) schedule.copies.push_back({input, output});
      return schedule;
    }
    schedule.recvs.push_back({.peer = previous,
                              .count = count,
                              .into = output,
                              .reduce_with = input,
                              .divisor = op == ReduceOp::kAvg ? static_cast<uint32_t>(size) : 1});
    schedule.sends.push_back({.peer = head, .chunk = nothing, .recv_step = 0});
    return schedule;
  }
  if (position == 1) {
    schedule.sends.push_back({.peer = next, .chunk = input});
    schedule.recvs.push_back({.peer = root, .count = 0, .into = nothing});
    return schedule;
  }
  schedule.recvs.push_back({.peer = previous, .count = count, .reduce_with = input});
  schedule.sends.push_back({.peer = next, .chunk = input, .source = SendStep::Source::kReduced, .recv_step = 0});
  return schedule;
}

}  // namespace collectives

Operation Communicator::Reduce(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, ReduceOp op, int root,
                               cudaStream_t stream, const CollectiveOptions& options) {
  const bool is_root = root == rank();
  const collectives::CollectiveArgs args{
      .kind = pipeline::OperationKind::kReduce,
      .rank = rank(),
      .sendbuff = sendbuff,
      .recvbuff = is_root ? recvbuff : nullptr,
      .count = count,
      .send_elements = count,
      .recv_elements = is_root ? count : 0,
      .dtype = dtype,
      .reduces = true,
      .op = op,
      .world_size = size(),
      .root = root};
  collectives::CollectiveCall built = collectives::BuildCall(args, stream, options, [&](bool in_place) {
    return collectives::ChainReduce(rank(), size(), count, op, root, is_root && in_place);
  });
  return built.placed ? Submit(std::move(built.call)) : RefusedUnplacedCollective(built.call);
}

}  // namespace ucclzip
