#include "pipeline/schedule.h"

namespace ucclzip::pipeline {

const char* OperationKindName(OperationKind kind) {
  switch (kind) {
    case OperationKind::kSendRecv: return "sendrecv";
    case OperationKind::kAllGather: return "allgather";
    case OperationKind::kReduceScatter: return "reducescatter";
    case OperationKind::kAllReduce: return "allreduce";
    case OperationKind::kBroadcast: return "broadcast";
    case OperationKind::kReduce: return "reduce";
  }
  return "invalid";
}

}  // namespace ucclzip::pipeline
