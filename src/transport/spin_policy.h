// How the threads of a hand-off (a caller in Request::Wait, the pipeline thread, the progress
// thread) spend the moments between one piece of work and the next. Polling saves a sleeping
// thread's wake-up, which dominates small-message latency, but only where cores are free: on a
// machine with few cores a polling thread takes the core that the thread it waits for needs.
#pragma once

#include <optional>

#include "absl/time/time.h"

namespace ucclzip::transport {

// From this many cores on, waiters busy-poll by default (CommunicatorOptions::wait_spin).
inline constexpr unsigned kCoresForBusyPolling = 8;

struct SpinPolicy {
  // How long Request::Wait and the pipeline thread busy-poll before they sleep.
  absl::Duration wait_spin = absl::ZeroDuration();
  // Whether the progress thread gives its core away (sched_yield) between the polls of its spin
  // before sleep. Below kCoresForBusyPolling cores every rank's progress threads would otherwise
  // spin on the cores that the peer's progress thread, the pipeline thread and the caller
  // need for the next hop: on the 2-core CPU machine that made an 8-byte one-way Send/Recv
  // take 430 us (tcp) and 770 us (shm) instead of 73 and 53 (benchmarks/RESULTS.md).
  bool progress_yields = false;
};

// `cores`: std::thread::hardware_concurrency(); `wait_spin`: the option as the caller set it.
inline SpinPolicy SpinPolicyFor(unsigned cores, std::optional<absl::Duration> wait_spin) {
  const bool many = cores >= kCoresForBusyPolling;
  return {.wait_spin = wait_spin.value_or(many ? absl::Microseconds(50) : absl::ZeroDuration()),
          .progress_yields = !many};
}

}  // namespace ucclzip::transport
