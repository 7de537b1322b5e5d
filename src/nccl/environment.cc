#include "nccl/environment.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ucclzip::nccl {
namespace {

std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

absl::Status Malformed(const char* name, const std::string& value, const char* expected) {
  return absl::InvalidArgumentError(absl::StrCat(name, "='", value, "' is not ", expected));
}

// `*into` = the variable's value, an integer in [min, max], if it is set.
absl::Status ReadInteger(const char* name, uint64_t min, uint64_t max, uint64_t* into) {
  std::optional<std::string> text = Env(name);
  if (!text) return absl::OkStatus();
  uint64_t value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < min || value > max) {
    return Malformed(name, *text, absl::StrCat("an integer in [", min, ", ", max, "]").c_str());
  }
  *into = value;
  return absl::OkStatus();
}

// `*into` = the variable's value in seconds (a positive number), if it is set.
absl::Status ReadSeconds(const char* name, absl::Duration* into) {
  std::optional<std::string> text = Env(name);
  if (!text) return absl::OkStatus();
  double seconds = 0;
  if (!absl::SimpleAtod(*text, &seconds) || !(seconds > 0)) return Malformed(name, *text, "a positive number of seconds");
  *into = absl::Seconds(seconds);
  return absl::OkStatus();
}

absl::Status ReadCompression(CompressionMode* into) {
  std::optional<std::string> text = Env("UCCLZIP_COMPRESS");
  if (!text) return absl::OkStatus();
  if (*text == "auto") {
    *into = CompressionMode::kAuto;
  } else if (*text == "on") {
    *into = CompressionMode::kOn;
  } else if (*text == "off") {
    *into = CompressionMode::kOff;
  } else {
    return Malformed("UCCLZIP_COMPRESS", *text, "auto, on or off");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShimSettings> SettingsFromEnvironment() {
  ShimSettings settings;
  CommunicatorOptions& options = settings.options;
  uint64_t pipeline_block = options.pipeline_block_bytes, min_compress = options.min_compress_bytes;
  for (absl::Status status : {ReadCompression(&options.compression),
                              ReadSeconds("UCCLZIP_OP_TIMEOUT", &options.op_timeout),
                              ReadSeconds("UCCLZIP_SHUTDOWN_TIMEOUT", &options.shutdown_timeout),
                              ReadSeconds("UCCLZIP_BOOTSTRAP_TIMEOUT", &settings.bootstrap_timeout),
                              ReadInteger("UCCLZIP_PIPELINE_BLOCK_BYTES", 1, uint64_t{1} << 40, &pipeline_block),
                              ReadInteger("UCCLZIP_MIN_COMPRESS_BYTES", 0, uint64_t{1} << 40, &min_compress)}) {
    if (!status.ok()) return status;
  }
  options.pipeline_block_bytes = pipeline_block;
  options.min_compress_bytes = min_compress;
  return settings;
}

}  // namespace ucclzip::nccl
