// Staging copy wake-ups (CommunicatorOptions::staging_copy_wakeups) between real processes: the
// progress thread sleeps while staging copies run, and a copy that finishes then wakes it at
// once rather than at its 1 ms poll timeout; an abort with copies in flight still waits for
// them (and so reads no buffer after it completed). The memcpy engine cannot show this: its
// copies are done when Start returns, so the thread never sleeps with one in flight. These
// tests stage through an engine whose copies finish on a thread of their own, once the
// progress thread is asleep, as a CUDA copy may.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "transport/event_fd.h"
#include "transport/rank_helpers.h"

namespace ucclzip::testing {
namespace {

using transport::CopyDirection;
using transport::MemoryType;
using transport::OpTag;
using transport::StagingEngine;
using transport::TransportOptions;

// What a rank's engines did, and what the test tells them. Shared by the engines of every lane.
struct CopyLog {
  std::atomic<bool> signal_copies{true};  // false: finished copies do not signal, as if the wake-up got lost
  std::atomic<bool> hold_copies{false};   // true: copies stay in flight until it is false again
  std::atomic<int> copies_started{0};
  // Copies that finished after 1 s without finding the progress thread asleep; after the first,
  // copies no longer wait for it (the round fails anyway).
  std::atomic<int> copies_without_sleep{0};
  absl::Mutex mutex;
  // From a copy's end to the progress thread's Poll that saw it; [1]: copies that signalled.
  std::vector<absl::Duration> lags[2] ABSL_GUARDED_BY(mutex);
};

// True when thread `tid` of this process sleeps in the kernel (state S, as in poll()); a thread
// that yields or waits for a core is running (R).
bool ThreadSleeps(pid_t tid) {
  std::ifstream stat(absl::StrCat("/proc/self/task/", tid, "/stat"));
  std::string line;
  if (tid == 0 || !std::getline(stat, line)) return false;
  size_t name_end = line.rfind(')');  // the thread's name may hold spaces and parentheses
  return name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'S';
}

// Copies in host memory on a thread of its own: a started copy finishes once the thread that
// polls the copies (the progress thread) has stopped polling for 50 us and sleeps, then
// signals `copy_done_fd` (unless the log says not to) and records when it finished.
class DeferredCopyEngine final : public StagingEngine {
 public:
  DeferredCopyEngine(int copy_done_fd, std::shared_ptr<CopyLog> log)
      : copy_done_fd_(copy_done_fd), log_(std::move(log)), copier_([this] { Run(); }) {}
  ~DeferredCopyEngine() override {
    stopping_.store(true);
    {
      absl::MutexLock lock(&mutex_);
      wake_copier_ = true;
    }
    copier_.join();
  }

  absl::StatusOr<void*> Allocate(size_t bytes) override { return memory_->Allocate(bytes); }
  void Free(void* memory) override { memory_->Free(memory); }

  absl::StatusOr<uint32_t> Start(void* destination, const void* source, size_t bytes, CopyDirection) override {
    absl::MutexLock lock(&mutex_);
    pending_.push_back({next_ticket_, destination, source, bytes});
    wake_copier_ = true;
    log_->copies_started.fetch_add(1);
    return next_ticket_++;
  }

  absl::StatusOr<bool> Poll(uint32_t ticket) override {
    const absl::Time now = absl::Now();
    poller_.store(gettid());
    last_poll_nanos_.store(absl::ToUnixNanos(now));
    absl::MutexLock lock(&mutex_);
    auto it = finished_.find(ticket);
    if (it == finished_.end()) return false;
    {
      absl::MutexLock log_lock(&log_->mutex);
      log_->lags[it->second.signalled].push_back(now - it->second.at);
    }
    finished_.erase(it);
    return true;
  }

 private:
  struct Copy {
    uint32_t ticket;
    void* destination;
    const void* source;
    size_t bytes;
  };
  struct Finished {
    absl::Time at;
    bool signalled;
  };

  void Run() {
    while (!stopping_.load()) {
      Copy copy;
      {
        absl::MutexLock lock(&mutex_);
        mutex_.Await(absl::Condition(&wake_copier_));
        wake_copier_ = false;
        if (pending_.empty()) continue;
        copy = pending_.front();
        pending_.pop_front();
        wake_copier_ = !pending_.empty();
      }
      while (log_->hold_copies.load() && !stopping_.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
      const bool slept = PollerFallsAsleep();
      if (stopping_.load()) return;
      if (!slept) log_->copies_without_sleep.fetch_add(1);
      std::memcpy(copy.destination, copy.source, copy.bytes);
      const bool signal = log_->signal_copies.load();
      {
        absl::MutexLock lock(&mutex_);
        finished_[copy.ticket] = {absl::Now(), signal};
      }
      if (signal && copy_done_fd_ >= 0) transport::SignalEventFd(copy_done_fd_);
    }
  }

  // True once the poller has not polled for 50 us and sleeps; false after 1 s without.
  bool PollerFallsAsleep() {
    if (log_->copies_without_sleep.load() > 0) return false;
    const absl::Time give_up = absl::Now() + absl::Seconds(1);
    while (!stopping_.load() && absl::Now() < give_up) {
      const absl::Duration quiet = absl::Now() - absl::FromUnixNanos(last_poll_nanos_.load());
      if (quiet >= absl::Microseconds(50) && ThreadSleeps(poller_.load())) return true;
      std::this_thread::yield();
    }
    return false;
  }

  const int copy_done_fd_;
  const std::shared_ptr<CopyLog> log_;
  const std::unique_ptr<StagingEngine> memory_ = transport::MakeHostStagingEngine(-1);  // allocates only
  std::atomic<bool> stopping_{false};
  std::atomic<pid_t> poller_{0};
  std::atomic<int64_t> last_poll_nanos_{0};
  absl::Mutex mutex_;
  bool wake_copier_ ABSL_GUARDED_BY(mutex_) = false;
  uint32_t next_ticket_ ABSL_GUARDED_BY(mutex_) = 0;
  std::deque<Copy> pending_ ABSL_GUARDED_BY(mutex_);
  std::map<uint32_t, Finished> finished_ ABSL_GUARDED_BY(mutex_);
  std::thread copier_;  // last: starts once everything above exists
};

TransportOptions DeferredStaging(const std::string& tls, std::shared_ptr<CopyLog> log) {
  TransportOptions options;
  options.ucx_transports = tls;
  options.stage_host_memory = true;
  options.staging_copy_wakeups = true;
  options.host_staging_engine = [log](int copy_done_fd) { return std::make_unique<DeferredCopyEngine>(copy_done_fd, log); };
  options.block_bytes = size_t{1} << 20;
  options.staging_pool_bytes = size_t{8} << 20;
  options.op_timeout = absl::Seconds(20);
  options.shutdown_timeout = absl::Seconds(5);
  return options;
}

absl::Duration Median(std::vector<absl::Duration> values) {
  if (values.empty()) return absl::InfiniteDuration();
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

// One round: rank 0 sends rank 1 2 x `copies_each` one-block messages, one at a time, the
// first half with copies that do not signal. Each rank's verdict is its own copies'.
absl::Status MeasureRound(transport::Transport& transport, transport::Bootstrap& bootstrap, CopyLog& log,
                          uint32_t copies_each, uint32_t first_sequence, const std::string& what) {
  const size_t bytes = size_t{256} << 10;
  std::vector<uint8_t> buffer(bytes);
  log.copies_without_sleep.store(0);
  {
    absl::MutexLock lock(&log.mutex);
    log.lags[0].clear();
    log.lags[1].clear();
  }
  for (uint32_t i = 0; i < 2 * copies_each; ++i) {
    const uint32_t sequence = first_sequence + i;
    log.signal_copies.store(i >= copies_each);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    if (transport.rank() == 0) {
      FillPattern(buffer.data(), bytes, SeedOf(0, 1, sequence));
      if (absl::Status s = transport.Send(1, buffer.data(), bytes, MemoryType::kHost, OpTag{sequence, 0})->Wait(deadline);
          !s.ok()) {
        return s;
      }
    } else {
      if (absl::Status s = transport.Recv(0, buffer.data(), bytes, MemoryType::kHost, OpTag{sequence, 0})->Wait(deadline);
          !s.ok()) {
        return s;
      }
      if (absl::Status s = VerifyPattern(buffer.data(), bytes, SeedOf(0, 1, sequence), absl::StrCat("message ", sequence));
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = bootstrap.Barrier(deadline); !s.ok()) return s;
  }
  std::vector<absl::Duration> lags[2];
  {
    absl::MutexLock lock(&log.mutex);
    lags[0] = log.lags[0];
    lags[1] = log.lags[1];
  }
  if (int never = log.copies_without_sleep.load(); never > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, "a copy found the progress thread awake for 1 s: it did not sleep while the copy ran"));
  }
  if (lags[0].size() != copies_each || lags[1].size() != copies_each) {
    return absl::InternalError(absl::StrCat(what, "expected ", copies_each, " copies of each kind, saw ", lags[0].size(),
                                            " unsignalled and ", lags[1].size(), " signalled"));
  }
  const absl::Duration unsignalled = Median(lags[0]), signalled = Median(lags[1]);
  if (signalled * 2 >= unsignalled) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, "a finished copy was seen after ", absl::FormatDuration(signalled), " (median) with its wake-up, ",
        absl::FormatDuration(unsignalled), " without: the wake-ups do not reach the sleeping thread"));
  }
  return absl::OkStatus();
}

class StagingWakeups : public ::testing::TestWithParam<std::string> {};

// Each rank's copies finish while its progress thread sleeps. The copies that do not signal
// are seen only when the thread's 1 ms poll times out, which is what every copy would cost if
// the wake-ups did not arrive; the copies that signal must be seen in well under half that
// time (about 20 us on an idle 2-core machine, against 0.7-1 ms). A barrier between messages
// keeps the other rank's traffic from waking the thread meanwhile. A machine loaded enough to
// delay the woken thread by as much as its timeout fails a round by chance, so up to three
// rounds run; without wake-ups, or with a thread that never sleeps, every round fails.
TEST_P(StagingWakeups, ReachTheProgressThreadAsleep) {
  const std::string tls = GetParam();
  auto outcomes = RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto log = std::make_shared<CopyLog>();
    auto communicator = CreateCommunicator(context, DeferredStaging(tls, log));
    if (!communicator.ok()) return communicator.status();
    transport::Transport& transport = TransportOf(**communicator);
    transport::Bootstrap& bootstrap = internal::CommunicatorAccess::BootstrapOf(**communicator);
    constexpr uint32_t kCopiesEach = 16, kRounds = 3;
    std::string failures;
    bool passed = false;
    for (uint32_t round = 0; round < kRounds; ++round) {
      const auto what = absl::StrCat("rank ", context.rank, " over ", tls, ", round ", round + 1, ": ");
      absl::Status verdict = MeasureRound(transport, bootstrap, *log, kCopiesEach, round * 2 * kCopiesEach, what);
      if (!verdict.ok() && !absl::IsFailedPrecondition(verdict)) return verdict;
      passed |= verdict.ok();
      if (!verdict.ok()) absl::StrAppend(&failures, verdict.message(), "; ");
      // Both ranks take part in every round until each has passed one.
      absl::StatusOr<std::vector<std::string>> verdicts =
          bootstrap.AllGather(passed ? "pass" : "fail", absl::Now() + absl::Seconds(20));
      if (!verdicts.ok()) return verdicts.status();
      if (std::count(verdicts->begin(), verdicts->end(), "pass") == context.world_size) break;
    }
    return passed ? absl::OkStatus() : absl::InternalError(failures);
  });
  ExpectRanksSucceeded(outcomes);
}

INSTANTIATE_TEST_SUITE_P(, StagingWakeups, ::testing::Values("tcp", "posix,sysv"),
                         [](const auto& info) { return info.param == "tcp" ? std::string("tcp") : std::string("shm"); });

// Rank 0 aborts while the copies of its staged send into staging are in flight (held by its
// engine, so that no block has reached the network yet). The failed send must not complete
// before they finish, since they read its buffer; once they do, their wake-ups complete it.
// Rank 1, told so through the bootstrap, aborts its receive too.
TEST(StagingWakeupsTcp, AbortWithCopiesInFlightWaitsForThem) {
  auto outcomes = RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto log = std::make_shared<CopyLog>();
    log->hold_copies.store(context.rank == 0);
    auto communicator = CreateCommunicator(context, DeferredStaging("tcp", log));
    if (!communicator.ok()) return communicator.status();
    transport::Transport& transport = TransportOf(**communicator);
    transport::Bootstrap& bootstrap = internal::CommunicatorAccess::BootstrapOf(**communicator);
    const size_t bytes = (size_t{16} << 20) + 5;  // more blocks than the send pool holds
    std::vector<uint8_t> buffer(bytes);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    if (context.rank == 1) {
      auto recv = transport.Recv(0, buffer.data(), bytes, MemoryType::kHost, OpTag{1, 0});
      if (absl::StatusOr<std::string> told = bootstrap.Recv(0, 3, deadline); !told.ok()) return told.status();
      (*communicator)->Abort();
      return ExpectError(recv->Wait(absl::Now() + absl::Seconds(5)), absl::StatusCode::kAborted,
                         {"rank 1: recv from peer 0", "staged", "rank 1 called Abort"}, "receive aborted mid-transfer");
    }
    FillPattern(buffer.data(), bytes, 11);
    auto send = transport.Send(1, buffer.data(), bytes, MemoryType::kHost, OpTag{1, 0});
    while (log->copies_started.load() == 0) {
      if (absl::Now() > deadline) return absl::DeadlineExceededError("rank 0: no staging copy started");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    (*communicator)->Abort();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (send->Test()) return absl::InternalError("rank 0: the aborted send completed while copies of its buffer were in flight");
    log->hold_copies.store(false);
    const absl::Time released = absl::Now();
    if (absl::Status s = ExpectError(send->Wait(absl::Now() + absl::Seconds(5)), absl::StatusCode::kAborted,
                                     {"rank 0: send to peer 1", "staged", "rank 0 called Abort"}, "send aborted mid-copy");
        !s.ok()) {
      return s;
    }
    if (absl::Duration took = absl::Now() - released; took > absl::Seconds(1)) {
      return absl::InternalError(absl::StrCat("rank 0: the aborted send took ", absl::FormatDuration(took),
                                              " to complete after its copies were released"));
    }
    return bootstrap.Send(1, 3, "aborted", deadline);
  });
  ExpectRanksSucceeded(outcomes);
}

}  // namespace
}  // namespace ucclzip::testing
