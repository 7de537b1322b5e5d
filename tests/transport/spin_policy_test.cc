// Who polls and who sleeps, by the machine's core count, and Request::Wait while it polls: a
// completion from another thread ends the poll, a deadline inside it still holds.
#include <gtest/gtest.h>

#include <thread>

#include "transport/request.h"
#include "transport/spin_policy.h"

namespace ucclzip::transport {
namespace {

TEST(SpinPolicy, SmallMachinesNeverBusyPollAndTheirProgressThreadsYield) {
  for (unsigned cores : {1u, 2u, 7u}) {
    SpinPolicy policy = SpinPolicyFor(cores, std::nullopt);
    EXPECT_EQ(policy.wait_spin, absl::ZeroDuration()) << cores << " cores";
    EXPECT_TRUE(policy.progress_yields) << cores << " cores";
  }
}

TEST(SpinPolicy, LargeMachinesPollFor50usAndTheirProgressThreadsSpin) {
  for (unsigned cores : {8u, 16u, 128u}) {
    SpinPolicy policy = SpinPolicyFor(cores, std::nullopt);
    EXPECT_EQ(policy.wait_spin, absl::Microseconds(50)) << cores << " cores";
    EXPECT_FALSE(policy.progress_yields) << cores << " cores";
  }
}

TEST(SpinPolicy, AnExplicitWaitSpinIsKeptOnEveryMachine) {
  EXPECT_EQ(SpinPolicyFor(2, absl::Microseconds(30)).wait_spin, absl::Microseconds(30));
  EXPECT_EQ(SpinPolicyFor(16, absl::ZeroDuration()).wait_spin, absl::ZeroDuration());
  // The progress thread's manners depend on the cores alone.
  EXPECT_TRUE(SpinPolicyFor(2, absl::Microseconds(30)).progress_yields);
  EXPECT_FALSE(SpinPolicyFor(16, absl::ZeroDuration()).progress_yields);
}

TEST(PollingRequest, ACompletionFromAnotherThreadEndsTheWaitWithItsStatus) {
  Request request({}, absl::Seconds(100));  // polls far longer than the test may take
  std::thread completer([&] { request.Complete(absl::DataLossError("block 3 of 4")); });
  absl::Status status = request.Wait(absl::InfiniteFuture());
  completer.join();
  EXPECT_EQ(status, absl::DataLossError("block 3 of 4"));
}

TEST(PollingRequest, ADeadlineInsideThePollStillHolds) {
  Request request({}, absl::Seconds(100));
  EXPECT_TRUE(absl::IsDeadlineExceeded(request.Wait(absl::Now() + absl::Milliseconds(5))));
  EXPECT_FALSE(request.Test());
  request.Complete(absl::OkStatus());
  EXPECT_TRUE(request.Wait(absl::InfinitePast()).ok());
}

}  // namespace
}  // namespace ucclzip::transport
