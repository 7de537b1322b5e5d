#include "pipeline/options_environment.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "logging/logging.h"
#include "pipeline/engine.h"
#include "pipeline/transport_lanes.h"
#include "transport/transport_options.h"

namespace ucclzip::pipeline {
namespace {

// HostCodecThreads::Create's limit (ucclzip/codec.h), checked here too so that a value above it
// is an error that names the variable.
constexpr int kMaxCpuCodecThreads = 256;

// A byte count: digits, optionally followed by K, M or G (powers of 1024), from `min` to `max`.
absl::StatusOr<size_t> ParseBytes(absl::string_view text, size_t min,
                                  size_t max = std::numeric_limits<size_t>::max()) {
  absl::string_view digits = absl::StripAsciiWhitespace(text);
  size_t multiplier = 1;
  if (!digits.empty()) {
    switch (absl::ascii_toupper(digits.back())) {
      case 'K': multiplier = size_t{1} << 10; break;
      case 'M': multiplier = size_t{1} << 20; break;
      case 'G': multiplier = size_t{1} << 30; break;
      default: break;
    }
    if (multiplier != 1) digits.remove_suffix(1);
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(digits, &value) || value > std::numeric_limits<size_t>::max() / multiplier) {
    return absl::InvalidArgumentError("expected a byte count such as 65536, 64K, 16M or 1G");
  }
  if (value * multiplier < min) return absl::InvalidArgumentError(absl::StrCat("must be at least ", min, " bytes"));
  if (value * multiplier > max) return absl::InvalidArgumentError(absl::StrCat("must be at most ", max, " bytes"));
  return value * multiplier;
}

// A duration: seconds as a plain number ("60", "0.5"), or with units ("500ms", "2m", "1h30m").
absl::StatusOr<absl::Duration> ParseTime(absl::string_view text, bool zero_allowed) {
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  absl::Duration duration;
  // Not NaN ("nan" parses as a double), which absl::Seconds turns into an infinite duration.
  // Not hexadecimal either: SimpleAtod (strtod in this Abseil) read "0x10" as 16 s and "0x1p-3"
  // as 125 ms, where the byte counts and the counts refuse "0x10".
  if (double seconds = 0; trimmed.find_first_of("xX") == std::string::npos && absl::SimpleAtod(trimmed, &seconds) &&
                          !std::isnan(seconds)) {
    duration = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(trimmed, &duration)) {
    return absl::InvalidArgumentError("expected seconds (60, 0.5) or a duration with units (500ms, 2m, 1h30m)");
  }
  if (duration < absl::ZeroDuration() || (!zero_allowed && duration == absl::ZeroDuration())) {
    return absl::InvalidArgumentError(zero_allowed ? "must not be negative" : "must be positive");
  }
  return duration;
}

absl::StatusOr<int> ParseCount(absl::string_view text, int min, int max = std::numeric_limits<int>::max()) {
  int value = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value) || value < min || value > max) {
    return absl::InvalidArgumentError(max == std::numeric_limits<int>::max()
                                          ? absl::StrCat("expected a whole number of at least ", min)
                                          : absl::StrCat("expected a whole number from ", min, " to ", max));
  }
  return value;
}

absl::StatusOr<bool> ParseSwitch(absl::string_view text) {
  const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (name == "1" || name == "on" || name == "true" || name == "yes") return true;
  if (name == "0" || name == "off" || name == "false" || name == "no") return false;
  return absl::InvalidArgumentError("expected 1 or 0 (on/off, true/false, yes/no)");
}

absl::StatusOr<CompressionMode> ParseCompressionMode(absl::string_view text) {
  const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (name == "auto") return CompressionMode::kAuto;
  if (name == "on") return CompressionMode::kOn;
  if (name == "off") return CompressionMode::kOff;
  return absl::InvalidArgumentError("expected auto, on or off");
}

// Parses `variable` when it is set and, where `field` still holds its built-in value, stores it.
template <typename T, typename Parse>
absl::Status Apply(int rank, const char* variable, T CommunicatorOptions::*field, Parse parse,
                   CommunicatorOptions& options) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return absl::OkStatus();
  absl::StatusOr<T> parsed = parse(value);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, ": ", variable, "='", value, "': ", parsed.status().message()));
  }
  if (options.*field == CommunicatorOptions{}.*field) options.*field = *parsed;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CommunicatorOptions> WithEnvironmentDefaults(const CommunicatorOptions& program, int rank) {
  CommunicatorOptions options = program;
  using O = CommunicatorOptions;
  const absl::Status statuses[] = {
      Apply(rank, "UCCLZIP_COMPRESS", &O::compression, ParseCompressionMode, options),
      Apply(rank, "UCCLZIP_OP_TIMEOUT", &O::op_timeout, [](absl::string_view v) { return ParseTime(v, false); }, options),
      Apply(rank, "UCCLZIP_SHUTDOWN_TIMEOUT", &O::shutdown_timeout, [](absl::string_view v) { return ParseTime(v, true); },
            options),
      Apply(rank, "UCCLZIP_BLOCK_BYTES", &O::block_bytes,
            [](absl::string_view v) -> absl::StatusOr<std::optional<size_t>> {
              // Transport::Create's limit, checked here too so that it names the variable.
              return ParseBytes(v, 1, transport::kMaxBlockBytes);
            },
            options),
      Apply(rank, "UCCLZIP_PIPELINE_BLOCK_BYTES", &O::pipeline_block_bytes,
            [](absl::string_view v) { return ParseBytes(v, ElementSize(DataType::kFloat64)); }, options),
      Apply(rank, "UCCLZIP_MIN_PIPELINE_BLOCK_BYTES", &O::min_pipeline_block_bytes,
            [](absl::string_view v) { return ParseBytes(v, ElementSize(DataType::kFloat64)); }, options),
      Apply(rank, "UCCLZIP_RECURSIVE_DOUBLING_BYTES", &O::recursive_doubling_bytes,
            [](absl::string_view v) { return ParseBytes(v, 0); }, options),
      Apply(rank, "UCCLZIP_TREE_BROADCAST_BYTES", &O::tree_broadcast_bytes,
            [](absl::string_view v) { return ParseBytes(v, 0); }, options),
      Apply(rank, "UCCLZIP_MIN_COMPRESS_BYTES", &O::min_compress_bytes,
            [](absl::string_view v) { return ParseBytes(v, 0); }, options),
      Apply(rank, "UCCLZIP_STAGING_POOL_BYTES", &O::staging_pool_bytes,
            [](absl::string_view v) { return ParseBytes(v, 1); }, options),
      // Communicator::Create's limit, checked here too: above it a value the program's own
      // device_slots overrides was accepted without a word, and one that applied failed naming
      // device_slots, not the variable.
      Apply(rank, "UCCLZIP_DEVICE_SLOTS", &O::device_slots,
            [](absl::string_view v) { return ParseCount(v, 1, kMaxDeviceSlots); }, options),
      Apply(rank, "UCCLZIP_TRANSPORT_LANES", &O::transport_lanes,
            [](absl::string_view v) { return ParseCount(v, 1, TransportLanes::kMaxLanes); }, options),
      Apply(rank, "UCCLZIP_CPU_CODEC_THREADS", &O::cpu_codec_threads,
            [](absl::string_view v) { return ParseCount(v, 0, kMaxCpuCodecThreads); }, options),
      Apply(rank, "UCCLZIP_WAIT_SPIN", &O::wait_spin,
            [](absl::string_view v) -> absl::StatusOr<std::optional<absl::Duration>> { return ParseTime(v, true); },
            options),
      Apply(rank, "UCCLZIP_HOLD_STREAM", &O::hold_caller_stream, ParseSwitch, options),
      Apply(rank, "UCCLZIP_STAGING_WAKEUPS", &O::staging_copy_wakeups, ParseSwitch, options),
      Apply(rank, "UCCLZIP_FORWARD_FROM_HOST", &O::forward_from_host, ParseSwitch, options),
  };
  for (const absl::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  if (absl::StatusOr<logging::Level> level = logging::LevelFromEnvironment(); !level.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": ", level.status().message()));
  }
  return options;
}

}  // namespace ucclzip::pipeline
