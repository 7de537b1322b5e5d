#include "gpu_stall.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ucclzip::testing {
namespace {

constexpr int kStallThreads = 1024;

// Each block counts itself in, then one thread waits for the host's word; the block's threads
// (and, with as many blocks as fit, the multiprocessor's) stay resident meanwhile.
__global__ void HoldMultiprocessors(const volatile uint32_t* release, uint32_t* held) {
  if (threadIdx.x == 0) {
    atomicAdd(held, 1u);
    while (*release == 0) __nanosleep(1000);
  }
  __syncthreads();
}

absl::Status Cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat("GpuStall: ", what, ": ", cudaGetErrorString(err)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuStall>> GpuStall::Start() {
  std::unique_ptr<GpuStall> stall(new GpuStall());
  int device = 0, multiprocessors = 0, per_multiprocessor = 0;
  uint32_t* release = nullptr;
  cudaStream_t stream = nullptr, probe = nullptr;
  for (absl::Status s :
       {Cuda(cudaGetDevice(&device), "cudaGetDevice"),
        Cuda(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device), "multiprocessors"),
        Cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, HoldMultiprocessors, kStallThreads, 0),
             "occupancy"),
        Cuda(cudaHostAlloc(reinterpret_cast<void**>(&release), sizeof(uint32_t), cudaHostAllocMapped), "cudaHostAlloc")}) {
    if (!s.ok()) return s;
  }
  stall->release_ = release;
  *release = 0;
  for (absl::Status s : {Cuda(cudaMalloc(reinterpret_cast<void**>(&stall->held_), sizeof(uint32_t)), "cudaMalloc"),
                         Cuda(cudaMemset(stall->held_, 0, sizeof(uint32_t)), "cudaMemset"),
                         Cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream")}) {
    if (!s.ok()) return s;
  }
  stall->stream_ = stream;
  uint32_t* device_release = nullptr;
  if (absl::Status s = Cuda(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_release), release, 0),
                            "device pointer");
      !s.ok()) {
    return s;
  }
  const uint32_t blocks = static_cast<uint32_t>(multiprocessors * per_multiprocessor);
  HoldMultiprocessors<<<blocks, kStallThreads, 0, stream>>>(device_release, stall->held_);
  if (absl::Status s = Cuda(cudaGetLastError(), "launch"); !s.ok()) return s;
  // The count of blocks that have started, read on a stream of its own (a copy engine's work,
  // which the kernel does not hold).
  if (absl::Status s = Cuda(cudaStreamCreateWithFlags(&probe, cudaStreamNonBlocking), "stream"); !s.ok()) return s;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  uint32_t started = 0;
  absl::Status status;
  while (status.ok() && started < blocks) {
    status = Cuda(cudaMemcpyAsync(&started, stall->held_, sizeof(started), cudaMemcpyDeviceToHost, probe), "probe");
    if (status.ok()) status = Cuda(cudaStreamSynchronize(probe), "probe");
    if (status.ok() && started < blocks && absl::Now() > give_up) {
      status = absl::DeadlineExceededError(absl::StrCat("GpuStall: ", started, " of ", blocks, " blocks started in 30 s"));
    }
  }
  cudaStreamDestroy(probe);
  if (!status.ok()) return status;
  return stall;
}

absl::Status GpuStall::Release() {
  if (released_ || stream_ == nullptr) return absl::OkStatus();
  released_ = true;
  *release_ = 1;
  return Cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "waiting for the kernel");
}

GpuStall::~GpuStall() {
  Release().IgnoreError();
  if (release_ != nullptr) cudaFreeHost(const_cast<uint32_t*>(release_));
  if (held_ != nullptr) cudaFree(held_);
  if (stream_ != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

}  // namespace ucclzip::testing
