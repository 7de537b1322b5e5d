// The bound on the callers' streams the pipeline holds at once (held_streams.h): half the
// hardware queues, none below four, a group takes its room all at once, and a call that finds
// none waits for it or fails with what to change. Streams here are only handles.
#include "pipeline/held_streams.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ucclzip::pipeline {
namespace {

cudaStream_t Stream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

absl::Time Soon() { return absl::Now() + absl::Milliseconds(50); }

TEST(HeldStreams, HardwareQueuesAreCudasDefaultUnlessSetWithinItsRange) {
  EXPECT_EQ(HardwareQueues(nullptr), 8);
  EXPECT_EQ(HardwareQueues(""), 8);
  EXPECT_EQ(HardwareQueues("not a number"), 8);
  EXPECT_EQ(HardwareQueues("1"), 1);
  EXPECT_EQ(HardwareQueues("32"), 32);
  EXPECT_EQ(HardwareQueues("0"), 1);
  EXPECT_EQ(HardwareQueues("64"), 32);
}

TEST(HeldStreams, HalfTheQueuesNoneBelowFourAndSixteenAtMost) {
  EXPECT_EQ(HeldStreams(1).capacity(), 0);
  EXPECT_EQ(HeldStreams(3).capacity(), 0);
  EXPECT_EQ(HeldStreams(4).capacity(), 2);
  EXPECT_EQ(HeldStreams(8).capacity(), 4);
  EXPECT_EQ(HeldStreams(9).capacity(), 4);
  EXPECT_EQ(HeldStreams(32).capacity(), HeldStreams::kMostHeld);
}

TEST(HeldStreams, TooFewHardwareQueuesAreRefusedWithWhatToChange) {
  for (int queues : {1, 2, 3}) {
    HeldStreams few(queues);
    for (const absl::Status& refused : {few.CheckCanHold(), few.Acquire({Stream(1)}, absl::InfiniteFuture())}) {
      EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_TRUE(absl::StrContains(refused.message(), absl::StrCat("CUDA_DEVICE_MAX_CONNECTIONS=", queues))) << refused;
      EXPECT_TRUE(absl::StrContains(refused.message(), "UCCLZIP_HOLD_STREAM=0")) << refused;
    }
  }
  EXPECT_TRUE(HeldStreams(4).CheckCanHold().ok());
}

TEST(HeldStreams, UnderMpsNoStreamIsHeldAndTheRefusalSaysWhy) {
  HeldStreams shared(32, /*shared_by_mps=*/true);
  EXPECT_EQ(shared.capacity(), 0);
  for (const absl::Status& refused : {shared.CheckCanHold(), shared.Acquire({Stream(1)}, absl::InfiniteFuture())}) {
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(absl::StrContains(refused.message(), "CUDA MPS daemon")) << refused;
    EXPECT_TRUE(absl::StrContains(refused.message(), "UCCLZIP_HOLD_STREAM=0")) << refused;
  }
  EXPECT_EQ(shared.held(), 0);
}

TEST(HeldStreams, AStreamAlreadyHeldTakesNoMoreRoom) {
  HeldStreams streams(4);  // room for two
  ASSERT_TRUE(streams.Acquire({Stream(1)}, Soon()).ok());
  ASSERT_TRUE(streams.Acquire({Stream(1), Stream(1)}, Soon()).ok());
  ASSERT_TRUE(streams.Acquire({Stream(2)}, Soon()).ok());
  EXPECT_EQ(streams.held(), 2);
  const absl::Status full = streams.Acquire({Stream(3)}, Soon());
  EXPECT_EQ(full.code(), absl::StatusCode::kDeadlineExceeded) << full;
  EXPECT_TRUE(absl::StrContains(full.message(), "2 streams of this process are held on this device")) << full;
  EXPECT_TRUE(absl::StrContains(full.message(), "4 hardware queues")) << full;
  // Held three times, let go three times.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(streams.held(), 2);
    streams.Release(Stream(1));
  }
  EXPECT_EQ(streams.held(), 1);
  EXPECT_TRUE(streams.Acquire({Stream(3)}, Soon()).ok());
}

TEST(HeldStreams, ACallWaitsForRoomUntilAnotherIsLetGo) {
  HeldStreams streams(4);  // room for two
  ASSERT_TRUE(streams.Acquire({Stream(1), Stream(2)}, Soon()).ok());
  absl::Status waited = absl::UnknownError("not run");
  std::thread caller([&] { waited = streams.Acquire({Stream(3)}, absl::Now() + absl::Seconds(30)); });
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(streams.held(), 2);
  streams.Release(Stream(2));
  caller.join();
  EXPECT_TRUE(waited.ok()) << waited;
  EXPECT_EQ(streams.held(), 2);
}

TEST(HeldStreams, AGroupTakesItsRoomAllAtOnceOrNotAtAll) {
  HeldStreams streams(4);  // room for two
  ASSERT_TRUE(streams.Acquire({Stream(1)}, Soon()).ok());
  EXPECT_EQ(streams.Acquire({Stream(2), Stream(3)}, Soon()).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(streams.held(), 1);
  // A group that could never fit is refused at once, however long it may wait.
  const absl::Status never = streams.Acquire({Stream(2), Stream(3), Stream(4)}, absl::InfiniteFuture());
  EXPECT_EQ(never.code(), absl::StatusCode::kFailedPrecondition) << never;
  EXPECT_TRUE(absl::StrContains(never.message(), "holds 3 streams at once")) << never;
  EXPECT_TRUE(absl::StrContains(never.message(), "at most 2")) << never;
  EXPECT_TRUE(streams.Acquire({Stream(1), Stream(2)}, Soon()).ok());
}

}  // namespace
}  // namespace ucclzip::pipeline
