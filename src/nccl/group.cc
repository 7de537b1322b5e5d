#include "nccl/group.h"

#include <algorithm>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "nccl/comm.h"
#include "nccl/status.h"
#include "pipeline/stream_order.h"

namespace ucclzip::nccl {
namespace {

struct Group {
  int depth = 0;
  std::vector<ncclComm*> comms;  // in the order they joined
  bool wait_at_end = false;
  std::vector<DeferredStep> deferred;
  absl::Status error;  // the first call of the group that failed at once
  std::vector<std::pair<ncclComm*, Operation>> calls;  // TrackAtGroupEnd's
};

thread_local Group group;

}  // namespace

absl::Status RunConcurrently(std::vector<DeferredStep> steps, const char* function) {
  absl::Mutex mutex;
  bool released = false;
  absl::Status not_started;
  std::vector<absl::Status> results(steps.size());
  std::vector<std::thread> threads;
  threads.reserve(steps.size());
  auto body = [&](size_t i) {
    absl::Status why;
    {
      absl::MutexLock lock(&mutex);
      mutex.Await(absl::Condition(&released));
      why = not_started;
    }
    results[i] = why.ok() ? steps[i].run() : steps[i].abandon(why);
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    try {
      threads.emplace_back(body, i);
    } catch (const std::exception& failure) {  // std::system_error, or std::bad_alloc
      absl::MutexLock lock(&mutex);
      not_started = absl::ResourceExhaustedError(absl::StrCat(
          function, ": could not start a thread for each of its ", steps.size(),
          " communicator creations and destructions (", threads.size(), " started: ", failure.what(), ")"));
      break;
    }
  }
  {
    absl::MutexLock lock(&mutex);
    released = true;
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t i = threads.size(); i < steps.size(); ++i) results[i] = steps[i].abandon(not_started);
  absl::Status first;
  for (const absl::Status& result : results) first.Update(result);
  return first;
}

bool InGroup() { return group.depth > 0; }

void JoinGroup(ncclComm* comm, bool null_stream) {
  group.wait_at_end |= null_stream;
  if (GroupHolds(comm)) return;
  comm->communicator->GroupStart();
  group.comms.push_back(comm);
}

bool GroupHolds(const ncclComm* comm) {
  return std::find(group.comms.begin(), group.comms.end(), comm) != group.comms.end();
}

void DeferToGroupEnd(DeferredStep step) { group.deferred.push_back(std::move(step)); }

void TrackAtGroupEnd(ncclComm* comm, const Operation& operation) { group.calls.emplace_back(comm, operation); }

ncclResult_t ReportInGroup(const absl::Status& status) {
  if (InGroup()) group.error.Update(status);
  return Report(status);
}

ncclResult_t GroupStart() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t GroupEnd() {
  if (group.depth == 0) return Report(absl::FailedPreconditionError("ncclGroupEnd without ncclGroupStart"));
  if (--group.depth > 0) return ncclSuccess;
  Group ended = std::move(group);
  group = Group();
  absl::Status status = ended.error;
  status.Update(RunConcurrently(std::move(ended.deferred), "ncclGroupEnd"));
  std::vector<Operation> posted;
  {
    // Every communicator's group is posted before any call waits to be done: on the direct
    // path a call returns only once done, and one on the first communicator would wait for
    // the ranks of the next ones, which this thread has not posted yet (ncclCommInitAll).
    pipeline::ReturnWhenDoneScope post_all_first;
    // The group's Operation is not tracked for the async error: it covers the calls refused in
    // the group too (argument errors, which only those calls and this GroupEnd return), and
    // each posted call's own Operation is tracked already (Enqueue).
    for (ncclComm* comm : ended.comms) posted.push_back(comm->communicator->GroupEnd());
  }
  // Calls that posting the group refused have failed by now; they are argument errors, which
  // only this GroupEnd returns (until session 40 a group on streams returned success, and the
  // refusal surfaced only as the communicator's async error).
  for (const auto& [comm, operation] : ended.calls) {
    if (operation.Test()) {
      if (absl::Status failed = operation.Wait(absl::ZeroDuration()); !failed.ok()) {
        status.Update(failed);
        if (ResultOf(failed) != ncclRemoteError) continue;
      }
    }
    comm->Track(operation);
  }
  if (ended.wait_at_end) {
    for (const Operation& operation : posted) status.Update(operation.Wait());
  }
  return Report(status);
}

}  // namespace ucclzip::nccl
