#include "nccl/environment.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ucclzip::nccl {

absl::StatusOr<absl::Duration> BootstrapTimeoutFromEnvironment(absl::Duration fallback) {
  const char* text = std::getenv("UCCLZIP_BOOTSTRAP_TIMEOUT");
  if (text == nullptr || *text == '\0') return fallback;
  int seconds = 0;
  if (!absl::SimpleAtoi(text, &seconds) || seconds < 1 || seconds > 86'400) {
    return absl::InvalidArgumentError(
        absl::StrCat("UCCLZIP_BOOTSTRAP_TIMEOUT='", text, "': expected whole seconds from 1 to 86400"));
  }
  return absl::Seconds(seconds);
}

}  // namespace ucclzip::nccl
