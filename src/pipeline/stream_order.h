// How a call on a CUDA stream keeps NCCL's stream order: later work queued on the stream must
// not run before the call is done.
//
// The pipeline's usual way is to hold the stream (stream_flags.h): a wait queued on it that the
// pipeline thread ends when the call is done. A held stream is only safe while nothing the call
// needs can wait for the device to idle or for one of its hardware queues, since the held
// stream keeps both busy until the call is done. Where that cannot be promised, the call
// instead returns to its caller only once it is done: the caller's thread queues no later work
// before then, which keeps the same order without holding the stream.
//  - The direct path (UCX moves CUDA memory itself, with cuda_ipc and cuda_copy): UCX makes
//    CUDA calls from its progress, which moves the call's messages, on paths no warm-up
//    reaches: it creates cuda_copy's streams on first use and closes IPC mappings when it
//    discards an endpoint (cuIpcCloseMemHandle). On the H200 such calls waited for the device
//    while the caller's stream was held for the very message UCX was moving, and the device
//    tests hung; without the hold they passed (runs s21-1, s24-2, s25-2, benchmarks/RESULTS.md).
//  - Device memory where no stream can be held (held_streams.h: too few hardware queues, or
//    the CUDA MPS daemon): the wait would stop the pipeline's own copies and kernels.
//    Host memory there is held all the same, uncounted: the pipeline does no GPU work for it.
//  - The legacy default stream (a null stream, or cudaStreamLegacy), whatever the memory. On
//    an H100, 8 ranks sharing the GPU that held it ran a sweep of staged ring allreduces until a
//    pipeline copy or kernel stopped behind the wait (every thread idle, a block stuck at one
//    stage), on every rank, 3 runs of 3 and again in s28-1; with no hold, or with
//    CUDA_DEVICE_MAX_CONNECTIONS=32, the same sweep passed (benchmarks/RESULTS.md, sessions 27
//    and 28). The created streams that the queue experiments held (held_streams.h) did not do
//    that. The legacy stream is the one every blocking stream and synchronous runtime call is
//    ordered against, and CUDA gives it its hardware queue with the context, before any
//    created stream: what shares that queue with it is not the pipeline's to choose. A call on
//    host memory does no GPU work of its own, but another call of the process may be doing some
//    while it holds the stream, so it is not held either.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "transport/memory_type.h"
#include "transport/request.h"

namespace ucclzip::pipeline {

enum class StreamOrder {
  kInputOnly,       // hold_caller_stream is off: the caller Wait()s before its stream uses the outputs
  kHoldStream,      // the stream waits for the call (stream_flags.h)
  kReturnWhenDone,  // the call returns once it is done
};

// `ucx_moves_device_memory`: the transport hands device memory to UCX (no staging).
// `held_stream_capacity`: HeldStreams::capacity() of the call's device.
// `legacy_stream`: the call's stream is the legacy default stream (IsLegacyStream).
inline StreamOrder ChooseStreamOrder(bool hold_caller_stream, bool ucx_moves_device_memory,
                                     transport::MemoryType memory, int held_stream_capacity, bool legacy_stream) {
  if (!hold_caller_stream) return StreamOrder::kInputOnly;
  if (ucx_moves_device_memory) return StreamOrder::kReturnWhenDone;
  if (legacy_stream) return StreamOrder::kReturnWhenDone;
  if (memory == transport::MemoryType::kDevice && held_stream_capacity == 0) return StreamOrder::kReturnWhenDone;
  return StreamOrder::kHoldStream;
}

// Whether `stream` names the legacy default stream: null, which this library (built without
// per-thread default streams) hands to CUDA as the legacy stream whatever the program's own
// build, or cudaStreamLegacy.
inline bool IsLegacyStream(cudaStream_t stream) { return stream == nullptr || stream == cudaStreamLegacy; }

// One thread that ends the groups of several communicators in turn (the NCCL shim's
// ncclGroupEnd over the communicators of ncclCommInitAll, one process driving several ranks)
// must not wait in the first for calls that only the next ones post: it would wait for ever.
// While a scope is open on a thread, the calls there that return once done return at once
// instead, and the outermost scope's end waits for all of them.
class ReturnWhenDoneScope {
 public:
  ReturnWhenDoneScope();
  ~ReturnWhenDoneScope();
  ReturnWhenDoneScope(const ReturnWhenDoneScope&) = delete;
  ReturnWhenDoneScope& operator=(const ReturnWhenDoneScope&) = delete;

  // Keeps `requests` for this thread's open scope and returns true; false where none is open
  // (the caller then waits for them itself).
  static bool Keep(const std::vector<std::shared_ptr<transport::Request>>& requests);
};

}  // namespace ucclzip::pipeline
