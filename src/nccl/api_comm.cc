// NCCL's communicator lifecycle and queries over ucclzip's Communicator and bootstrap: the
// 128-byte ncclUniqueId is ucclzip's UniqueId (rank 0's address and port and a random token),
// and the communicator's options come from the UCCLZIP_* variables (docs/CONFIGURATION.md).
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "nccl/clique.h"
#include "nccl/comm.h"
#include "nccl/config.h"
#include "nccl/environment.h"
#include "nccl/group.h"
#include "nccl/profiling_names.h"
#include "nccl/status.h"
#include "ucclzip/bootstrap.h"

namespace ucclzip::nccl {
namespace {

static_assert(sizeof(ncclUniqueId::internal) == sizeof(UniqueId::bytes), "an ncclUniqueId carries a ucclzip UniqueId");

int CurrentCudaDevice() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();  // no usable device: host buffers only
    return -1;
  }
  return device;
}

// Creates `comm`'s Communicator: the bootstrap from the id; the options are the built-in ones,
// which Communicator::Create overrides with the UCCLZIP_* variables that are set.
absl::Status Create(ncclComm* comm, int nranks, const ncclUniqueId& id, int rank) {
  // Read before the id is: rank 0's config takes over the id's listening socket, which
  // Communicator::Create then closes whatever happens, and an exit between the two would leak it.
  absl::StatusOr<absl::Duration> timeout = BootstrapTimeoutFromEnvironment(BootstrapConfig{}.timeout);
  if (!timeout.ok()) {
    return absl::Status(timeout.status().code(),
                        absl::StrCat("ncclCommInitRank (rank ", rank, " of ", nranks, "): ", timeout.status().message()));
  }
  UniqueId ucclzip_id;
  std::memcpy(ucclzip_id.bytes.data(), id.internal, ucclzip_id.bytes.size());
  absl::StatusOr<BootstrapConfig> bootstrap = BootstrapConfigFromUniqueId(ucclzip_id, rank, nranks);
  // Named like the other errors of the call: the id's own said neither call nor rank.
  if (!bootstrap.ok()) {
    return absl::Status(bootstrap.status().code(), absl::StrCat("ncclCommInitRank (rank ", rank, " of ", nranks,
                                                                "): ", bootstrap.status().message()));
  }
  bootstrap->timeout = *timeout;
  absl::StatusOr<std::unique_ptr<Communicator>> communicator = Communicator::Create({.bootstrap = *bootstrap});
  if (!communicator.ok()) return communicator.status();
  comm->communicator = std::move(*communicator);
  return absl::OkStatus();
}

// Closes the listening socket that ncclGetUniqueId keeps for rank 0 of `id`, where rank 0's
// creation is abandoned and will not take it: it would outlive the failure, port and all.
void CloseRankZeroListener(const ncclUniqueId& id, int nranks) {
  UniqueId ucclzip_id;
  std::memcpy(ucclzip_id.bytes.data(), id.internal, ucclzip_id.bytes.size());
  absl::StatusOr<BootstrapConfig> rank_zero = BootstrapConfigFromUniqueId(ucclzip_id, 0, nranks);
  if (rank_zero.ok() && rank_zero->listen_fd >= 0) close(rank_zero->listen_fd);
}

ncclResult_t InitRank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* config) {
  // Inside a group its argument errors fail the group's end too, as NCCL's (ncclGroupErrCheck).
  if (comm == nullptr) return ReportInGroup(absl::InvalidArgumentError("ncclCommInitRank: comm is NULL"));
  *comm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return ReportInGroup(absl::InvalidArgumentError(
        absl::StrCat("ncclCommInitRank: rank ", rank, " is not a rank of a world of ", nranks)));
  }
  if (config != nullptr) {
    if (absl::Status checked = CheckConfig(*config, absl::StrCat("ncclCommInitRankConfig (rank ", rank, " of ", nranks, ")"));
        !checked.ok()) {
      return ReportInGroup(checked);
    }
  }
  auto created = std::make_unique<ncclComm>();
  created->cuda_device = CurrentCudaDevice();
  std::copy(std::begin(id.internal), std::end(id.internal), created->clique.begin());
  ncclComm* raw = created.get();
  if (InGroup()) {
    raw->creating.store(true);
    auto created_as = [raw](absl::Status status) {
      raw->creation_failure = status;
      raw->creating.store(false, std::memory_order_release);
      return status;
    };
    DeferToGroupEnd({.run = [=] { return created_as(Create(raw, nranks, id, rank)); },
                     .abandon = [=](const absl::Status& why) {
                       if (rank == 0) CloseRankZeroListener(id, nranks);
                       return created_as(why);
                     }});
    RegisterLive(raw);
    *comm = created.release();
    return ncclSuccess;
  }
  if (absl::Status status = Create(raw, nranks, id, rank); !status.ok()) return Report(status);
  RegisterLive(raw);
  *comm = created.release();
  return ncclSuccess;
}

// Destroys `comm` once its operations completed (bounded by its operation timeout); inside a
// group at its end, together with the group's other destructions.
ncclResult_t Destroy(ncclComm_t comm, bool abort, const char* function) {
  if (comm == nullptr) return ncclSuccess;  // as NCCL's: nothing to destroy, like free(NULL)
  if (absl::Status live = CheckLive(comm, function); !live.ok()) return Report(live);
  if (GroupHolds(comm) || comm->creating.load(std::memory_order_acquire)) {
    return Report(absl::FailedPreconditionError(absl::StrCat(
        function, ": the communicator is created or has operations in the open group; end the group first")));
  }
  // A second destruction in the group would free it twice at the group's end.
  if (comm->destroying) {
    return Report(absl::FailedPreconditionError(
        absl::StrCat(function, ": the communicator is already destroyed at the end of the open group")));
  }
  // `why`, where given, says why the group's end could not destroy it alongside the others: it
  // is then aborted, which waits for no other rank.
  auto destroy = [comm, abort, function](const absl::Status& why) {
    // Operations still running when the wait gave up end with the communicator: the caller
    // learns so, though the handle is gone either way.
    absl::Status outcome = why;
    const bool aborting = abort || !why.ok();
    if (comm->communicator != nullptr) {
      if (aborting) {
        comm->communicator->Abort();
      } else {
        outcome = comm->WaitForAll(comm->communicator->options().op_timeout, function);
      }
    }
    UnregisterLive(comm);
    // Ends now where it waits for no other rank (aborted, or never created), or where operations
    // are still running: kept, they would run on into the caller's buffers after it was told
    // they failed; its end (as before session 41) stops them.
    EndWithItsClique(comm, aborting || comm->communicator == nullptr || !outcome.ok());
    return outcome;
  };
  if (InGroup()) {
    // Until then no call may use it (CheckUsable): the group's end destroys it before it posts
    // the group's operations, which would then use a freed communicator.
    comm->destroying = true;
    DeferToGroupEnd({.run = [=] { return destroy(absl::OkStatus()); }, .abandon = destroy});
    return ncclSuccess;
  }
  return Report(destroy(absl::OkStatus()));
}

}  // namespace
}  // namespace ucclzip::nccl

using ucclzip::nccl::CheckLive;
using ucclzip::nccl::CheckUsable;
using ucclzip::nccl::Report;

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return Report(absl::InvalidArgumentError("ncclGetVersion: version is NULL"));
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr) return Report(absl::InvalidArgumentError("ncclGetUniqueId: uniqueId is NULL"));
  absl::StatusOr<ucclzip::UniqueId> id = ucclzip::GetUniqueId();
  if (!id.ok()) return Report(id.status());
  std::memcpy(uniqueId->internal, id->bytes.data(), id->bytes.size());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return ucclzip::nccl::InitRank(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
  return ucclzip::nccl::InitRank(comm, nranks, commId, rank, config);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (absl::Status usable = CheckUsable(comm, "ncclCommFinalize"); !usable.ok()) return Report(usable);
  // Its calls in the open group are posted only at the group's end: it would wait for them in
  // vain for the whole operation timeout.
  if (ucclzip::nccl::GroupHolds(comm)) {
    return Report(absl::FailedPreconditionError(
        "ncclCommFinalize: the communicator has operations in the open group; end the group first"));
  }
  const absl::Status waited = comm->WaitForAll(comm->communicator->options().op_timeout, "ncclCommFinalize");
  // What the operations came to: the first failure among them, as ncclCommGetAsyncError says;
  // never success while one is still running (its buffers are still in use).
  absl::Status outcome = comm->AsyncError();
  outcome.Update(waited);
  return Report(outcome);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return ucclzip::nccl::Destroy(comm, false, "ncclCommDestroy"); }

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ucclzip::nccl::Destroy(comm, true, "ncclCommAbort"); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (asyncError == nullptr) return Report(absl::InvalidArgumentError("ncclCommGetAsyncError: asyncError is NULL"));
  if (absl::Status live = CheckLive(comm, "ncclCommGetAsyncError"); !live.ok()) return Report(live);
  // As NCCL's for a communicator whose creation has not finished (here: created at the end of
  // the open group).
  if (comm->creating.load(std::memory_order_acquire)) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  *asyncError = Report(comm->AsyncError());
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (absl::Status usable = CheckUsable(comm, "ncclCommCount"); !usable.ok()) return Report(usable);
  if (count == nullptr) return Report(absl::InvalidArgumentError("ncclCommCount: count is NULL"));
  *count = comm->communicator->size();
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (absl::Status usable = CheckUsable(comm, "ncclCommUserRank"); !usable.ok()) return Report(usable);
  if (rank == nullptr) return Report(absl::InvalidArgumentError("ncclCommUserRank: rank is NULL"));
  *rank = comm->communicator->rank();
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (absl::Status live = CheckLive(comm, "ncclCommCuDevice"); !live.ok()) return Report(live);
  if (device == nullptr) return Report(absl::InvalidArgumentError("ncclCommCuDevice: device is NULL"));
  *device = comm->cuda_device;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclNumResults: break;
  }
  return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t) { return ucclzip::nccl::LastError(); }

// The profiling twins of this file's functions (profiling_names.h).
UCCLZIP_NCCL_PROFILING_TWIN(ncclGetVersion);
UCCLZIP_NCCL_PROFILING_TWIN(ncclGetUniqueId);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommInitRank);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommInitRankConfig);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommFinalize);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommDestroy);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommAbort);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommGetAsyncError);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommCount);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommUserRank);
UCCLZIP_NCCL_PROFILING_TWIN(ncclCommCuDevice);
UCCLZIP_NCCL_PROFILING_TWIN(ncclGetErrorString);
UCCLZIP_NCCL_PROFILING_TWIN(ncclGetLastError);
