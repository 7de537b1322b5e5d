// Send and Recv: the simplest schedules, one step each.
#include "absl/strings/str_cat.h"
#include "collectives/schedules.h"
#include "pipeline/engine.h"

namespace ucclzip {
namespace collectives {

pipeline::Schedule SendSchedule(int peer, uint64_t count) {
  pipeline::Schedule schedule{.count = count, .name = absl::StrCat("send to peer ", peer)};
  schedule.sends.push_back({.peer = peer, .chunk = {pipeline::BufferRole::kInput, 0, count}});
  return schedule;
}

pipeline::Schedule RecvSchedule(int peer, uint64_t count) {
  pipeline::Schedule schedule{.count = count, .name = absl::StrCat("recv from peer ", peer)};
  schedule.recvs.push_back({.peer = peer, .count = count, .into = pipeline::Chunk{pipeline::BufferRole::kOutput, 0, count}});
  return schedule;
}

}  // namespace collectives

Operation Communicator::Send(const void* buf, size_t count, DataType dtype, int peer, cudaStream_t stream,
                             const SendOptions& options) {
  return Submit(pipeline::Call{.schedule = collectives::SendSchedule(peer, count),
                               .input = buf,
                               .dtype = dtype,
                               .stream = stream,
                               .compression = options.compression,
                               .tensor_id = options.tensor_id,
                               .timeout = options.timeout});
}

Operation Communicator::Recv(void* buf, size_t count, DataType dtype, int peer, cudaStream_t stream,
                             const RecvOptions& options) {
  return Submit(pipeline::Call{.schedule = collectives::RecvSchedule(peer, count),
                               .output = buf,
                               .dtype = dtype,
                               .stream = stream,
                               .timeout = options.timeout});
}

}  // namespace ucclzip
