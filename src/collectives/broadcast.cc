// Broadcast: down a binomial tree up to CommunicatorOptions::tree_broadcast_bytes, along the
// chain above it (docs/COLLECTIVES.md). The choice depends only on the count, the type and an
// option that Create has checked every rank shares, so every rank of a call runs the same
// algorithm.
#include "collectives/collective_args.h"
#include "collectives/schedules.h"

namespace ucclzip {

Operation Communicator::Broadcast(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, int root,
                                  cudaStream_t stream, const CollectiveOptions& options) {
  const bool is_root = root == rank();
  const collectives::CollectiveArgs args{
      .name = collectives::OperationName(rank(), pipeline::OperationKind::kBroadcast, count, dtype, ReduceOp::kSum, root),
      .sendbuff = is_root ? sendbuff : nullptr,
      .recvbuff = recvbuff,
      .count = count,
      .send_elements = is_root ? count : 0,
      .recv_elements = count,
      .dtype = dtype,
      .world_size = size(),
      .root = root};
  absl::Status refused = collectives::CheckArgs(args);
  if (!refused.ok() && !collectives::Schedulable(args)) {
    return RefusedUnplacedCollective(collectives::UnschedulableCall(pipeline::OperationKind::kBroadcast, args, refused));
  }
  const bool in_place = collectives::InPlace(args);
  pipeline::Schedule schedule =
      collectives::TakesSmallAlgorithm(uint64_t{count} * ElementSize(dtype), this->options().tree_broadcast_bytes)
          ? collectives::BinomialTreeBroadcast(rank(), size(), count, root, in_place)
          : collectives::ChainBroadcast(rank(), size(), count, root, in_place);
  return Submit(collectives::MakeCall(std::move(schedule), args, stream, options, std::move(refused)));
}

}  // namespace ucclzip
