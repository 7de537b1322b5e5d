// The check that refuses to hold a caller's stream where CUDA would put it in one hardware
// queue with the pipeline's own work (stream_flags.h).
#include "pipeline/stream_flags.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace ucclzip::pipeline {
namespace {

TEST(HeldStreams, OneHardwareQueueIsRefusedWithWhatToChange) {
  const absl::Status refused = CheckHeldStreamsCanProgress("1");
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.message(), "CUDA_DEVICE_MAX_CONNECTIONS=1")) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "UCCLZIP_HOLD_STREAM=0")) << refused;
}

TEST(HeldStreams, MoreQueuesOrNoSettingAreLetThrough) {
  for (const char* value : {"2", "8", "32", "", "not a number"}) {
    EXPECT_TRUE(CheckHeldStreamsCanProgress(value).ok()) << value;
  }
  EXPECT_TRUE(CheckHeldStreamsCanProgress(nullptr).ok());
}

}  // namespace
}  // namespace ucclzip::pipeline
