#include "nccl/comm.h"

#include <algorithm>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

void ncclComm::Track(const ucclzip::Operation& operation, bool failure_is_async_error) {
  absl::MutexLock lock(&mutex_);
  ForgetCompletedLocked();
  in_flight_.push_back({operation, failure_is_async_error});
}

absl::Status ncclComm::AsyncError() {
  if (!creation_failure.ok()) return creation_failure;
  absl::MutexLock lock(&mutex_);
  ForgetCompletedLocked();
  return async_error_;
}

absl::Status ncclComm::WaitForAll(absl::Duration quiet_limit, const char* function) {
  while (true) {
    std::vector<ucclzip::Operation> waiting;
    {
      absl::MutexLock lock(&mutex_);
      ForgetCompletedLocked();
      for (const Tracked& tracked : in_flight_) waiting.push_back(tracked.operation);
    }
    if (waiting.empty()) return absl::OkStatus();
    const absl::Time deadline = absl::Now() + quiet_limit;
    for (const ucclzip::Operation& operation : waiting) operation.Wait(deadline - absl::Now()).IgnoreError();
    const auto completed = std::count_if(waiting.begin(), waiting.end(),
                                         [](const ucclzip::Operation& operation) { return operation.Test(); });
    if (completed == 0) {
      return absl::DeadlineExceededError(absl::StrCat(
          function, ": rank ", communicator->rank(), " of ", communicator->size(), ": ", waiting.size(),
          waiting.size() == 1 ? " operation" : " operations", " still running after ",
          absl::FormatDuration(quiet_limit), " without any completing"));
    }
  }
}

void ncclComm::ForgetCompletedLocked() {
  std::erase_if(in_flight_, [&](const Tracked& tracked) {
    if (!tracked.operation.Test()) return false;
    if (async_error_.ok() && tracked.failure_is_async_error) async_error_ = tracked.operation.Wait(absl::ZeroDuration());
    return true;
  });
}

namespace ucclzip::nccl {
namespace {

struct LiveCommunicators {
  absl::Mutex mutex;
  std::unordered_set<const ncclComm*> live ABSL_GUARDED_BY(mutex);
};

LiveCommunicators& Live() {
  static auto* live = new LiveCommunicators;  // never destroyed: calls may come during exit
  return *live;
}

}  // namespace

void RegisterLive(const ncclComm* comm) {
  absl::MutexLock lock(&Live().mutex);
  Live().live.insert(comm);
}

void UnregisterLive(const ncclComm* comm) {
  absl::MutexLock lock(&Live().mutex);
  Live().live.erase(comm);
}

absl::Status CheckLive(const ncclComm* comm, const char* function) {
  if (comm == nullptr) return absl::InvalidArgumentError(absl::StrCat(function, ": comm is NULL"));
  absl::MutexLock lock(&Live().mutex);
  if (!Live().live.contains(comm)) {
    return absl::InvalidArgumentError(absl::StrCat(function, ": comm ", absl::StrFormat("%p", comm),
                                                   " is not a communicator: destroyed already, or never created"));
  }
  return absl::OkStatus();
}

bool AnyLiveRankOf(const std::array<char, NCCL_UNIQUE_ID_BYTES>& clique) {
  absl::MutexLock lock(&Live().mutex);
  return std::any_of(Live().live.begin(), Live().live.end(),
                     [&](const ncclComm* comm) { return comm->clique == clique && !comm->destroying; });
}

absl::Status CheckUsable(const ncclComm* comm, const char* function) {
  if (absl::Status live = CheckLive(comm, function); !live.ok()) return live;
  if (comm->creating.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(absl::StrCat(
        function, ": the communicator is created only at the end of the group that called ncclCommInitRank"));
  }
  if (comm->destroying) {
    return absl::FailedPreconditionError(absl::StrCat(
        function, ": the communicator is destroyed at the end of the open group (ncclCommDestroy or ncclCommAbort)"));
  }
  if (comm->communicator == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(function, ": the communicator's creation failed"));
  }
  return absl::OkStatus();
}

}  // namespace ucclzip::nccl
