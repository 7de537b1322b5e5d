// ncclCommInitRankConfig's config, checked as NCCL checks it: ucclzip uses none of its fields
// (its options come from the UCCLZIP_* variables), but a program that passes a value NCCL
// refuses learns so here too, instead of meeting the error first when it moves to NCCL.
#pragma once

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ucclzip::nccl {

// OK, or InvalidArgument naming `call` (its prefix, "ncclCommInitRankConfig (rank 0 of 2)"),
// the field and its value: a config not made with NCCL_CONFIG_INITIALIZER, or a field outside
// the values NCCL 2.28 takes (but for nChannelsPerNetPeer's upper bound, its build's channels). Reads only the `size` bytes the caller's struct has, and of those
// only the fields of the NCCL version the config names (an older program's struct lacks the
// later fields, whatever its size says).
absl::Status CheckConfig(const ncclConfig_t& config, absl::string_view call);

}  // namespace ucclzip::nccl
