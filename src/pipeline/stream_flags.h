// How a CUDA stream waits for a transfer that the host completes: a stream memory operation
// (the driver's cuStreamWaitValue32) holds the user's stream until a flag in mapped pinned
// memory reaches a target, and the pipeline thread raises the flag when the operation is done,
// failed or not. That gives NCCL's stream semantics without a kernel: a waiting stream holds
// no SM and keeps no kernel resident, which matters when several processes share one GPU: the
// GPU time-slices between their contexts, and a context with a spinning kernel keeps its slice.
//
// Flags are reused in turn with rising targets, and the wait is "at or above" (modulo 2^32), so
// a waiter is released by any later value: a flag is given out again only once its last waiter
// was released (flag_tickets.h), and with 2^16 waits pending on a device the next call fails.
//
// The flags of a device live as long as the process, shared by its communicators: a caller's
// stream reads its flag whenever it reaches the wait, which may be long after the communicator
// that queued it is gone (the stream was still behind earlier work of its own when the
// communicator was destroyed and let go of it); freed, the flag would be memory the GPU may no
// longer read. They are host memory of ours, registered with CUDA (not CUDA's pinned
// allocations), so that a cudaDeviceReset, which unregisters them with the device's streams and
// their waits, leaves them to register again, never to another allocation at the same address.
#pragma once

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pipeline/flag_tickets.h"

namespace ucclzip::pipeline {

class StreamFlags {
 public:
  using Ticket = FlagTicket;

  // The flags of CUDA device `device`, which must be the current device: made and registered on
  // first use (registering page-locks memory, which may wait for the device to idle: call it
  // before queueing waits of one's own), registered again after a cudaDeviceReset. Any thread.
  static absl::StatusOr<StreamFlags*> ForDevice(int device);
  StreamFlags(const StreamFlags&) = delete;
  StreamFlags& operator=(const StreamFlags&) = delete;

  // Queues on `stream` a wait for the returned ticket. Any thread.
  absl::StatusOr<Ticket> EnqueueWait(cudaStream_t stream);
  // Releases the ticket's waiter. Any thread.
  void Signal(Ticket ticket) { tickets_.Signal(ticket); }

 private:
  static constexpr uint32_t kCount = 1u << 16;
  StreamFlags(uint32_t* host, size_t bytes, PFN_cuStreamWaitValue32_v8000 wait_value)
      : host_(host), bytes_(bytes), wait_value_(wait_value), tickets_(host, kCount) {}
  // Registers the flags with the current device unless they are (first use, or after a reset).
  absl::Status EnsureRegistered();
  uint32_t* const host_;  // never freed
  const size_t bytes_;    // whole pages
  std::atomic<uint32_t*> device_{nullptr};  // the device's address of host_, once registered
  const PFN_cuStreamWaitValue32_v8000 wait_value_;  // from the driver, through the runtime
  FlagTickets tickets_;
};

}  // namespace ucclzip::pipeline
