#include "logging/logging.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ucclzip::logging {
namespace {

// -1 until first use.
std::atomic<int> current_level{-1};

char LevelLetter(Level level) {
  switch (level) {
    case Level::kError: return 'E';
    case Level::kWarning: return 'W';
    case Level::kInfo: return 'I';
    case Level::kDebug: return 'D';
    case Level::kOff: break;
  }
  return '?';
}

absl::string_view BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

absl::StatusOr<Level> ParseLevel(absl::string_view text) {
  const std::string name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  struct Named {
    const char* name;
    Level level;
  };
  for (const Named& named : {Named{"off", Level::kOff}, Named{"error", Level::kError}, Named{"warning", Level::kWarning},
                             Named{"warn", Level::kWarning}, Named{"info", Level::kInfo}, Named{"debug", Level::kDebug}}) {
    if (name == named.name) return named.level;
  }
  int number = -1;
  if (absl::SimpleAtoi(name, &number) && number >= 0 && number <= static_cast<int>(Level::kDebug)) {
    return static_cast<Level>(number);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("log level '", text, "' is none of off, error, warning, info, debug or 0 to 4"));
}

absl::StatusOr<Level> LevelFromEnvironment() {
  const char* value = std::getenv(kLevelVariable);
  if (value == nullptr || *value == '\0') return kDefaultLevel;
  absl::StatusOr<Level> level = ParseLevel(value);
  if (!level.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(kLevelVariable, "='", value, "': ", level.status().message()));
  }
  return level;
}

Level CurrentLevel() {
  int level = current_level.load(std::memory_order_relaxed);
  if (level < 0) {
    // Two threads may both read the environment the first time; they read the same value.
    level = static_cast<int>(LevelFromEnvironment().value_or(kDefaultLevel));
    current_level.store(level, std::memory_order_relaxed);
  }
  return static_cast<Level>(level);
}

void SetLevel(Level level) { current_level.store(static_cast<int>(level), std::memory_order_relaxed); }

Message::~Message() {
  // One write per message, so that the lines of concurrent threads do not interleave.
  const std::string line = absl::StrCat("[ucclzip ", std::string(1, LevelLetter(level_)), " ",
                                        absl::FormatTime("%Y-%m-%d %H:%M:%E6S", absl::Now(), absl::LocalTimeZone()),
                                        " pid ", getpid(), " ", BaseName(file_), ":", line_, "] ", text_.str(), "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace ucclzip::logging
