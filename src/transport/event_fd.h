// Signalling an eventfd: the progress thread sleeps in poll() on one (Transport::wake_fd_), and
// posts, aborts and finished staging copies wake it through it.
#pragma once

#include <unistd.h>

#include <cstdint>

namespace ucclzip::transport {

// Adds 1 to the counter of eventfd `fd`. The counter holds the signal until the sleeper reads
// it, so a signal given before the sleeper polls is never lost. Safe from any thread, including
// a CUDA host function (it makes no CUDA call).
inline void SignalEventFd(int fd) {
  uint64_t one = 1;
  // A full counter already means "wake up"; nothing else can go wrong with an eventfd.
  [[maybe_unused]] ssize_t written = write(fd, &one, sizeof(one));
}

}  // namespace ucclzip::transport
