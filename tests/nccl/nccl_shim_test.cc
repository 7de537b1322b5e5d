// The shim's pieces below the C API: which ncclResult_t each kind of failure becomes, the
// last error kept per thread, and the settings read from the environment.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <thread>

#include "nccl/environment.h"
#include "nccl/status.h"

namespace ucclzip::nccl {
namespace {

TEST(NcclStatus, EveryKindOfFailureHasItsNcclResult) {
  EXPECT_EQ(ResultOf(absl::OkStatus()), ncclSuccess);
  EXPECT_EQ(ResultOf(absl::InvalidArgumentError("")), ncclInvalidArgument);
  EXPECT_EQ(ResultOf(absl::OutOfRangeError("")), ncclInvalidArgument);
  EXPECT_EQ(ResultOf(absl::FailedPreconditionError("")), ncclInvalidUsage);
  EXPECT_EQ(ResultOf(absl::UnimplementedError("")), ncclInvalidUsage);
  for (const absl::Status& remote : {absl::UnavailableError(""), absl::DeadlineExceededError(""), absl::DataLossError(""),
                                     absl::AbortedError(""), absl::CancelledError("")}) {
    EXPECT_EQ(ResultOf(remote), ncclRemoteError) << remote;
  }
  EXPECT_EQ(ResultOf(absl::InternalError("")), ncclInternalError);
  EXPECT_EQ(ResultOf(absl::ResourceExhaustedError("")), ncclSystemError);
  EXPECT_EQ(ResultOf(absl::PermissionDeniedError("")), ncclSystemError);
}

TEST(NcclStatus, TheLastErrorIsPerThreadAndKeptOverSuccesses) {
  EXPECT_EQ(Report(absl::InvalidArgumentError("rank 1: allreduce: bad")), ncclInvalidArgument);
  EXPECT_EQ(Report(absl::OkStatus()), ncclSuccess);
  EXPECT_STREQ(LastError(), "rank 1: allreduce: bad");
  std::thread([] { EXPECT_STREQ(LastError(), ""); }).join();
}

class NcclEnvironment : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name : {"UCCLZIP_COMPRESS", "UCCLZIP_OP_TIMEOUT", "UCCLZIP_PIPELINE_BLOCK_BYTES",
                             "UCCLZIP_BOOTSTRAP_TIMEOUT"}) {
      unsetenv(name);
    }
  }
};

TEST_F(NcclEnvironment, DefaultsAreTheCommunicatorsDefaults) {
  absl::StatusOr<ShimSettings> settings = SettingsFromEnvironment();
  ASSERT_TRUE(settings.ok()) << settings.status();
  const CommunicatorOptions defaults;
  EXPECT_EQ(settings->options.compression, defaults.compression);
  EXPECT_EQ(settings->options.op_timeout, defaults.op_timeout);
  EXPECT_EQ(settings->options.pipeline_block_bytes, defaults.pipeline_block_bytes);
}

TEST_F(NcclEnvironment, ReadsEveryVariable) {
  setenv("UCCLZIP_COMPRESS", "off", 1);
  setenv("UCCLZIP_OP_TIMEOUT", "2.5", 1);
  setenv("UCCLZIP_PIPELINE_BLOCK_BYTES", "1048576", 1);
  setenv("UCCLZIP_BOOTSTRAP_TIMEOUT", "7", 1);
  absl::StatusOr<ShimSettings> settings = SettingsFromEnvironment();
  ASSERT_TRUE(settings.ok()) << settings.status();
  EXPECT_EQ(settings->options.compression, CompressionMode::kOff);
  EXPECT_EQ(settings->options.op_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(settings->options.pipeline_block_bytes, 1u << 20);
  EXPECT_EQ(settings->bootstrap_timeout, absl::Seconds(7));
}

TEST_F(NcclEnvironment, AMalformedValueIsNamed) {
  setenv("UCCLZIP_COMPRESS", "sometimes", 1);
  absl::StatusOr<ShimSettings> settings = SettingsFromEnvironment();
  ASSERT_EQ(settings.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(settings.status().message(), "UCCLZIP_COMPRESS='sometimes' is not auto, on or off");
  unsetenv("UCCLZIP_COMPRESS");
  setenv("UCCLZIP_PIPELINE_BLOCK_BYTES", "0", 1);
  settings = SettingsFromEnvironment();
  ASSERT_EQ(settings.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(settings.status().message().find("UCCLZIP_PIPELINE_BLOCK_BYTES='0'"), absl::string_view::npos);
}

}  // namespace
}  // namespace ucclzip::nccl
