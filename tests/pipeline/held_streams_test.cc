// The bound on the callers' streams the pipeline holds at once (held_streams.h): half the
// hardware queues, none below four, a group takes its room all at once, and a call that finds
// none waits for it or fails with what to change; and where a call holds its stream at all, or
// returns once done (stream_order.h). Streams here are only handles.
#include "pipeline/held_streams.h"
#include "pipeline/stream_order.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

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

TEST(HeldStreams, TooFewHardwareQueuesOrMpsHoldNothing) {
  for (int queues : {1, 2, 3}) {
    HeldStreams few(queues);
    const absl::Status refused = few.Acquire({Stream(1)}, absl::InfiniteFuture());
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(absl::StrContains(refused.message(), absl::StrCat("CUDA_DEVICE_MAX_CONNECTIONS=", queues))) << refused;
    EXPECT_EQ(few.held(), 0);
  }
  HeldStreams shared(32, /*shared_by_mps=*/true);
  EXPECT_EQ(shared.capacity(), 0);
  EXPECT_EQ(shared.Acquire({Stream(1)}, absl::InfiniteFuture()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shared.held(), 0);
}

// Where no stream can be held, or holding one could hang, a call returns only once done.
TEST(StreamOrder, HeldOnlyWhereNothingTheCallNeedsWaitsForTheDevice) {
  using transport::MemoryType;
  for (MemoryType memory : {MemoryType::kHost, MemoryType::kDevice}) {
    for (bool direct : {false, true}) {
      for (bool legacy : {false, true}) {
        EXPECT_EQ(ChooseStreamOrder(false, direct, memory, 4, legacy), StreamOrder::kInputOnly);
        // UCX's own CUDA calls on the direct path may wait for the device, whatever the memory.
        EXPECT_EQ(ChooseStreamOrder(true, true, memory, 4, legacy), StreamOrder::kReturnWhenDone);
      }
    }
  }
  EXPECT_EQ(ChooseStreamOrder(true, false, MemoryType::kDevice, 4, false), StreamOrder::kHoldStream);
  EXPECT_EQ(ChooseStreamOrder(true, false, MemoryType::kDevice, 0, false), StreamOrder::kReturnWhenDone);
  // A held legacy stream stopped the pipeline's own GPU work (8 ranks on an H100): it is never
  // held, whatever the call's memory.
  for (MemoryType memory : {MemoryType::kHost, MemoryType::kDevice}) {
    EXPECT_EQ(ChooseStreamOrder(true, false, memory, 4, true), StreamOrder::kReturnWhenDone);
  }
  // Host memory needs none of the pipeline's GPU work: held even with no queue to spare.
  EXPECT_EQ(ChooseStreamOrder(true, false, MemoryType::kHost, 0, false), StreamOrder::kHoldStream);
}

TEST(StreamOrder, NullAndCudaStreamLegacyAreTheLegacyStream) {
  EXPECT_TRUE(IsLegacyStream(nullptr));
  EXPECT_TRUE(IsLegacyStream(cudaStreamLegacy));
  EXPECT_FALSE(IsLegacyStream(cudaStreamPerThread));
  EXPECT_FALSE(IsLegacyStream(Stream(7)));
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

// Calls that return once done wait at once outside a scope, and inside one only when the
// outermost scope ends, after everything the thread posts in it (ncclGroupEnd over several
// communicators).
TEST(StreamOrder, InsideAScopeCallsThatReturnOnceDoneWaitAtItsEnd) {
  auto pending = std::make_shared<transport::Request>();
  EXPECT_FALSE(ReturnWhenDoneScope::Keep({pending}));
  absl::Notification outer_closed;
  std::thread completer;
  {
    ReturnWhenDoneScope outer;
    {
      ReturnWhenDoneScope inner;
      EXPECT_TRUE(ReturnWhenDoneScope::Keep({pending}));
    }
    // The inner scope's end waited for nothing: the request is still pending here.
    EXPECT_FALSE(pending->Test());
    completer = std::thread([&] {
      absl::SleepFor(absl::Milliseconds(100));
      EXPECT_FALSE(outer_closed.HasBeenNotified());
      pending->Complete(absl::OkStatus());
    });
  }
  outer_closed.Notify();
  EXPECT_TRUE(pending->Test());
  completer.join();
  EXPECT_FALSE(ReturnWhenDoneScope::Keep({pending}));
}

}  // namespace
}  // namespace ucclzip::pipeline
