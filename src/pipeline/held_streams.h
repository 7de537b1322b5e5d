// How many callers' streams the pipeline holds at once on each device, and the bound on it.
//
// A held stream (stream_flags.h) keeps one of the process's hardware queues busy: CUDA has
// CUDA_DEVICE_MAX_CONNECTIONS of them (8 unless set), and a queue whose next piece of work is
// a wait runs nothing behind it. On the H200 (runs s15-2 to s15-5,
// benchmarks/gpu/stream-queues.sh) a kernel on each of 32 later streams of the process ran
// while at most half the queues were held (2 of 4, 4 and 5 of 8, 8 of 16, 16 of 32), whatever
// their priority and in green contexts too; with more held, some or all of them did not (6 and 7
// of 8: 24 and 16 of 32; 3 of 4: 17; 1 of 2: 17; every queue held: none). A pipeline copy or
// kernel among those that do not run would never let the held streams go. So the pipeline
// holds at most half as many distinct streams as there are queues, and a call that would hold
// one more waits in its caller's thread for one to be let go, up to the call's deadline. Below
// four queues no stream is held at all, and a call on device memory returns only once done
// instead (stream_order.h; Megatron-LM sets one queue). Under the CUDA MPS daemon no stream is
// held either: its clients share one pool of queues, so a process may have fewer than
// CUDA_DEVICE_MAX_CONNECTIONS says, and on the H200 the device tests hung with the hold and
// passed without it (runs s12-3, s18-2 and s18-3, benchmarks/RESULTS.md).
//
// Each device's context has its own queues, so each device has its own bound, shared by every
// communicator of the process on that device. It counts only the pipeline's holds: streams
// that the program or other libraries keep waiting take queues too (docs/PIPELINE.md, "Known
// limits").
#pragma once

#include <cuda_runtime_api.h>

#include <unordered_map>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace ucclzip::pipeline {

// CUDA's number of hardware queues for `max_connections`, the text of
// CUDA_DEVICE_MAX_CONNECTIONS (null where unset): CUDA's default of 8 where it is unset or not
// a number, else the value clamped to CUDA's range of 1 to 32.
int HardwareQueues(const char* max_connections);

class HeldStreams {
 public:
  // At most this many whatever the queues: on the H200, creating a 20th stream while 19 were
  // held blocked the calling thread (run s15-3), with 8 queues and with 32.
  static constexpr int kMostHeld = 16;
  // Fewer queues hold nothing: with 2, one held stream stopped about half the others (s15-5).
  static constexpr int kFewestQueues = 4;

  // This process's for CUDA device `device`, bounded by CUDA_DEVICE_MAX_CONNECTIONS as it was
  // when first asked (CUDA reads it once, when it starts), and by whether MPS shares the device.
  static HeldStreams& ForDevice(int device);

  explicit HeldStreams(int hardware_queues, bool shared_by_mps = false);
  HeldStreams(const HeldStreams&) = delete;
  HeldStreams& operator=(const HeldStreams&) = delete;

  // How many distinct streams may be held at once: half the hardware queues, none below four
  // or under MPS.
  int capacity() const { return capacity_; }
  // Holds each of `streams` once more (a stream listed twice, twice), all or none. A stream
  // already held takes no more room. Where the others do not fit, waits until enough are let go;
  // at `deadline` DeadlineExceeded, and at once FailedPrecondition where they could never fit.
  absl::Status Acquire(absl::Span<const cudaStream_t> streams, absl::Time deadline);
  // Lets go one hold of `stream` taken by Acquire.
  void Release(cudaStream_t stream);
  // Distinct streams held now.
  int held() const;

 private:
  const int hardware_queues_;
  const int capacity_;
  mutable absl::Mutex mutex_;
  std::unordered_map<cudaStream_t, int> holds_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace ucclzip::pipeline
