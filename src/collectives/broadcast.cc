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
      .kind = pipeline::OperationKind::kBroadcast,
      .rank = rank(),
      .sendbuff = is_root ? sendbuff : nullptr,
      .recvbuff = recvbuff,
      .count = count,
      .send_elements = is_root ? count : 0,
      .recv_elements = count,
      .dtype = dtype,
      .world_size = size(),
      .root = root};
  const bool small = collectives::TakesSmallAlgorithm(uint64_t{count} * ElementSize(dtype), this->options().tree_broadcast_bytes);
  collectives::CollectiveCall built = collectives::BuildCall(args, stream, options, [&](bool in_place) {
    return small ? collectives::BinomialTreeBroadcast(rank(), size(), count, root, in_place)
                 : collectives::ChainBroadcast(rank(), size(), count, root, in_place);
  });
  return built.placed ? Submit(std::move(built.call)) : RefusedUnplacedCollective(built.call);
}

}  // namespace ucclzip
