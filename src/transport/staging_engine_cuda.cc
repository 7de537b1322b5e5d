#include <cuda_runtime_api.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "transport/event_fd.h"
#include "transport/staging_engine.h"

namespace ucclzip::transport {
namespace {

absl::Status CudaError(cudaError_t error, absl::string_view what) {
  cudaGetLastError();
  return absl::InternalError(absl::StrCat("staging: ", what, ": ", cudaGetErrorString(error)));
}

// Queued behind a copy (and its event) on the copy's stream; runs on a CUDA driver thread, so
// it makes no CUDA call.
void CUDART_CB SignalCopyDone(void* copy_done_fd) { SignalEventFd(*static_cast<const int*>(copy_done_fd)); }

class CudaStagingEngine final : public StagingEngine {
 public:
  CudaStagingEngine(int device, int copy_done_fd) : device_(device), copy_done_fd_(copy_done_fd) {}
  ~CudaStagingEngine() override {
    // Runs on whichever thread destroys the communicator: its device is put back afterwards.
    int caller_device = -1;
    const bool known = cudaGetDevice(&caller_device) == cudaSuccess;
    // Synchronising the streams also waits for their host functions, which read copy_done_fd_.
    cudaSetDevice(device_);
    for (cudaStream_t stream : streams_) {
      if (stream != nullptr) {
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
      }
    }
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
    if (known) cudaSetDevice(caller_device);
  }

  absl::Status Init(size_t max_copies) {
    if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return CudaError(e, "cudaSetDevice");
    for (cudaStream_t& stream : streams_) {
      if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
        return CudaError(e, "cudaStreamCreate");
      }
    }
    events_.resize(max_copies, nullptr);
    for (uint32_t i = 0; i < events_.size(); ++i) {
      if (cudaError_t e = cudaEventCreateWithFlags(&events_[i], cudaEventDisableTiming); e != cudaSuccess) {
        events_.resize(i);
        return CudaError(e, "cudaEventCreate");
      }
      free_events_.push_back(i);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* memory = nullptr;
    if (cudaError_t e = cudaHostAlloc(&memory, bytes, cudaHostAllocPortable); e != cudaSuccess) {
      return CudaError(e, absl::StrCat("cudaHostAlloc of ", bytes, " bytes"));
    }
    return memory;
  }
  void Free(void* memory) override { cudaFreeHost(memory); }

  void WaitForCopies() override {
    for (cudaStream_t stream : streams_) {
      if (stream != nullptr) cudaStreamSynchronize(stream);
    }
  }

  absl::StatusOr<uint32_t> Start(void* destination, const void* source, size_t bytes, CopyDirection direction) override {
    if (free_events_.empty()) return absl::InternalError("staging: more copies in flight than staging blocks");
    // The progress thread's own choice of device: left at the default, the runtime would give
    // every rank a context on device 0 besides its own device's.
    if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) return CudaError(e, "cudaSetDevice");
    cudaStream_t stream = streams_[direction == CopyDirection::kToStaging ? 0 : 1];
    if (cudaError_t e = cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, stream); e != cudaSuccess) {
      return CudaError(e, absl::StrCat("cudaMemcpyAsync of ", bytes, " bytes"));
    }
    uint32_t ticket = free_events_.back();
    // The copy is queued: a failure from here on must not hand its staging block back (the
    // caller releases the block of a copy that failed to start) while the copy may still run.
    auto fail_after_copy = [&](cudaError_t error, const char* what) {
      cudaStreamSynchronize(stream);
      return CudaError(error, what);
    };
    if (cudaError_t e = cudaEventRecord(events_[ticket], stream); e != cudaSuccess) {
      return fail_after_copy(e, "cudaEventRecord");
    }
    // After the event record, so that the event is complete by the time the fd is signalled.
    if (copy_done_fd_ >= 0) {
      if (cudaError_t e = cudaLaunchHostFunc(stream, SignalCopyDone, &copy_done_fd_); e != cudaSuccess) {
        return fail_after_copy(e, "cudaLaunchHostFunc");
      }
    }
    free_events_.pop_back();
    return ticket;
  }

  absl::StatusOr<bool> Poll(uint32_t ticket) override {
    cudaError_t e = cudaEventQuery(events_[ticket]);
    if (e == cudaErrorNotReady) return false;
    free_events_.push_back(ticket);
    if (e != cudaSuccess) return CudaError(e, "staging copy");
    return true;
  }

 private:
  int device_;
  int copy_done_fd_;  // signalled after every copy, -1: none (never changes; a host function reads it)
  cudaStream_t streams_[2] = {nullptr, nullptr};  // [0] device to staging, [1] staging to device
  std::vector<cudaEvent_t> events_;
  std::vector<uint32_t> free_events_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StagingEngine>> MakeCudaStagingEngine(int device, size_t max_copies, int copy_done_fd) {
  auto engine = std::make_unique<CudaStagingEngine>(device, copy_done_fd);
  if (absl::Status s = engine->Init(max_copies); !s.ok()) return s;
  return engine;
}

}  // namespace ucclzip::transport
