#include "pipeline/stream_flags.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "transport/cuda_driver.h"

namespace ucclzip::pipeline {
namespace {
// Whole pages: cudaHostRegister pins pages, which the flags then share with nothing else.
size_t PageRounded(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}
}  // namespace

absl::StatusOr<StreamFlags*> StreamFlags::ForDevice(int device) {
  static absl::Mutex mutex(absl::kConstInit);
  static auto* const by_device = new std::map<int, StreamFlags*>();
  absl::MutexLock lock(&mutex);
  StreamFlags*& flags = (*by_device)[device];
  if (flags == nullptr) {
    // Stream memory operations came with CUDA 12 in every driver.
    absl::StatusOr<void*> wait_value = transport::FindDriverFunction("cuStreamWaitValue32", 12000);
    if (!wait_value.ok()) return wait_value.status();
    const size_t bytes = PageRounded(kCount * sizeof(uint32_t));
    void* host = std::aligned_alloc(static_cast<size_t>(sysconf(_SC_PAGESIZE)), bytes);
    if (host == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("stream flags: ", bytes, " bytes of host memory"));
    }
    std::memset(host, 0, bytes);
    flags = new StreamFlags(static_cast<uint32_t*>(host), bytes,
                            reinterpret_cast<PFN_cuStreamWaitValue32_v8000>(*wait_value));
  }
  if (absl::Status s = flags->EnsureRegistered(); !s.ok()) return s;
  return flags;
}

absl::Status StreamFlags::EnsureRegistered() {
  // Asked without an error (a sanitizer reports every failed call): unregistered memory is a
  // type of its own.
  cudaPointerAttributes attributes{};
  if (cudaError_t err = cudaPointerGetAttributes(&attributes, host_); err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat("the stream flags' memory: ", cudaGetErrorString(err)));
  }
  const bool register_now = attributes.type != cudaMemoryTypeHost;  // first use, or a cudaDeviceReset since
  // Portable: mapped in every context of the process, not only the current one, whose streams
  // the callers' may not be.
  if (register_now) {
    if (cudaError_t err = cudaHostRegister(host_, bytes_, cudaHostRegisterMapped | cudaHostRegisterPortable);
        err != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(
          absl::StrCat("registering ", bytes_, " bytes of stream flags with CUDA: ", cudaGetErrorString(err)));
    }
  }
  void* device = nullptr;
  if (cudaError_t err = cudaHostGetDevicePointer(&device, host_, 0); err != cudaSuccess) {
    cudaGetLastError();
    if (register_now) cudaHostUnregister(host_);
    return absl::InternalError(absl::StrCat("device address of the stream flags: ", cudaGetErrorString(err)));
  }
  device_.store(static_cast<uint32_t*>(device), std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<StreamFlags::Ticket> StreamFlags::EnqueueWait(cudaStream_t stream) {
  const std::optional<Ticket> ticket = tickets_.Take();
  if (!ticket) {
    return absl::ResourceExhaustedError(absl::StrCat("all ", kCount, " stream flags of the device have a wait pending ",
                                                     "(operations on streams not yet done, across the process)"));
  }
  uint32_t* const flag = device_.load(std::memory_order_acquire) + ticket->index;
  const CUresult result =
      wait_value_(stream, reinterpret_cast<CUdeviceptr>(flag), ticket->target, CU_STREAM_WAIT_VALUE_GEQ);
  if (result != CUDA_SUCCESS) {
    Signal(*ticket);  // no waiter: the flag is free for the next
    return absl::InternalError(absl::StrCat("queueing the stream wait (cuStreamWaitValue32): CUresult ",
                                            static_cast<int>(result)));
  }
  return *ticket;
}

}  // namespace ucclzip::pipeline
