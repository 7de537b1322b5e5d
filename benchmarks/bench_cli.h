// Command-line vocabulary shared by every ucclzip-bench subcommand: sizes with K/M/G suffixes,
// element types by name, and the flags more than one subcommand reads.
#pragma once

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ucclzip/types.h"

namespace ucclzip::bench {

// A byte count written as 4096, 64K, 16M or 1G (powers of 1024).
struct ByteSize {
  uint64_t bytes = 0;
};
bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error);
std::string AbslUnparseFlag(ByteSize size);

absl::StatusOr<DataType> ParseDataType(absl::string_view name);

}  // namespace ucclzip::bench

ABSL_DECLARE_FLAG(std::string, dtype);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(int, iters);
ABSL_DECLARE_FLAG(int, warmup);
