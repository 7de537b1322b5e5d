#include "pipeline/stream_flags.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ucclzip::pipeline {
namespace {

// The driver's entry point is found through the runtime, so that nothing links libcuda
// directly: binaries must still start on machines without a driver (CI), where no device
// call is made.
absl::StatusOr<PFN_cuStreamWaitValue32_v8000> FindWaitValue() {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &function, 12000, cudaEnableDefault, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || function == nullptr) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "the CUDA driver offers no cuStreamWaitValue32 (stream memory operations, CUDA 12 or later): ",
        cudaGetErrorString(err)));
  }
  return reinterpret_cast<PFN_cuStreamWaitValue32_v8000>(function);
}

}  // namespace

absl::StatusOr<std::unique_ptr<StreamFlags>> StreamFlags::Create() {
  absl::StatusOr<PFN_cuStreamWaitValue32_v8000> wait_value = FindWaitValue();
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
  return std::unique_ptr<StreamFlags>(new StreamFlags(static_cast<uint32_t*>(host), static_cast<uint32_t*>(device), *wait_value));
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
