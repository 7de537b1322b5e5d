// The UCCLZIP_* defaults of CommunicatorOptions: each variable sets its field where the program
// left the built-in value, never where the program chose another, and a bad value is an error
// naming the rank, the variable and the value, whether or not it would apply.
#include "pipeline/options_environment.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "transport/transport_options.h"
#include "ucclzip/communicator.h"

namespace ucclzip::pipeline {
namespace {

constexpr const char* kVariables[] = {
    "UCCLZIP_COMPRESS",           "UCCLZIP_OP_TIMEOUT",          "UCCLZIP_SHUTDOWN_TIMEOUT",
    "UCCLZIP_BLOCK_BYTES",        "UCCLZIP_PIPELINE_BLOCK_BYTES", "UCCLZIP_MIN_COMPRESS_BYTES",
    "UCCLZIP_STAGING_POOL_BYTES", "UCCLZIP_DEVICE_SLOTS",        "UCCLZIP_WAIT_SPIN", "UCCLZIP_HOLD_STREAM",
    "UCCLZIP_CPU_CODEC_THREADS",  "UCCLZIP_TRANSPORT_LANES",     "UCCLZIP_STAGING_WAKEUPS", "UCCLZIP_LOG_LEVEL",
    "UCCLZIP_FORWARD_FROM_HOST",  "UCCLZIP_MIN_PIPELINE_BLOCK_BYTES", "UCCLZIP_RECURSIVE_DOUBLING_BYTES",
    "UCCLZIP_TREE_BROADCAST_BYTES"};

// Starts every test with none of the variables set, whatever the test's own environment holds.
class OptionsEnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) unsetenv(name);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(OptionsEnvironmentTest, NothingSetChangesNothing) {
  CommunicatorOptions program;
  program.pipeline_block_bytes = 1 << 20;
  absl::StatusOr<CommunicatorOptions> options = WithEnvironmentDefaults(program, 0);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->pipeline_block_bytes, size_t{1} << 20);
  EXPECT_EQ(options->compression, CompressionMode::kAuto);
  EXPECT_EQ(options->op_timeout, absl::Seconds(60));
  EXPECT_FALSE(options->wait_spin.has_value());
  EXPECT_TRUE(options->staging_copy_wakeups);
}

TEST_F(OptionsEnvironmentTest, EveryVariableSetsItsDefault) {
  setenv("UCCLZIP_COMPRESS", "OFF", 1);
  setenv("UCCLZIP_OP_TIMEOUT", "90", 1);
  setenv("UCCLZIP_SHUTDOWN_TIMEOUT", "1500ms", 1);
  setenv("UCCLZIP_BLOCK_BYTES", "1M", 1);
  setenv("UCCLZIP_PIPELINE_BLOCK_BYTES", "8m", 1);
  setenv("UCCLZIP_MIN_PIPELINE_BLOCK_BYTES", "512K", 1);
  setenv("UCCLZIP_MIN_COMPRESS_BYTES", "0", 1);
  setenv("UCCLZIP_STAGING_POOL_BYTES", "1G", 1);
  setenv("UCCLZIP_DEVICE_SLOTS", "3", 1);
  setenv("UCCLZIP_WAIT_SPIN", "0", 1);
  setenv("UCCLZIP_HOLD_STREAM", "off", 1);
  setenv("UCCLZIP_CPU_CODEC_THREADS", "3", 1);
  setenv("UCCLZIP_TRANSPORT_LANES", "3", 1);
  setenv("UCCLZIP_STAGING_WAKEUPS", "no", 1);
  setenv("UCCLZIP_FORWARD_FROM_HOST", "off", 1);
  setenv("UCCLZIP_LOG_LEVEL", "debug", 1);
  absl::StatusOr<CommunicatorOptions> options = WithEnvironmentDefaults(CommunicatorOptions{}, 0);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->compression, CompressionMode::kOff);
  EXPECT_EQ(options->op_timeout, absl::Seconds(90));
  EXPECT_EQ(options->shutdown_timeout, absl::Milliseconds(1500));
  EXPECT_EQ(options->block_bytes, size_t{1} << 20);
  EXPECT_EQ(options->pipeline_block_bytes, size_t{8} << 20);
  EXPECT_EQ(options->min_pipeline_block_bytes, size_t{512} << 10);
  EXPECT_EQ(options->min_compress_bytes, 0u);
  EXPECT_EQ(options->staging_pool_bytes, size_t{1} << 30);
  EXPECT_EQ(options->device_slots, 3);
  EXPECT_EQ(options->wait_spin, absl::ZeroDuration());
  EXPECT_FALSE(options->hold_caller_stream);
  EXPECT_EQ(options->cpu_codec_threads, 3);
  EXPECT_EQ(options->transport_lanes, 3);
  EXPECT_FALSE(options->staging_copy_wakeups);
  EXPECT_FALSE(options->forward_from_host);
}

TEST_F(OptionsEnvironmentTest, WhatTheProgramSetWins) {
  setenv("UCCLZIP_COMPRESS", "off", 1);
  setenv("UCCLZIP_PIPELINE_BLOCK_BYTES", "8M", 1);
  setenv("UCCLZIP_WAIT_SPIN", "20us", 1);
  CommunicatorOptions program;
  program.compression = CompressionMode::kOn;
  program.pipeline_block_bytes = size_t{32} << 20;
  program.wait_spin = absl::Microseconds(100);
  absl::StatusOr<CommunicatorOptions> options = WithEnvironmentDefaults(program, 0);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->compression, CompressionMode::kOn);
  EXPECT_EQ(options->pipeline_block_bytes, size_t{32} << 20);
  EXPECT_EQ(options->wait_spin, absl::Microseconds(100));
}

TEST_F(OptionsEnvironmentTest, BadValuesAreNamed) {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"UCCLZIP_COMPRESS", "sometimes"},       {"UCCLZIP_OP_TIMEOUT", "0"},
      {"UCCLZIP_OP_TIMEOUT", "soon"},          {"UCCLZIP_OP_TIMEOUT", "nan"},          {"UCCLZIP_SHUTDOWN_TIMEOUT", "-1s"},
      {"UCCLZIP_BLOCK_BYTES", "0"},            {"UCCLZIP_BLOCK_BYTES", "4 MB"},         {"UCCLZIP_BLOCK_BYTES", "17G"},
      {"UCCLZIP_PIPELINE_BLOCK_BYTES", "-16M"}, {"UCCLZIP_STAGING_POOL_BYTES", "99999999999999999999G"},
      {"UCCLZIP_MIN_PIPELINE_BLOCK_BYTES", "0"},
      {"UCCLZIP_DEVICE_SLOTS", "0"},           {"UCCLZIP_DEVICE_SLOTS", "two"},
      {"UCCLZIP_WAIT_SPIN", "-5us"},           {"UCCLZIP_HOLD_STREAM", "maybe"},           {"UCCLZIP_LOG_LEVEL", "loud"},
      {"UCCLZIP_CPU_CODEC_THREADS", "-1"},     {"UCCLZIP_CPU_CODEC_THREADS", "all"},
      {"UCCLZIP_CPU_CODEC_THREADS", "257"},
      {"UCCLZIP_TRANSPORT_LANES", "0"},        {"UCCLZIP_TRANSPORT_LANES", "9"},
      {"UCCLZIP_STAGING_WAKEUPS", "2"},        {"UCCLZIP_FORWARD_FROM_HOST", "sometimes"}};
  for (const auto& [variable, value] : bad) {
    SetUp();
    setenv(variable, value, 1);
    // Reported even where the program's own value means the variable would not apply.
    CommunicatorOptions program;
    program.compression = CompressionMode::kOn;
    program.block_bytes = size_t{1} << 20;
    absl::Status status = WithEnvironmentDefaults(program, 3).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << variable << "=" << value;
    EXPECT_NE(status.message().find(absl::StrCat("rank 3: ", variable, "='", value, "'")), absl::string_view::npos)
        << status;
  }
}

// UCCLZIP_DEVICE_SLOTS above Communicator::Create's 65536 passed the variable's own check: where
// the program set device_slots it was accepted without a word (the docs promise an error
// "also where the variable would not apply"), and where it applied Create failed naming
// device_slots, not the variable.
TEST_F(OptionsEnvironmentTest, DeviceSlotsAboveTheLimitAreNamed) {
  for (const bool program_set : {false, true}) {
    setenv("UCCLZIP_DEVICE_SLOTS", "65537", 1);
    CommunicatorOptions program;
    if (program_set) program.device_slots = 4;
    absl::Status status = WithEnvironmentDefaults(program, 1).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("rank 1: UCCLZIP_DEVICE_SLOTS='65537': expected a whole number from 1 to 65536"),
              absl::string_view::npos)
        << status;
  }
  setenv("UCCLZIP_DEVICE_SLOTS", "65536", 1);
  absl::StatusOr<CommunicatorOptions> options = WithEnvironmentDefaults(CommunicatorOptions{}, 0);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->device_slots, 65536);
}

// The malformed values an operator may write, of every kind, are refused naming the variable and
// the value: none is read as its prefix ("12abc" as 12), wrapped, or taken for another unit.
TEST_F(OptionsEnvironmentTest, MalformedValuesOfEveryKindAreRefused) {
  const char* const bytes[] = {"UCCLZIP_BLOCK_BYTES",         "UCCLZIP_PIPELINE_BLOCK_BYTES",
                               "UCCLZIP_MIN_PIPELINE_BLOCK_BYTES", "UCCLZIP_RECURSIVE_DOUBLING_BYTES",
                               "UCCLZIP_TREE_BROADCAST_BYTES", "UCCLZIP_MIN_COMPRESS_BYTES",
                               "UCCLZIP_STAGING_POOL_BYTES"};
  const char* const bad_bytes[] = {" ",   "abc", "12abc", "0x10", "-4M",  "16Q",  "16MM", "1e9", "1.5M", "K",
                                   "-0x1", "99999999999999999999", "18446744073709551616", "16384P", "17179869184G"};
  const char* const durations[] = {"UCCLZIP_OP_TIMEOUT", "UCCLZIP_SHUTDOWN_TIMEOUT", "UCCLZIP_WAIT_SPIN"};
  const char* const bad_durations[] = {" ", "abc", "12abc", "5 s", "-1s", "-inf", "5sec", "1d", "0x10", "0x1p-3", "nan"};
  const char* const counts[] = {"UCCLZIP_DEVICE_SLOTS", "UCCLZIP_TRANSPORT_LANES", "UCCLZIP_CPU_CODEC_THREADS"};
  const char* const bad_counts[] = {" ", "abc", "12abc", "0x10", "-1", "1.5", "1e1", "99999999999999999999", "4294967298"};
  const char* const switches[] = {"UCCLZIP_HOLD_STREAM", "UCCLZIP_STAGING_WAKEUPS", "UCCLZIP_FORWARD_FROM_HOST"};
  const char* const bad_switches[] = {" ", "2", "-1", "y", "enabled", "0x1", "truee"};
  std::vector<std::pair<std::string, std::string>> bad;
  for (const char* variable : bytes) for (const char* value : bad_bytes) bad.emplace_back(variable, value);
  for (const char* variable : durations) for (const char* value : bad_durations) bad.emplace_back(variable, value);
  for (const char* variable : counts) for (const char* value : bad_counts) bad.emplace_back(variable, value);
  for (const char* variable : switches) for (const char* value : bad_switches) bad.emplace_back(variable, value);
  for (const char* value : {" ", "compress", "1", "autoo", "onn"}) bad.emplace_back("UCCLZIP_COMPRESS", value);
  for (const char* value : {" ", "5", "-1", "verbose", "0x1"}) bad.emplace_back("UCCLZIP_LOG_LEVEL", value);
  for (const auto& [variable, value] : bad) {
    SetUp();
    setenv(variable.c_str(), value.c_str(), 1);
    absl::Status status = WithEnvironmentDefaults(CommunicatorOptions{}, 2).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << variable << "='" << value << "': " << status;
    EXPECT_NE(status.message().find(absl::StrCat("rank 2: ", variable, "='", value, "'")), absl::string_view::npos)
        << status;
  }
  SetUp();
  // What the docs allow: any case, surrounding blanks, lower-case suffixes, the switches' words.
  setenv("UCCLZIP_COMPRESS", " Auto ", 1);
  setenv("UCCLZIP_PIPELINE_BLOCK_BYTES", " 16m ", 1);
  setenv("UCCLZIP_HOLD_STREAM", "Yes", 1);
  setenv("UCCLZIP_OP_TIMEOUT", " 0.5 ", 1);
  absl::StatusOr<CommunicatorOptions> options = WithEnvironmentDefaults(CommunicatorOptions{}, 0);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->compression, CompressionMode::kAuto);
  EXPECT_EQ(options->pipeline_block_bytes, size_t{16} << 20);
  EXPECT_TRUE(options->hold_caller_stream);
  EXPECT_EQ(options->op_timeout, absl::Milliseconds(500));
}

// Through the public API: a communicator of one rank (no peers to reach).
TEST_F(OptionsEnvironmentTest, CommunicatorCreateAppliesAndChecksThem) {
  CommunicatorConfig config;
  config.bootstrap.rank = 0;
  config.bootstrap.world_size = 1;
  config.options.ucx_transports = "tcp";
  setenv("UCCLZIP_PIPELINE_BLOCK_BYTES", "3M", 1);
  {
    absl::StatusOr<std::unique_ptr<Communicator>> communicator = Communicator::Create(config);
    ASSERT_TRUE(communicator.ok()) << communicator.status();
    EXPECT_EQ((*communicator)->options().pipeline_block_bytes, size_t{3} << 20);
    EXPECT_EQ((*communicator)->options().ucx_transports, "tcp");
    // Unset, the transport block is the one for the UCX found: this test also runs against the
    // libucx-cu13 wheel on the GPU machine (scripts/gpu-run's CUDA-enabled UCX stage).
    EXPECT_EQ((*communicator)->options().block_bytes,
              (*communicator)->device_memory_direct() ? transport::kCudaUcxBlockBytes : transport::kDefaultBlockBytes);
  }
  setenv("UCCLZIP_DEVICE_SLOTS", "many", 1);
  // An inherited listening socket is closed on this failure too, as the bootstrap would.
  absl::StatusOr<ReservedPort> reserved = ReservePort();
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  config.bootstrap.listen_fd = reserved->listen_fd;
  absl::Status status = Communicator::Create(config).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("UCCLZIP_DEVICE_SLOTS='many'"), absl::string_view::npos) << status;
  EXPECT_EQ(fcntl(reserved->listen_fd, F_GETFD), -1);
}

}  // namespace
}  // namespace ucclzip::pipeline
