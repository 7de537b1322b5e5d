// The rest of nccl.h 2.28. Every function is exported, so that a program under LD_PRELOAD never
// reaches the real NCCL with a ucclzip communicator: what ucclzip can do is done (a clique of
// communicators in one process, buffer registration as a no-op, ncclMemAlloc as cudaMalloc),
// the others fail with ncclInvalidUsage and say so in ncclGetLastError (docs/NCCL_API.md).
#include <nccl.h>

#include "absl/strings/str_cat.h"
#include "nccl/comm.h"
#include "nccl/profiling_names.h"
#include "nccl/status.h"
#include "transport/message_tag.h"

namespace ucclzip::nccl {
namespace {

ncclResult_t Unsupported(const char* function) {
  return Report(absl::UnimplementedError(
      absl::StrCat(function, " is not supported by ucclzip's NCCL API (docs/NCCL_API.md)")));
}

// As Unsupported, for a call that makes a communicator: `*made` is set to NULL, as NCCL's is on
// failure, so that a caller that destroys what it got back destroys nothing (an older handle
// left in the variable would have been destroyed).
ncclResult_t UnsupportedCreation(const char* function, ncclComm_t* made) {
  if (made != nullptr) *made = nullptr;
  return Unsupported(function);
}

}  // namespace
}  // namespace ucclzip::nccl

using ucclzip::nccl::Report;
using ucclzip::nccl::Unsupported;
using ucclzip::nccl::UnsupportedCreation;

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return Report(absl::InvalidArgumentError("ncclMemAlloc: ptr is NULL"));
  if (cudaError_t err = cudaMalloc(ptr, size); err != cudaSuccess) {
    cudaGetLastError();
    Report(absl::InternalError(absl::StrCat("ncclMemAlloc of ", size, " bytes: ", cudaGetErrorString(err))));
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void* ptr) {
  if (cudaError_t err = cudaFree(ptr); err != cudaSuccess) {
    cudaGetLastError();
    Report(absl::InternalError(absl::StrCat("ncclMemFree: ", cudaGetErrorString(err))));
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

// One process, one thread, ndev ranks: the creations run together at the group's end. Without
// a usable CUDA device, devlist is not looked at and every rank is a host rank.
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  if (comm == nullptr || ndev < 1) {
    return Report(absl::InvalidArgumentError(absl::StrCat("ncclCommInitAll: comm is NULL or ndev ", ndev, " < 1")));
  }
  // Every rank is created on a thread of its own at the group's end: ndev beyond what a
  // communicator holds started that many threads only for each to fail (or the process to die
  // of too many threads).
  if (ndev > ucclzip::transport::kMaxRanks) {
    return Report(absl::InvalidArgumentError(absl::StrCat("ncclCommInitAll: ndev ", ndev, " exceeds the ",
                                                          ucclzip::transport::kMaxRanks, " ranks a communicator holds")));
  }
  auto device_of = [&](int rank) { return devlist != nullptr ? devlist[rank] : rank; };
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) {
    cudaGetLastError();
    devices = 0;
  }
  for (int rank = 0; rank < ndev && devices > 0; ++rank) {
    if (device_of(rank) < 0 || device_of(rank) >= devices) {
      return Report(absl::InvalidArgumentError(absl::StrCat("ncclCommInitAll: rank ", rank, "'s device ", device_of(rank),
                                                            " is not one of the ", devices, " CUDA devices")));
    }
  }
  ncclUniqueId id;
  if (ncclResult_t result = ncclGetUniqueId(&id); result != ncclSuccess) return result;
  int caller_device = 0;
  if (devices > 0) cudaGetDevice(&caller_device);
  ncclGroupStart();
  // The arguments are valid, so these only queue the creations.
  for (int rank = 0; rank < ndev; ++rank) {
    if (devices > 0) cudaSetDevice(device_of(rank));
    ncclCommInitRank(&comm[rank], ndev, id, rank);
  }
  if (devices > 0) cudaSetDevice(caller_device);
  return ncclGroupEnd();
}

// Registration only speeds NCCL up; ucclzip takes every buffer as it is.
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t, void** handle) {
  if (absl::Status live = ucclzip::nccl::CheckLive(comm, "ncclCommRegister"); !live.ok()) return Report(live);
  if (handle == nullptr) return Report(absl::InvalidArgumentError("ncclCommRegister: handle is NULL"));
  *handle = buff;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void*) {
  if (absl::Status live = ucclzip::nccl::CheckLive(comm, "ncclCommDeregister"); !live.ok()) return Report(live);
  return ncclSuccess;
}

// ucclzip reads its environment at every ncclCommInitRank, so there is nothing to reload.
void ncclResetDebugInit() {}

// Where nccl.h declares it (2.28.9 does, 2.28.3 not): the shim exports what the header declares.
#ifdef UCCLZIP_NCCL_DECLARES_COMM_REVOKE
ncclResult_t ncclCommRevoke(ncclComm_t, int) { return Unsupported("ncclCommRevoke"); }
#endif
ncclResult_t ncclCommSplit(ncclComm_t, int, int, ncclComm_t* newcomm, ncclConfig_t*) {
  return UnsupportedCreation("ncclCommSplit", newcomm);
}
ncclResult_t ncclCommShrink(ncclComm_t, int*, int, ncclComm_t* newcomm, ncclConfig_t*, int) {
  return UnsupportedCreation("ncclCommShrink", newcomm);
}
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int, int, int, ncclUniqueId*, ncclConfig_t*) {
  return UnsupportedCreation("ncclCommInitRankScalable", newcomm);
}
ncclResult_t ncclCommWindowRegister(ncclComm_t, void*, size_t, ncclWindow_t*, int) {
  return Unsupported("ncclCommWindowRegister");
}
ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t) { return Unsupported("ncclCommWindowDeregister"); }
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t) {
  return Unsupported("ncclRedOpCreatePreMulSum");
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t, ncclComm_t) { return Unsupported("ncclRedOpDestroy"); }
ncclResult_t ncclAlltoAll(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) {
  return Unsupported("ncclAlltoAll");
}
ncclResult_t ncclGather(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return Unsupported("ncclGather");
}
ncclResult_t ncclScatter(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return Unsupported("ncclScatter");
}
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) { return Unsupported("ncclGroupSimulateEnd"); }

// The profiling twins of this file's functions (profiling_names.h).
UCCLZIP_NCCL_PROFILING_TWIN(ncclMemAlloc);
UCCLZIP_NCCL_PROFILING_TWIN(ncclMemFree);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommInitAll);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommRegister);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommDeregister);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
UCCLZIP_NCCL_PROFILING_TWIN(ncclResetDebugInit);
#pragma GCC diagnostic pop
#ifdef UCCLZIP_NCCL_DECLARES_COMM_REVOKE
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommRevoke);
#endif
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommSplit);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommShrink);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommInitRankScalable);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommWindowRegister);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommWindowDeregister);
UCCLZIP_NCCL_PROFILING_TWIN(ncclRedOpCreatePreMulSum);
UCCLZIP_NCCL_PROFILING_TWIN(ncclRedOpDestroy);
UCCLZIP_NCCL_PROFILING_TWIN(ncclAlltoAll);
UCCLZIP_NCCL_PROFILING_TWIN(ncclGather);
UCCLZIP_NCCL_PROFILING_TWIN(ncclScatter);
UCCLZIP_NCCL_PROFILING_TWIN(ncclGroupSimulateEnd);
