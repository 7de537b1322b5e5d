// The kernel behind StreamFlags: one thread that holds its stream until the host raises a flag.
#include "pipeline/stream_flags.h"

namespace ucclzip::pipeline {
namespace {

__global__ void WaitForFlag(const volatile uint32_t* flag, uint32_t target) {
  // The flag lives in host memory; each read crosses PCIe, so back off between reads.
  while (*flag < target) __nanosleep(2000);
}

}  // namespace

cudaError_t PreloadWaitForFlag() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, WaitForFlag);
}

cudaError_t LaunchWaitForFlag(const uint32_t* flag, uint32_t target, cudaStream_t stream) {
  WaitForFlag<<<1, 1, 0, stream>>>(flag, target);
  return cudaGetLastError();
}

}  // namespace ucclzip::pipeline
