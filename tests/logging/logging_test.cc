// The library's logging: level names and numbers, the environment variable, and what reaches
// stderr at which level (the messages captured from file descriptor 2).
#include "logging/logging.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

namespace ucclzip::logging {
namespace {

TEST(Logging, LevelsByNameAndNumber) {
  EXPECT_EQ(ParseLevel("off").value(), Level::kOff);
  EXPECT_EQ(ParseLevel("ERROR").value(), Level::kError);
  EXPECT_EQ(ParseLevel("warn").value(), Level::kWarning);
  EXPECT_EQ(ParseLevel(" warning ").value(), Level::kWarning);
  EXPECT_EQ(ParseLevel("Info").value(), Level::kInfo);
  EXPECT_EQ(ParseLevel("debug").value(), Level::kDebug);
  EXPECT_EQ(ParseLevel("0").value(), Level::kOff);
  EXPECT_EQ(ParseLevel("4").value(), Level::kDebug);
  for (const char* bad : {"5", "-1", "verbose", "", "2x"}) {
    EXPECT_EQ(ParseLevel(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(Logging, LevelFromTheEnvironment) {
  unsetenv(kLevelVariable);
  EXPECT_EQ(LevelFromEnvironment().value(), Level::kError);  // quiet by default
  setenv(kLevelVariable, "info", 1);
  EXPECT_EQ(LevelFromEnvironment().value(), Level::kInfo);
  setenv(kLevelVariable, "chatty", 1);
  absl::Status bad = LevelFromEnvironment().status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("UCCLZIP_LOG_LEVEL='chatty'"), absl::string_view::npos) << bad;
  unsetenv(kLevelVariable);
}

// What the library writes to stderr while `body` runs.
template <typename Body>
std::string CapturedStderr(Body body) {
  char path[] = "/tmp/ucclzip-log-XXXXXX";
  const int file = mkstemp(path);
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(file, 2);
  body();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(file);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path);
  return text;
}

TEST(Logging, OnlyMessagesAtOrBelowTheLevelAreWrittenOrEvenFormatted) {
  const Level before = CurrentLevel();
  SetLevel(Level::kWarning);
  int formatted = 0;
  auto count = [&formatted] { return ++formatted; };
  const std::string text = CapturedStderr([&] {
    UCCLZIP_LOG(kWarning) << "peer " << 3 << " failed, call " << count();
    UCCLZIP_LOG(kInfo) << "communicator ready, call " << count();
    UCCLZIP_LOG(kDebug) << "policy, call " << count();
    UCCLZIP_LOG(kError) << "lost, call " << count();
  });
  SetLevel(before);
  EXPECT_EQ(formatted, 2);
  EXPECT_NE(text.find("[ucclzip W "), std::string::npos) << text;
  EXPECT_NE(text.find(" logging_test.cc:"), std::string::npos) << text;
  EXPECT_NE(text.find("] peer 3 failed, call 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[ucclzip E "), std::string::npos) << text;
  EXPECT_NE(text.find("] lost, call 2\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("ready"), std::string::npos) << text;
  EXPECT_EQ(text.find("policy"), std::string::npos) << text;
}

TEST(Logging, OffWritesNothing) {
  const Level before = CurrentLevel();
  SetLevel(Level::kOff);
  const std::string text = CapturedStderr([] { UCCLZIP_LOG(kError) << "not shown"; });
  SetLevel(before);
  EXPECT_EQ(text, "");
}

}  // namespace
}  // namespace ucclzip::logging
