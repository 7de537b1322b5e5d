// Where a buffer lives, and how to tell without crashing on a machine without a GPU.
#pragma once


#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"

namespace ucclzip::transport {

enum class MemoryType { kHost, kDevice };

absl::string_view MemoryTypeName(MemoryType type);

// Number of usable CUDA devices; 0 where there is no driver or device (checked once).
int CudaDeviceCount();

// What a pointer is, per cudaPointerGetAttributes: device (or managed) memory with its device,
// or host memory (pageable, pinned, or unknown to CUDA). Always host without a usable GPU. An
// error where CUDA cannot tell (a context that an earlier fault left unusable, say): calling
// such a buffer host memory would hand device addresses to the host path, which then moves
// wrong bytes or none, without an error.
struct PointerInfo {
  MemoryType type = MemoryType::kHost;
  int device = -1;
};
absl::StatusOr<PointerInfo> ClassifyPointer(const void* pointer);

}  // namespace ucclzip::transport
