#include "pipeline/stream_flags.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ucclzip::pipeline {

absl::StatusOr<std::unique_ptr<StreamFlags>> StreamFlags::Create() {
  if (cudaError_t err = PreloadWaitForFlag(); err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat("loading the stream-wait kernel: ", cudaGetErrorString(err)));
  }
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
  return std::unique_ptr<StreamFlags>(new StreamFlags(static_cast<uint32_t*>(host), static_cast<uint32_t*>(device)));
}

StreamFlags::~StreamFlags() { cudaFreeHost(host_); }

absl::StatusOr<StreamFlags::Ticket> StreamFlags::EnqueueWait(cudaStream_t stream) {
  const uint64_t n = next_.fetch_add(1);
  Ticket ticket{static_cast<uint32_t>(n % kCount), static_cast<uint32_t>(n / kCount + 1)};
  if (cudaError_t err = LaunchWaitForFlag(device_ + ticket.index, ticket.target, stream); err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat("queueing the stream wait: ", cudaGetErrorString(err)));
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
