// The shim's settings come from the environment, since NCCL's API has no place for them:
// UCCLZIP_COMPRESS and the others of docs/NCCL_API.md, read at each ncclCommInitRank.
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ucclzip/communicator.h"

namespace ucclzip::nccl {

struct ShimSettings {
  CommunicatorOptions options;
  absl::Duration bootstrap_timeout = absl::Seconds(60);
};

// The settings, or InvalidArgument naming the variable whose value is malformed.
absl::StatusOr<ShimSettings> SettingsFromEnvironment();

}  // namespace ucclzip::nccl
