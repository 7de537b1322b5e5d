// The UCCLZIP_* variables that set the defaults of CommunicatorOptions (docs/CONFIGURATION.md
// lists them), read each time a communicator is created.
//
// A variable applies to a field that the program left at its built-in value (the one written
// in communicator.h); a field the program set to any other value keeps it. So an operator can
// tune a program that does not expose a setting, and never silently undoes one it does.
#pragma once

#include "absl/status/statusor.h"
#include "ucclzip/communicator.h"

namespace ucclzip::pipeline {

// `program`'s options with the environment's defaults applied. A malformed or out-of-range
// value (of UCCLZIP_LOG_LEVEL too) is InvalidArgument naming `rank`, the variable and the value,
// even for a field the program set.
absl::StatusOr<CommunicatorOptions> WithEnvironmentDefaults(const CommunicatorOptions& program, int rank);

}  // namespace ucclzip::pipeline
