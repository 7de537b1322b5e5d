#include "pipeline/stream_flags.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "transport/cuda_driver.h"

namespace ucclzip::pipeline {

absl::StatusOr<std::unique_ptr<StreamFlags>> StreamFlags::Create() {
  // Stream memory operations came with CUDA 12 in every driver.
  absl::StatusOr<void*> wait_value = transport::FindDriverFunction("cuStreamWaitValue32", 12000);
  if (!wait_value.ok()) return wait_value.status();
  void* host = nullptr;
  if (cudaError_t err = cudaHostAlloc(&host, kCount * sizeof(uint32_t), cudaHostAllocMapped); err != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat("pinned stream flags: ", cudaGetErrorString(err)));
  }
  std::memset(host, 0, kCount * sizeof(uint32_t));
  void* device = nullptr;
  if (cudaError_t err = cudaHostGetDevicePointer(&device, host, 0); err != cudaSuccess) {
    cudaGetLastError();
    cudaFreeHost(host);
    return absl::InternalError(absl::StrCat("device address of the stream flags: ", cudaGetErrorString(err)));
  }
  return std::unique_ptr<StreamFlags>(new StreamFlags(static_cast<uint32_t*>(host), static_cast<uint32_t*>(device),
                                                        reinterpret_cast<PFN_cuStreamWaitValue32_v8000>(*wait_value)));
}

StreamFlags::~StreamFlags() { cudaFreeHost(host_); }

absl::StatusOr<StreamFlags::Ticket> StreamFlags::EnqueueWait(cudaStream_t stream) {
  const uint64_t n = next_.fetch_add(1);
  Ticket ticket{static_cast<uint32_t>(n % kCount), static_cast<uint32_t>(n / kCount + 1)};
  const CUresult result = wait_value_(stream, reinterpret_cast<CUdeviceptr>(device_ + ticket.index), ticket.target,
                                     CU_STREAM_WAIT_VALUE_GEQ);
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
