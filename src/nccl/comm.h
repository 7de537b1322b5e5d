// What an ncclComm_t points to: a ucclzip Communicator, the CUDA device that was current when
// it was made, and the operations it has in flight, so that ncclCommGetAsyncError can report
// a failure that happened after the call returned (NCCL's asynchronous errors).
#pragma once

#include <nccl.h>

#include <array>
#include <atomic>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ucclzip/communicator.h"

struct ncclComm {
  // Null until it is created (at once, or at the end of the group that asked for it), and
  // where its creation failed.
  std::unique_ptr<ucclzip::Communicator> communicator;
  // Its creation waits for the end of the open group. Atomic: another thread (a watchdog
  // polling ncclCommGetAsyncError) may look while the group's end creates it, and the creation's
  // writes (communicator, its failure) are visible once this reads false.
  std::atomic<bool> creating{false};
  // Its destruction waits for the end of the open group. Atomic: another thread's destruction of
  // a rank of its clique looks (AnyLiveRankOf).
  std::atomic<bool> destroying{false};
  // The ncclUniqueId it was made from: the ranks of one communicator in this process share it
  // (clique.h).
  std::array<char, NCCL_UNIQUE_ID_BYTES> clique{};
  int cuda_device = -1;  // -1 where no CUDA device is usable
  // Why its creation at the end of a group failed (OK otherwise): its async error from then on,
  // as NCCL's for a non-blocking communicator. Written before `creating` turns false, and read
  // only after.
  absl::Status creation_failure;

  // Remembers an operation until it completes (ncclCommFinalize and ncclCommDestroy wait for it);
  // its failure becomes the async error unless `failure_is_async_error` is false (a call that
  // returns its own outcome).
  void Track(const ucclzip::Operation& operation, bool failure_is_async_error = true);
  // Its creation's failure, else the first failure among the tracked operations (OK if none
  // failed so far). Only once `creating` read false.
  absl::Status AsyncError();
  // Waits for every tracked operation to complete, as long as one of them completes every
  // `quiet_limit` (a long queue of healthy operations drains); fails, naming `function`, this
  // rank and how many are left, once a whole `quiet_limit` passes without any completing.
  absl::Status WaitForAll(absl::Duration quiet_limit, const char* function);

 private:
  void ForgetCompletedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Mutex mutex_;
  struct Tracked {
    ucclzip::Operation operation;
    bool failure_is_async_error;
  };
  std::vector<Tracked> in_flight_ ABSL_GUARDED_BY(mutex_);
  absl::Status async_error_ ABSL_GUARDED_BY(mutex_);
};

namespace ucclzip::nccl {

// The communicators this process made and has not destroyed. A handle that is none of them (one
// destroyed already, or never made) is refused by name: used, it would read freed memory, and a
// second ncclCommDestroy would free it twice.
void RegisterLive(const ncclComm* comm);
void UnregisterLive(const ncclComm* comm);
// OK when `comm` is live, else InvalidArgument (null included).
absl::Status CheckLive(const ncclComm* comm, const char* function);

// True if a live communicator made from `clique` is not being destroyed.
bool AnyLiveRankOf(const std::array<char, NCCL_UNIQUE_ID_BYTES>& clique);

// OK when `comm` can take operations, else InvalidArgument (null, or not live) or
// FailedPrecondition (its creation or destruction is still pending in the open group, or its
// creation failed).
absl::Status CheckUsable(const ncclComm* comm, const char* function);

}  // namespace ucclzip::nccl
