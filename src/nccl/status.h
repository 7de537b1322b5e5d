// How the shim reports: an absl::Status becomes the ncclResult_t that NCCL would return for
// that kind of failure, and its message is kept, per thread, for ncclGetLastError.
#pragma once

#include <nccl.h>

#include "absl/status/status.h"

namespace ucclzip::nccl {

// The ncclResult_t of a status (docs/NCCL_API.md, "Errors").
ncclResult_t ResultOf(const absl::Status& status);

// ResultOf(status), remembering a failure's message as this thread's last error.
ncclResult_t Report(const absl::Status& status);

// This thread's last error message; "" before any.
const char* LastError();

}  // namespace ucclzip::nccl
