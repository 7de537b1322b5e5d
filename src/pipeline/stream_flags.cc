#include "pipeline/stream_flags.h"

#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "transport/cuda_driver.h"

namespace ucclzip::pipeline {
namespace {
constexpr size_t kPageBytes = 4096;  // what cudaHostRegister pins, whole pages
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
    void* host = std::aligned_alloc(kPageBytes, kBytes);
    if (host == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("stream flags: ", kBytes, " bytes of host memory"));
    }
    std::memset(host, 0, kBytes);
    flags = new StreamFlags(static_cast<uint32_t*>(host), reinterpret_cast<PFN_cuStreamWaitValue32_v8000>(*wait_value));
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
  if (attributes.type == cudaMemoryTypeHost && attributes.devicePointer != nullptr) {
    device_.store(static_cast<uint32_t*>(attributes.devicePointer), std::memory_order_release);
    return absl::OkStatus();
  }
  // Not registered: the first use, or a cudaDeviceReset since.
  if (cudaError_t err = cudaHostRegister(host_, kBytes, cudaHostRegisterMapped); err != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat("registering ", kBytes, " bytes of stream flags with CUDA: ",
                                                     cudaGetErrorString(err)));
  }
  void* device = nullptr;
  if (cudaError_t err = cudaHostGetDevicePointer(&device, host_, 0); err != cudaSuccess) {
    cudaGetLastError();
    cudaHostUnregister(host_);
    return absl::InternalError(absl::StrCat("device address of the stream flags: ", cudaGetErrorString(err)));
  }
  device_.store(static_cast<uint32_t*>(device), std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<StreamFlags::Ticket> StreamFlags::EnqueueWait(cudaStream_t stream) {
  const uint64_t n = next_.fetch_add(1);
  Ticket ticket{static_cast<uint32_t>(n % kCount), static_cast<uint32_t>(n / kCount + 1)};
  uint32_t* const flag = device_.load(std::memory_order_acquire) + ticket.index;
  const CUresult result =
      wait_value_(stream, reinterpret_cast<CUdeviceptr>(flag), ticket.target, CU_STREAM_WAIT_VALUE_GEQ);
  if (result != CUDA_SUCCESS) {
    return absl::InternalError(absl::StrCat("queueing the stream wait (cuStreamWaitValue32): CUresult ",
                                            static_cast<int>(result)));
  }
  return ticket;
}

void StreamFlags::Signal(Ticket ticket) {
  std::atomic_ref<uint32_t> flag(host_[ticket.index]);
  uint32_t seen = flag.load(std::memory_order_relaxed);
  while (seen < ticket.target && !flag.compare_exchange_weak(seen, ticket.target, std::memory_order_release)) {
  }
}

}  // namespace ucclzip::pipeline
