#include "transport/request.h"

#include <algorithm>

namespace ucclzip::transport {

bool Request::Test() const {
  absl::MutexLock lock(&mutex_);
  return done_;
}

absl::Status Request::Wait(absl::Time deadline) const {
  if (wait_spin_ > absl::ZeroDuration()) {
    const absl::Time spin_until = std::min(deadline, absl::Now() + wait_spin_);
    while (!done_polled_.load(std::memory_order_acquire) && absl::Now() < spin_until) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }
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
    done_polled_.store(true, std::memory_order_release);
  }
  if (on_complete_) on_complete_(status);
}

}  // namespace ucclzip::transport
