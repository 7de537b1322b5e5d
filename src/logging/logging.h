// The library's diagnostics, on stderr: quiet by default (errors only), raised by
// UCCLZIP_LOG_LEVEL=off|error|warning|info|debug (or 0 to 4), read once per process.
//
//   UCCLZIP_LOG(kWarning) << "rank " << rank << ": peer " << peer << " failed: " << why;
//
// The message is formatted only when its level is on. Abseil's own logging (absl/log) would
// serve, but it first shipped in 20230125 and the Abseil this builds against (Debian 12's
// 20220623) has none; the call sites have absl's LOG(...) << shape, so that moving to it is a
// rename once the baseline has it.
//
// What goes where: kError, what no caller can be told through a Status; kWarning, failures
// that also reach callers (a peer lost, a deadline passed, an abort), with time and process to
// line up the ranks' stories; kInfo, one line per communicator created or destroyed; kDebug,
// connection setup, staging and policy decisions.
#pragma once

#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ucclzip::logging {

enum class Level : int { kOff = 0, kError = 1, kWarning = 2, kInfo = 3, kDebug = 4 };

inline constexpr Level kDefaultLevel = Level::kError;
inline constexpr const char* kLevelVariable = "UCCLZIP_LOG_LEVEL";

// "off", "error", "warning" (or "warn"), "info", "debug", any case, or 0 to 4.
absl::StatusOr<Level> ParseLevel(absl::string_view text);
// UCCLZIP_LOG_LEVEL parsed now; kDefaultLevel when unset, InvalidArgument naming the variable
// and its value when malformed.
absl::StatusOr<Level> LevelFromEnvironment();

// The level in force: LevelFromEnvironment() on first use (kDefaultLevel if malformed:
// Communicator::Create reports that), or what SetLevel chose since.
Level CurrentLevel();
void SetLevel(Level level);
inline bool Enabled(Level level) { return level != Level::kOff && level <= CurrentLevel(); }

// One message, written to stderr as one line when it is destroyed.
class Message {
 public:
  Message(Level level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  ~Message();
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  std::ostream& stream() { return text_; }

 private:
  const Level level_;
  const char* const file_;
  const int line_;
  std::ostringstream text_;
};

}  // namespace ucclzip::logging

// A for statement rather than an if, so that a following else cannot attach to it.
#define UCCLZIP_LOG(level)                                                                                  \
  for (bool ucclzip_log_on = ::ucclzip::logging::Enabled(::ucclzip::logging::Level::level); ucclzip_log_on; \
       ucclzip_log_on = false)                                                                              \
  ::ucclzip::logging::Message(::ucclzip::logging::Level::level, __FILE__, __LINE__).stream()
