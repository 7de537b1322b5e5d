// Which stream flag, and which target on it, the next stream wait gets (stream_flags.h). A
// waiter is released by any value at or above its target, so a flag given out again while its
// last waiter was still pending would let a later operation's signal release that earlier,
// unfinished one: its stream would run on while the pipeline still writes its buffers. A flag is
// therefore given out again only once its last ticket has been signalled; every flag of a device
// being taken (2^16 waits pending at once, across all the process's communicators) fails the
// call instead. Any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ucclzip::pipeline {

struct FlagTicket {
  uint32_t index = 0;
  uint32_t target = 0;
};

class FlagTickets {
 public:
  // `flags`: `count` flags, all zero, which only Signal writes (raising, never lowering).
  FlagTickets(uint32_t* flags, uint32_t count) : flags_(flags), issued_(count, 0) {}

  // A ticket on the next flag, in turn, whose last ticket has been signalled; nullopt when
  // every flag still has a waiter.
  std::optional<FlagTicket> Take();
  // Raises the ticket's flag to its target (a flag already past it stays).
  void Signal(FlagTicket ticket);

 private:
  uint32_t* const flags_;
  absl::Mutex mutex_;
  uint32_t next_ ABSL_GUARDED_BY(mutex_) = 0;
  // Per flag, the target of the last ticket given out on it.
  std::vector<uint32_t> issued_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace ucclzip::pipeline
