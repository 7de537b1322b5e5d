// How a CUDA stream waits for a transfer that the host completes: a stream memory operation
// (the driver's cuStreamWaitValue32) holds the user's stream until a flag in mapped pinned
// memory reaches a target, and the pipeline thread raises the flag when the operation is done,
// failed or not. That gives NCCL's stream semantics without a kernel: a waiting stream holds
// no SM and keeps no kernel resident, which matters when several processes share one GPU: the
// GPU time-slices between their contexts, and a context with a spinning kernel keeps its slice.
//
// Flags are reused round-robin with rising targets, and the wait is "at or above" (modulo
// 2^32), so a waiter is released by any later value: safe unless 2^16 later waits were queued
// while one operation stayed pending.
#pragma once

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ucclzip::pipeline {

class StreamFlags {
 public:
  struct Ticket {
    uint32_t index = 0;
    uint32_t target = 0;
  };

  // Allocates the flags (pinned, mapped) once and finds the driver's wait operation.
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
  StreamFlags(uint32_t* host, uint32_t* device, PFN_cuStreamWaitValue32_v8000 wait_value)
      : host_(host), device_(device), wait_value_(wait_value) {}
  uint32_t* host_;
  uint32_t* device_;
  PFN_cuStreamWaitValue32_v8000 wait_value_;  // from the driver, through the runtime
  std::atomic<uint64_t> next_{0};
};

}  // namespace ucclzip::pipeline
