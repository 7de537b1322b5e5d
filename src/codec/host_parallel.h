// How the CPU codec runs one frame's work on HostCodecThreads: batches of tasks that the pool's
// workers and the calling thread take one at a time, and scratch memory that outlives a call
// so that no call allocates and faults in fresh pages.
#pragma once

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "ucclzip/codec.h"

namespace ucclzip::codec {

// One frame's use of the threads. It holds them from construction to destruction, so that the
// batches and the scratch of one frame are never mixed with another call's. Without threads
// everything runs on the calling thread.
class ParallelCall {
 public:
  explicit ParallelCall(HostCodecThreads* threads);
  ~ParallelCall();
  ParallelCall(const ParallelCall&) = delete;
  ParallelCall& operator=(const ParallelCall&) = delete;

  // Tasks to cut `units` (chunks) of work into: one on a single thread; otherwise a few per
  // thread, so that a thread descheduled on a busy machine delays only a small share.
  uint32_t TaskCount(uint64_t units) const;
  // Runs fn(task) for every task in [0, tasks) and returns when all have run.
  void Run(uint32_t tasks, absl::FunctionRef<void(uint32_t task)> fn);
  // At least `bytes` of uninitialised memory, valid until the next Scratch call or the end of
  // this call; kept by the threads for later calls. Only with threads (TaskCount above one).
  uint8_t* Scratch(uint64_t bytes);

 private:
  HostCodecThreads* threads_;
};

// Task `task`'s share of `units` cut into `tasks` near-equal, consecutive parts: [first, end).
struct TaskShare {
  uint64_t first, end;
};
inline TaskShare ShareOf(uint64_t units, uint32_t task, uint32_t tasks) {
  return {units * task / tasks, units * (task + 1) / tasks};
}

// At least `bytes` of uninitialised memory owned by the calling thread, valid until its next
// ThreadScratch call: the per-chunk buffers of the task running on this thread. It keeps the
// largest size asked for (at most a few hundred KB: one chunk's symbols and words).
uint8_t* ThreadScratch(uint64_t bytes);

}  // namespace ucclzip::codec
