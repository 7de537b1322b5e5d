// The handle of one posted send or receive. The progress thread completes it exactly once;
// any thread may test or wait on it.
#pragma once

#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ucclzip::transport {

// Runs on the progress thread when the operation completes; it must be quick and must not
// wait on other operations of the same transport.
using CompletionCallback = std::function<void(const absl::Status&)>;

class Request {
 public:
  explicit Request(CompletionCallback on_complete = {}) : on_complete_(std::move(on_complete)) {}

  // True once the operation has completed, successfully or not.
  bool Test() const;
  // The operation's status once complete; DeadlineExceeded if it is still pending at `deadline`
  // (the operation itself then goes on, bounded by the transport's own timeout).
  absl::Status Wait(absl::Time deadline) const;

  // Called once, by the transport.
  void Complete(absl::Status status);

 private:
  CompletionCallback on_complete_;
  mutable absl::Mutex mutex_;
  bool done_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace ucclzip::transport
