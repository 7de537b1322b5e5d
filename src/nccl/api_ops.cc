// NCCL's collectives and point-to-point calls over Communicator's. Each checks NCCL's
// arguments that ucclzip's API does not have (comm, type and operator enums), posts the call
// (inside the thread's group if one is open) and reports as NCCL does: a bad argument at once;
// otherwise the call only enqueues on `stream`, and a later failure is the communicator's
// async error. A null stream has nothing to order the operation after, so such a call returns
// once it has completed (at ncclGroupEnd in a group): the shim's extension that lets host
// buffers be used without any CUDA call (docs/NCCL_API.md).
#include <nccl.h>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nccl/comm.h"
#include "nccl/group.h"
#include "nccl/profiling_names.h"
#include "nccl/status.h"

namespace ucclzip::nccl {
namespace {

absl::StatusOr<DataType> TypeOf(ncclDataType_t type, const char* function) {
  switch (type) {
    case ncclInt8: return DataType::kInt8;
    case ncclUint8: return DataType::kUint8;
    case ncclInt32: return DataType::kInt32;
    case ncclUint32: return DataType::kUint32;
    case ncclInt64: return DataType::kInt64;
    case ncclUint64: return DataType::kUint64;
    case ncclFloat16: return DataType::kFloat16;
    case ncclFloat32: return DataType::kFloat32;
    case ncclFloat64: return DataType::kFloat64;
    case ncclBfloat16: return DataType::kBFloat16;
    case ncclFloat8e4m3: return DataType::kFloat8E4M3;
    case ncclFloat8e5m2: return DataType::kFloat8E5M2;
    case ncclNumTypes: break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(function, ": datatype ", static_cast<int>(type), " is not an ncclDataType_t"));
}

absl::StatusOr<ReduceOp> OpOf(ncclRedOp_t op, const char* function) {
  switch (op) {
    case ncclSum: return ReduceOp::kSum;
    case ncclProd: return ReduceOp::kProd;
    case ncclMax: return ReduceOp::kMax;
    case ncclMin: return ReduceOp::kMin;
    case ncclAvg: return ReduceOp::kAvg;
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      function, ": reduction operator ", static_cast<int>(op),
      " is not one of ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg (ucclzip has no ncclRedOpCreatePreMulSum)"));
}

using Post = absl::FunctionRef<Operation(Communicator&)>;

ncclResult_t Enqueue(ncclComm* comm, cudaStream_t stream, const char* function, Post post) {
  if (absl::Status usable = CheckUsable(comm, function); !usable.ok()) return ReportInGroup(usable);
  const bool grouped = InGroup();
  if (grouped) JoinGroup(comm, stream == nullptr);
  const Operation operation = post(*comm->communicator);
  // Argument errors fail the Operation before anything is posted, and as in NCCL only the call
  // returns them. A call refused because the communicator itself failed (a peer already known
  // gone, an abort) fails at once too, but that failure is also the communicator's async error,
  // as it is when it comes a moment later: which of the two a peer's exit meets is a race.
  if (operation.Test()) {
    if (absl::Status status = operation.Wait(absl::ZeroDuration()); !status.ok()) {
      if (ResultOf(status) == ncclRemoteError) comm->Track(operation);
      return ReportInGroup(status);
    }
  }
  if (grouped) {
    TrackAtGroupEnd(comm, operation);
    return ncclSuccess;
  }
  if (stream != nullptr) {
    comm->Track(operation);
    return ncclSuccess;
  }
  // A null stream's call returns its own outcome, which is then not the async error (only
  // operations that complete after their call returned are, docs/NCCL_API.md), but for the
  // communicator's own failure (a peer gone, an abort), which later calls meet too. Tracked
  // meanwhile, so that ncclCommFinalize and ncclCommDestroy from another thread wait for it.
  comm->Track(operation, /*failure_is_async_error=*/false);
  const absl::Status status = operation.Wait();
  if (ResultOf(status) == ncclRemoteError) comm->Track(operation);
  return Report(status);
}

// Enqueue for the calls that take a type (and, `reducing`, an operator).
template <typename Call>
ncclResult_t EnqueueTyped(ncclComm* comm, cudaStream_t stream, const char* function, ncclDataType_t datatype,
                          Call call) {
  absl::StatusOr<DataType> type = TypeOf(datatype, function);
  if (!type.ok()) return ReportInGroup(type.status());
  return Enqueue(comm, stream, function, [&](Communicator& c) { return call(c, *type); });
}

template <typename Call>
ncclResult_t EnqueueReducing(ncclComm* comm, cudaStream_t stream, const char* function, ncclDataType_t datatype,
                             ncclRedOp_t op, Call call) {
  absl::StatusOr<ReduceOp> reduce = OpOf(op, function);
  if (!reduce.ok()) return ReportInGroup(reduce.status());
  return EnqueueTyped(comm, stream, function, datatype, [&](Communicator& c, DataType type) { return call(c, type, *reduce); });
}

}  // namespace
}  // namespace ucclzip::nccl

using ucclzip::Communicator;
using ucclzip::DataType;
using ucclzip::ReduceOp;
using ucclzip::nccl::EnqueueReducing;
using ucclzip::nccl::EnqueueTyped;

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return EnqueueReducing(comm, stream, "ncclAllReduce", datatype, op, [&](Communicator& c, DataType type, ReduceOp reduce) {
    return c.AllReduce(sendbuff, recvbuff, count, type, reduce, stream);
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return EnqueueReducing(comm, stream, "ncclReduceScatter", datatype, op,
                         [&](Communicator& c, DataType type, ReduceOp reduce) {
                           return c.ReduceScatter(sendbuff, recvbuff, recvcount, type, reduce, stream);
                         });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return EnqueueReducing(comm, stream, "ncclReduce", datatype, op, [&](Communicator& c, DataType type, ReduceOp reduce) {
    return c.Reduce(sendbuff, recvbuff, count, type, reduce, root, stream);
  });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return EnqueueTyped(comm, stream, "ncclAllGather", datatype, [&](Communicator& c, DataType type) {
    return c.AllGather(sendbuff, recvbuff, sendcount, type, stream);
  });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return EnqueueTyped(comm, stream, "ncclBroadcast", datatype, [&](Communicator& c, DataType type) {
    return c.Broadcast(sendbuff, recvbuff, count, type, root, stream);
  });
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return EnqueueTyped(comm, stream, "ncclBcast", datatype, [&](Communicator& c, DataType type) {
    return c.Broadcast(buff, buff, count, type, root, stream);
  });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return EnqueueTyped(comm, stream, "ncclSend", datatype, [&](Communicator& c, DataType type) {
    return c.Send(sendbuff, count, type, peer, stream);
  });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return EnqueueTyped(comm, stream, "ncclRecv", datatype, [&](Communicator& c, DataType type) {
    return c.Recv(recvbuff, count, type, peer, stream);
  });
}

ncclResult_t ncclGroupStart() { return ucclzip::nccl::GroupStart(); }
ncclResult_t ncclGroupEnd() { return ucclzip::nccl::GroupEnd(); }

// The profiling twins of this file's functions (profiling_names.h).
UCCLZIP_NCCL_PROFILING_TWIN(ncclAllReduce);
UCCLZIP_NCCL_PROFILING_TWIN(ncclReduceScatter);
UCCLZIP_NCCL_PROFILING_TWIN(ncclReduce);
UCCLZIP_NCCL_PROFILING_TWIN(ncclAllGather);
UCCLZIP_NCCL_PROFILING_TWIN(ncclBroadcast);
UCCLZIP_NCCL_PROFILING_TWIN(ncclBcast);
UCCLZIP_NCCL_PROFILING_TWIN(ncclSend);
UCCLZIP_NCCL_PROFILING_TWIN(ncclRecv);
UCCLZIP_NCCL_PROFILING_TWIN(ncclGroupStart);
UCCLZIP_NCCL_PROFILING_TWIN(ncclGroupEnd);
