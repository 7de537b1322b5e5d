#include "transport/request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ucclzip::transport {

absl::Status Request::Wait(absl::Time deadline) const {
  if (Test()) return status_;
  if (wait_spin_ > absl::ZeroDuration()) {
    const absl::Time spin_until = std::min(deadline, absl::Now() + wait_spin_);
    while (!Test() && absl::Now() < spin_until) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }
  // Dekker's pattern with Complete (both sequentially consistent): either Complete sees this
  // sleeper and locks the mutex after setting done_, and its Unlock re-evaluates the condition
  // below, or the condition, evaluated under the mutex, sees done_ set.
  sleepers_.fetch_add(1);
  bool done = false;
  {
    absl::MutexLock lock(&mutex_);
    done = mutex_.AwaitWithDeadline(absl::Condition(
                                        +[](const std::atomic<bool>* flag) { return flag->load(); }, &done_),
                                    deadline);
  }
  sleepers_.fetch_sub(1);
  if (!done) return absl::DeadlineExceededError(absl::StrCat(what_, ": still pending at the caller's deadline"));
  return status_;
}

void Request::Complete(absl::Status status) {
  status_ = std::move(status);
  done_.store(true);
  if (sleepers_.load() > 0) {
    absl::MutexLock lock(&mutex_);  // its Unlock wakes the sleepers
  }
  if (on_complete_) on_complete_(status_);
}

}  // namespace ucclzip::transport
