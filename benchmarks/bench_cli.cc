#include "bench_cli.h"

#include <cctype>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, dtype, "bf16", "element type: bf16|fp16|fp32|fp8e4m3|fp8e5m2|raw|int32|...");
ABSL_FLAG(bool, json, false, "print one JSON object per result instead of a table");
ABSL_FLAG(int, iters, 20, "timed iterations per measurement (the median is reported)");
ABSL_FLAG(int, warmup, 3, "untimed iterations before timing");

namespace ucclzip::bench {

bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error) {
  text = absl::StripAsciiWhitespace(text);
  uint64_t multiplier = 1;
  if (!text.empty()) {
    switch (absl::ascii_toupper(text.back())) {
      case 'K': multiplier = uint64_t{1} << 10; break;
      case 'M': multiplier = uint64_t{1} << 20; break;
      case 'G': multiplier = uint64_t{1} << 30; break;
      default: break;
    }
    if (multiplier != 1) text.remove_suffix(1);
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value > UINT64_MAX / multiplier) {
    *error = "expected a byte count such as 4096, 64K, 16M or 1G";
    return false;
  }
  size->bytes = value * multiplier;
  return true;
}

std::string AbslUnparseFlag(ByteSize size) { return absl::StrCat(size.bytes); }

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  for (uint8_t v = 0; IsValidDataType(v); ++v) {
    auto type = static_cast<DataType>(v);
    if (name == DataTypeName(type)) return type;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown --dtype '", name, "'"));
}

}  // namespace ucclzip::bench
