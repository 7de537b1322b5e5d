// The shim's own setting. Communicator::Create reads every other UCCLZIP_* variable itself
// (docs/CONFIGURATION.md); but ncclCommInitRank has no place for a rendezvous deadline, which
// BootstrapConfigFromEnvironment reads from UCCLZIP_BOOTSTRAP_TIMEOUT, so the shim reads that
// variable for the configurations it makes from an ncclUniqueId.
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ucclzip::nccl {

// UCCLZIP_BOOTSTRAP_TIMEOUT (whole seconds, 1 to 86400), `fallback` where it is unset, or
// InvalidArgument naming the variable and its value.
absl::StatusOr<absl::Duration> BootstrapTimeoutFromEnvironment(absl::Duration fallback);

}  // namespace ucclzip::nccl
