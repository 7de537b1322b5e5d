// Programmatic dependent launch (Hopper on): the compress kernels after the first may start
// while the kernel before them on the stream is still finishing, so that the gap between two
// kernels (their launch, their blocks' scheduling) overlaps the first one's tail; a 1 MB frame's
// three kernels otherwise pay it twice. A kernel so launched calls WaitForPriorKernel before it
// reads anything, which returns once the kernel before it has finished and its writes are
// visible, as stream order gives them.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace ucclzip::codec::gpu {

// The dependent kernel's first call. Compiled for a device before sm_90 it is nothing, and such
// a kernel is never launched as a dependent (DependentLaunchAllowed).
__device__ __forceinline__ void WaitForPriorKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Launches `kernel` on `stream`, as a dependent of the kernel before it where `dependent`
// (DependentLaunchAllowed said so for this device and build), else as any launch.
template <typename... Params, typename... Args>
cudaError_t LaunchAfterPriorKernel(bool dependent, void (*kernel)(Params...), dim3 grid, dim3 block,
                                   cudaStream_t stream, Args&&... args) {
  if (!dependent) {
    kernel<<<grid, block, 0, stream>>>(std::forward<Args>(args)...);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace ucclzip::codec::gpu
