// NCCL's group semantics on top of ucclzip's per-communicator groups. ncclGroupStart and
// ncclGroupEnd are per thread and nest; inside, every operation joins its communicator's
// ucclzip group (Communicator::GroupStart on first use), and the outermost ncclGroupEnd posts
// every communicator's group at once. Creating and destroying communicators inside a group is
// deferred to its end and done for all of them concurrently, which is how one thread drives
// several ranks (each creation and destruction waits for the other ranks).
#pragma once

#include <nccl.h>

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "ucclzip/communicator.h"

namespace ucclzip::nccl {

// True between the thread's outermost ncclGroupStart and its ncclGroupEnd.
bool InGroup();

// Adds `comm` to the thread's open group (once; it starts the communicator's group) and
// notes whether the call had a null stream, for which ncclGroupEnd waits (docs/NCCL_API.md).
void JoinGroup(ncclComm* comm, bool null_stream);

// True if `comm` is in the thread's open group.
bool GroupHolds(const ncclComm* comm);

// A creation or destruction that waits for the end of the group.
struct DeferredStep {
  std::function<absl::Status()> run;
  // Instead of `run`, where the group's end could not start a thread for every step: told why,
  // it leaves the communicator in a state that waits for no other rank, and returns the failure.
  std::function<absl::Status(const absl::Status& why)> abandon;
};

// Runs `step` at the outermost ncclGroupEnd, concurrently with the group's other deferred steps.
void DeferToGroupEnd(DeferredStep step);

// Runs the steps on a thread each (every one blocks until the other ranks take part) and
// returns the first failure. Every thread is started before any step runs: a step left without
// a thread would leave the ranks it waits for waiting until their timeout, so where a thread
// cannot be started (the process is out of threads or memory) none runs, each is abandoned, and
// the call (`function`) fails, where an uncaught std::system_error used to end the process.
absl::Status RunConcurrently(std::vector<DeferredStep> steps, const char* function);

// Keeps a grouped call's Operation for the outermost ncclGroupEnd, which returns the failure of a
// call refused when the group is posted (a self-send without its receive, calls that race for a
// buffer: argument errors, not the communicator's) and has `comm` track the others for its
// async error, as Enqueue does for a call outside a group.
void TrackAtGroupEnd(ncclComm* comm, const Operation& operation);

// Reports a call's failure as Report does and, inside a group, keeps the group's first such
// failure for the outermost ncclGroupEnd to return, as NCCL does (ncclGroupErrCheck).
ncclResult_t ReportInGroup(const absl::Status& status);

ncclResult_t GroupStart();
ncclResult_t GroupEnd();

}  // namespace ucclzip::nccl
