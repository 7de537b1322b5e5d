#include "transport/memory_type.h"

#include <cuda_runtime_api.h>

#include <mutex>

namespace ucclzip::transport {

absl::string_view MemoryTypeName(MemoryType type) { return type == MemoryType::kHost ? "host" : "device"; }

int CudaDeviceCount() {
  static std::once_flag once;
  static int count = 0;
  std::call_once(once, [] {
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no device" so later CUDA calls start clean
      count = 0;
    }
  });
  return count;
}

PointerInfo ClassifyPointer(const void* pointer) {
  if (pointer == nullptr || CudaDeviceCount() == 0) return {};
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  if (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged) {
    return {MemoryType::kDevice, attributes.device};
  }
  return {};
}

}  // namespace ucclzip::transport
