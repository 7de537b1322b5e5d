#include "transport/memory_type.h"

#include <cuda_runtime_api.h>

#include <mutex>

#include "absl/strings/str_cat.h"

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

absl::StatusOr<PointerInfo> ClassifyPointer(const void* pointer) {
  if (pointer == nullptr || CudaDeviceCount() == 0) return PointerInfo{};
  cudaPointerAttributes attributes{};
  if (const cudaError_t err = cudaPointerGetAttributes(&attributes, pointer); err != cudaSuccess) {
    cudaGetLastError();
    // Before CUDA 11 a pointer CUDA had never seen was an invalid value; since then such a
    // pointer is cudaMemoryTypeUnregistered, and any error means CUDA cannot answer.
    if (err == cudaErrorInvalidValue) return PointerInfo{};
    return absl::InternalError(absl::StrCat("CUDA cannot tell what memory the buffer at 0x",
                                            absl::Hex(reinterpret_cast<uintptr_t>(pointer)), " is (",
                                            cudaGetErrorName(err), ": ", cudaGetErrorString(err),
                                            "; an earlier failure may have left the CUDA context unusable)"));
  }
  if (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged) {
    return PointerInfo{MemoryType::kDevice, attributes.device};
  }
  return PointerInfo{};
}

}  // namespace ucclzip::transport
