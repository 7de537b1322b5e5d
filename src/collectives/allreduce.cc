// AllReduce: recursive doubling up to CommunicatorOptions::recursive_doubling_bytes, the ring
// above it (docs/COLLECTIVES.md). The choice depends only on the count, the type and an option
// that Create has checked every rank shares, so every rank of a call runs the same algorithm.
#include "collectives/collective_args.h"
#include "collectives/schedules.h"

namespace ucclzip {

Operation Communicator::AllReduce(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, ReduceOp op,
                                  cudaStream_t stream, const CollectiveOptions& options) {
  const collectives::CollectiveArgs args{
      .kind = pipeline::OperationKind::kAllReduce,
      .rank = rank(),
      .sendbuff = sendbuff,
      .recvbuff = recvbuff,
      .count = count,
      .send_elements = count,
      .recv_elements = count,
      .dtype = dtype,
      .reduces = true,
      .op = op,
      .world_size = size()};
  const bool small =
      collectives::TakesSmallAlgorithm(uint64_t{count} * ElementSize(dtype), this->options().recursive_doubling_bytes);
  collectives::CollectiveCall built = collectives::BuildCall(args, stream, options, [&](bool in_place) {
    return small ? collectives::RecursiveDoublingAllReduce(rank(), size(), count, op, in_place)
                 : collectives::RingAllReduce(rank(), size(), count, op, in_place);
  });
  return built.placed ? Submit(std::move(built.call)) : RefusedUnplacedCollective(built.call);
}

}  // namespace ucclzip
