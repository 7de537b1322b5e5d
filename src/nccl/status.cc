#include "nccl/status.h"

#include <string>

namespace ucclzip::nccl {
namespace {

thread_local std::string last_error;

}  // namespace

ncclResult_t ResultOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return ncclSuccess;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return ncclInvalidArgument;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kUnimplemented:
      return ncclInvalidUsage;
    // A peer failed, went silent, sent data that does not decode, or the communicator was
    // aborted or destroyed under the operation.
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return ncclRemoteError;
    // ucclzip reports CUDA failures as internal errors too.
    case absl::StatusCode::kInternal:
      return ncclInternalError;
    default:
      return ncclSystemError;
  }
}

ncclResult_t Report(const absl::Status& status) {
  if (!status.ok()) last_error = std::string(status.message());
  return ResultOf(status);
}

const char* LastError() { return last_error.c_str(); }

}  // namespace ucclzip::nccl
