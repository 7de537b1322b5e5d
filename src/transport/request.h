// The handle of one posted send or receive. The progress thread completes it exactly once;
// any thread may test or wait on it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ucclzip::transport {

// Runs on the progress thread when the operation completes; it must be quick and must not
// wait on other operations of the same transport.
using CompletionCallback = std::function<void(const absl::Status&)>;

class Request {
 public:
  // `wait_spin`: how long Wait busy-polls before it sleeps (CommunicatorOptions::wait_spin).
  // `what`: the operation, as a caller's timeout names it ("rank 0: allreduce (...)").
  explicit Request(CompletionCallback on_complete = {}, absl::Duration wait_spin = absl::ZeroDuration(),
                   std::string what = "operation")
      : on_complete_(std::move(on_complete)), wait_spin_(wait_spin), what_(std::move(what)) {}

  // True once the operation has completed, successfully or not.
  bool Test() const { return done_.load(std::memory_order_acquire); }
  // The operation's status once complete; DeadlineExceeded if it is still pending at `deadline`
  // (the operation itself then goes on, bounded by the transport's own timeout).
  absl::Status Wait(absl::Time deadline) const;

  // Called once, by the transport.
  void Complete(absl::Status status);
  // The operation, as its timeout names it.
  const std::string& what() const { return what_; }

 private:
  CompletionCallback on_complete_;
  const absl::Duration wait_spin_;
  const std::string what_;
  // Written once, before done_ is set, and read only after done_ was seen set.
  absl::Status status_;
  std::atomic<bool> done_{false};
  // The mutex is locked only by waiters that sleep and by a Complete that has one to wake: the
  // pipeline polls its many requests with Test and Wait(InfinitePast), and with Debian's Abseil
  // (deadlock detection on) every Lock and Unlock costs a look-up in a process-wide graph under
  // one global lock, besides a graph node per mutex ever locked.
  mutable std::atomic<int> sleepers_{0};
  mutable absl::Mutex mutex_;
};

}  // namespace ucclzip::transport
