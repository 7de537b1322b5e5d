// How a CUDA stream waits for a transfer that the host completes: a one-thread kernel queued on
// the user's stream spins (with back-off) on a flag in mapped pinned memory, and the pipeline
// thread sets the flag when the operation is done, failed or not. That gives NCCL's stream
// semantics without blocking a CUDA callback thread.
//
// Flags are reused round-robin with rising targets, so a waiter is released by any value at
// or above its own: safe unless 2^16 later waits were queued while one operation stayed pending.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace ucclzip::pipeline {

class StreamFlags {
 public:
  struct Ticket {
    uint32_t index = 0;
    uint32_t target = 0;
  };

  // Allocates the flags (pinned, mapped) once.
  static absl::StatusOr<std::unique_ptr<StreamFlags>> Create();
  ~StreamFlags();
  StreamFlags(const StreamFlags&) = delete;
  StreamFlags& operator=(const StreamFlags&) = delete;

  // Queues on `stream` a wait for the returned ticket. Any thread.
  absl::StatusOr<Ticket> EnqueueWait(cudaStream_t stream);
  // Releases the ticket's waiter. Any thread.
  void Signal(Ticket ticket);

 private:
  static constexpr uint32_t kCount = 1u << 16;
  StreamFlags(uint32_t* host, uint32_t* device) : host_(host), device_(device) {}
  uint32_t* host_;
  uint32_t* device_;
  std::atomic<uint64_t> next_{0};
};

// Queues the spin-wait kernel (stream_wait.cu).
cudaError_t LaunchWaitForFlag(const uint32_t* flag, uint32_t target, cudaStream_t stream);
// Loads the wait kernel now: a lazy load at its first launch may synchronise the context while
// another communicator's wait is spinning.
cudaError_t PreloadWaitForFlag();

}  // namespace ucclzip::pipeline
