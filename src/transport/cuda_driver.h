// CUDA driver functions, found through the runtime so that nothing links libcuda directly:
// binaries must still start on machines without a driver (CI), where no device call is made.
#pragma once

#include "absl/status/statusor.h"

namespace ucclzip::transport {

// The driver's `name` as of CUDA `cuda_version` (12000 for 12.0), or why there is none.
absl::StatusOr<void*> FindDriverFunction(const char* name, int cuda_version);

}  // namespace ucclzip::transport
