// HostCodecJobs: queued jobs run in order on the worker, off the calling thread, each followed
// by a wake-up; small ones run at once on the caller, with the codec threads only while the
// worker does not hold them; destruction runs what is still queued.
#include "pipeline/host_codec_jobs.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace ucclzip::pipeline {
namespace {

constexpr uint64_t kQueued = HostCodecJobs::kQueuedBytes;

TEST(HostCodecJobs, QueuedJobsRunInOrderOffTheCallerAndWakeAfterEach) {
  std::atomic<int> wakes{0};
  HostCodecJobs jobs(nullptr, [&] { ++wakes; });
  absl::Notification release;
  std::vector<int> order;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  std::vector<std::shared_ptr<const HostCodecJobs::Job>> queued;
  // The first job holds the worker until released, so that the others are surely queued.
  queued.push_back(jobs.Run(kQueued, [&](HostCodecThreads*) -> absl::StatusOr<uint64_t> {
    release.WaitForNotification();
    order.push_back(0);
    return uint64_t{10};
  }));
  for (int i = 1; i < 4; ++i) {
    queued.push_back(jobs.Run(kQueued, [&, i](HostCodecThreads*) -> absl::StatusOr<uint64_t> {
      if (std::this_thread::get_id() == caller) on_caller = true;
      order.push_back(i);
      if (i == 2) return absl::DataLossError("job 2 failed");
      return uint64_t(10 + i);
    }));
  }
  for (const auto& job : queued) EXPECT_FALSE(job->done());
  release.Notify();
  while (!queued.back()->done()) std::this_thread::yield();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(on_caller);
  EXPECT_EQ(*queued[0]->result(), 10u);
  EXPECT_EQ(*queued[3]->result(), 13u);
  EXPECT_EQ(queued[2]->result().status().code(), absl::StatusCode::kDataLoss);
  while (wakes.load() < 4) std::this_thread::yield();
  EXPECT_EQ(wakes.load(), 4);
}

TEST(HostCodecJobs, SmallJobsRunAtOnceOnTheCaller) {
  std::atomic<int> wakes{0};
  HostCodecJobs jobs(nullptr, [&] { ++wakes; });
  std::thread::id ran_on;
  auto job = jobs.Run(kQueued - 1, [&](HostCodecThreads*) -> absl::StatusOr<uint64_t> {
    ran_on = std::this_thread::get_id();
    return uint64_t{7};
  });
  ASSERT_TRUE(job->done());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(*job->result(), 7u);
  EXPECT_EQ(wakes.load(), 0);
}

// The worker's job holds the codec threads for all its length (a 16 MB encode takes
// milliseconds): a small job meanwhile runs on its own thread alone rather than wait for them
// and count the wait as its codec time.
TEST(HostCodecJobs, SmallJobsTakeTheCodecThreadsOnlyWhileTheWorkerHasNone) {
  absl::StatusOr<std::unique_ptr<HostCodecThreads>> threads = HostCodecThreads::Create(2);
  ASSERT_TRUE(threads.ok()) << threads.status();
  HostCodecJobs jobs(threads->get(), [] {});
  auto threads_of_small_job = [&] {
    HostCodecThreads* given = nullptr;
    jobs.Run(kQueued - 1, [&](HostCodecThreads* t) -> absl::StatusOr<uint64_t> {
      given = t;
      return uint64_t{0};
    });
    return given;
  };
  EXPECT_EQ(threads_of_small_job(), threads->get());
  absl::Notification started, release;
  HostCodecThreads* given_to_queued = nullptr;
  auto queued = jobs.Run(kQueued, [&](HostCodecThreads* t) -> absl::StatusOr<uint64_t> {
    given_to_queued = t;
    started.Notify();
    release.WaitForNotification();
    return uint64_t{0};
  });
  started.WaitForNotification();
  EXPECT_EQ(threads_of_small_job(), nullptr);
  release.Notify();
  while (!queued->done()) std::this_thread::yield();
  EXPECT_EQ(given_to_queued, threads->get());
  // The worker lets them go once its job is done (done() is set inside the job's run, the
  // worker's bookkeeping right after it).
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (threads_of_small_job() == nullptr && absl::Now() < deadline) std::this_thread::yield();
  EXPECT_EQ(threads_of_small_job(), threads->get());
}

TEST(HostCodecJobs, DestructionRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  std::vector<std::shared_ptr<const HostCodecJobs::Job>> queued;
  {
    HostCodecJobs jobs(nullptr, [] {});
    for (int i = 0; i < 8; ++i) {
      queued.push_back(jobs.Run(kQueued, [&](HostCodecThreads*) -> absl::StatusOr<uint64_t> {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ++ran;
        return uint64_t{0};
      }));
    }
  }
  EXPECT_EQ(ran.load(), 8);
  for (const auto& job : queued) EXPECT_TRUE(job->done());
}

}  // namespace
}  // namespace ucclzip::pipeline
