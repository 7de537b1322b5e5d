#include "transport/request.h"

namespace ucclzip::transport {

bool Request::Test() const {
  absl::MutexLock lock(&mutex_);
  return done_;
}

absl::Status Request::Wait(absl::Time deadline) const {
  absl::MutexLock lock(&mutex_);
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mutex_) { return done_; };
  if (!mutex_.AwaitWithDeadline(absl::Condition(&done), deadline)) {
    return absl::DeadlineExceededError("operation still pending at the caller's deadline");
  }
  return status_;
}

void Request::Complete(absl::Status status) {
  {
    absl::MutexLock lock(&mutex_);
    done_ = true;
    status_ = status;
  }
  if (on_complete_) on_complete_(status);
}

}  // namespace ucclzip::transport
