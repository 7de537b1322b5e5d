// One communicator used from several threads at once, as a C++ inference server does (and as
// scripts/tsan runs it): point-to-point calls and groups on two threads over disjoint links,
// collectives posted by a third thread while those are still in flight, Wait, Test and stats()
// on a fourth, and Abort from yet another thread while calls are still being posted.
// Calls on one link must come in the same order on both ends, so the threads that post share no
// link, and the collectives (which use every link) are posted only after the others have posted.
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "pipeline_test_util.h"

namespace ucclzip::testing {
namespace {

struct Tracked {
  Operation operation;
  std::string what;
};

// Operations posted by any thread, waited for by one other.
class Posted {
 public:
  void Add(Operation operation, std::string what) {
    absl::MutexLock lock(&mutex_);
    posted_.push_back({std::move(operation), std::move(what)});
  }
  std::vector<Tracked> Take() {
    absl::MutexLock lock(&mutex_);
    return std::move(posted_);
  }

 private:
  absl::Mutex mutex_;
  std::vector<Tracked> posted_ ABSL_GUARDED_BY(mutex_);
};

std::vector<uint8_t> Tensor(uint64_t count, uint64_t seed) {
  return GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, seed);
}

TEST(ConcurrentCallers, OneCommunicatorFromSeveralThreadsThenAbortFromAnother) {
  constexpr uint64_t kCount = 700'001;  // bf16: 1.4 MB, blocks of 2 MB coded by the host codec thread
  constexpr int kRounds = 2;
  ExpectRanksSucceeded(RunRanks({.world_size = 3, .kill_after = absl::Seconds(600)},
                                [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = ShortTimeoutOptions();
    options.op_timeout = absl::Seconds(60);
    options.pipeline_block_bytes = size_t{2} << 20;
    options.block_bytes = size_t{256} << 10;
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const int world = context.world_size, rank = context.rank;
    const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    for (int round = 0; round < kRounds; ++round) {
      Posted posted;
      absl::Notification forward_posted, backward_posted, all_posted;
      // Forward: send to next, receive from prev, in a group. Backward: the other two links,
      // one call at a time.
      const std::vector<uint8_t> to_next = Tensor(kCount, 100 * round + rank);
      const std::vector<uint8_t> to_prev = Tensor(kCount, 100 * round + 10 + rank);
      std::vector<uint8_t> from_prev(to_next.size()), from_next(to_prev.size());
      std::thread forward([&] {
        c.GroupStart();
        Operation send = c.Send(to_next.data(), kCount, DataType::kBFloat16, next, nullptr);
        Operation recv = c.Recv(from_prev.data(), kCount, DataType::kBFloat16, prev, nullptr);
        posted.Add(c.GroupEnd(), "forward group");
        posted.Add(send, "forward send");
        posted.Add(recv, "forward recv");
        forward_posted.Notify();
      });
      std::thread backward([&] {
        posted.Add(c.Send(to_prev.data(), kCount, DataType::kBFloat16, prev, nullptr,
                          SendOptions{.compression = CompressionMode::kAuto}),
                   "backward send");
        posted.Add(c.Recv(from_next.data(), kCount, DataType::kBFloat16, next, nullptr), "backward recv");
        backward_posted.Notify();
      });
      // Collectives, posted once both others have posted (a link's calls keep one order on both
      // ends), while their transfers are still in flight.
      std::vector<float> reduced(300'001), broadcast(200'003), gathered(50'000 * world);
      std::thread collectives([&] {
        c.GroupStart();  // open while the other threads' calls and group are posted
        forward_posted.WaitForNotification();
        backward_posted.WaitForNotification();
        for (size_t i = 0; i < reduced.size(); ++i) reduced[i] = static_cast<float>((i % 97) + rank);
        for (size_t i = 0; i < broadcast.size(); ++i) broadcast[i] = rank == 1 ? static_cast<float>(i % 1013) : -1.0f;
        for (int i = 0; i < 50'000; ++i) gathered[rank * 50'000 + i] = static_cast<float>(rank * 7 + i % 5);
        posted.Add(c.AllReduce(reduced.data(), reduced.data(), reduced.size(), DataType::kFloat32, ReduceOp::kSum,
                               nullptr),
                   "allreduce");
        posted.Add(c.Broadcast(broadcast.data(), broadcast.data(), broadcast.size(), DataType::kFloat32, 1, nullptr),
                   "broadcast");
        posted.Add(c.GroupEnd(), "collectives group");
        posted.Add(c.AllGather(gathered.data() + rank * 50'000, gathered.data(), 50'000, DataType::kFloat32, nullptr,
                               CollectiveOptions{.compression = CompressionMode::kOn}),
                   "allgather");
        all_posted.Notify();
      });
      // The waiter: tests, reads statistics and waits while the others post.
      absl::Status waited;
      std::thread waiter([&] {
        while (!all_posted.HasBeenNotified()) {
          (void)c.stats();
          for (const Tracked& t : posted.Take()) posted.Add(t.operation, t.what), (void)t.operation.Test();
          absl::SleepFor(absl::Milliseconds(1));
        }
        for (const Tracked& t : posted.Take()) {
          waited.Update(WaitOk(t.operation, absl::StrCat("rank ", rank, " round ", round, ": ", t.what)));
          (void)c.stats();
        }
      });
      for (std::thread* t : {&forward, &backward, &collectives, &waiter}) t->join();
      if (!waited.ok()) return waited;
      const std::vector<uint8_t> want_prev = Tensor(kCount, 100 * round + prev);
      const std::vector<uint8_t> want_next = Tensor(kCount, 100 * round + 10 + next);
      if (absl::Status s = ExpectSameBytes(from_prev.data(), want_prev.data(), want_prev.size(), "from prev"); !s.ok()) {
        return s;
      }
      if (absl::Status s = ExpectSameBytes(from_next.data(), want_next.data(), want_next.size(), "from next"); !s.ok()) {
        return s;
      }
      for (size_t i = 0; i < reduced.size(); ++i) {
        const float want = static_cast<float>(world * (i % 97) + world * (world - 1) / 2);
        if (reduced[i] != want) return absl::DataLossError(absl::StrCat("allreduce element ", i, ": ", reduced[i]));
      }
      for (size_t i = 0; i < broadcast.size(); ++i) {
        if (broadcast[i] != static_cast<float>(i % 1013)) {
          return absl::DataLossError(absl::StrCat("broadcast element ", i, ": ", broadcast[i]));
        }
      }
      for (int r = 0; r < world; ++r) {
        for (int i = 0; i < 50'000; ++i) {
          if (gathered[r * 50'000 + i] != static_cast<float>(r * 7 + i % 5)) {
            return absl::DataLossError(absl::StrCat("allgather rank ", r, " element ", i));
          }
        }
      }
    }
    // Abort from a thread of its own while two others still post (calls on shared links, so
    // their pairing may fail: only that every call ends matters here) and another reads
    // statistics; then a waiter on yet another thread must see every call end, and this thread
    // destroys the communicator.
    Posted pending;
    std::vector<std::vector<uint8_t>> buffers(64, std::vector<uint8_t>(size_t{1} << 20, 1));
    absl::Notification stop;
    std::thread poster([&] {
      for (int i = 0; i < 16 && !stop.HasBeenNotified(); ++i) {
        c.GroupStart();
        pending.Add(c.Send(buffers[2 * i].data(), buffers[2 * i].size() / 2, DataType::kBFloat16, next, nullptr), "send");
        pending.Add(c.Recv(buffers[2 * i + 1].data(), buffers[2 * i].size() / 2, DataType::kBFloat16, prev, nullptr),
                    "recv");
        pending.Add(c.GroupEnd(), "group");
      }
    });
    std::thread reducer([&] {
      for (int i = 32; i < 64 && !stop.HasBeenNotified(); ++i) {
        pending.Add(c.AllReduce(buffers[i].data(), buffers[i].data(), buffers[i].size() / 4, DataType::kFloat32,
                                ReduceOp::kMax, nullptr),
                    "allreduce");
      }
    });
    std::thread reader([&] {
      while (!stop.HasBeenNotified()) (void)c.stats(), absl::SleepFor(absl::Microseconds(200));
    });
    std::thread aborter([&] {
      absl::SleepFor(absl::Milliseconds(30 + 20 * rank));
      c.Abort();
      stop.Notify();
    });
    for (std::thread* t : {&poster, &reducer, &aborter, &reader}) t->join();
    absl::Status unfinished;
    std::thread waiter([&] {
      // Not done after the wait is what fails here: a call may end with DeadlineExceeded itself
      // (UCX's endpoint timeout, where an aborted peer's process has already gone).
      for (const Tracked& t : pending.Take()) {
        if (absl::Status s = t.operation.Wait(absl::Seconds(60)); !t.operation.Test()) unfinished.Update(s);
      }
    });
    waiter.join();
    if (!unfinished.ok()) return absl::InternalError(absl::StrCat("a call did not end after Abort: ", unfinished.ToString()));
    std::vector<uint8_t> never(4 << 20);
    if (c.Recv(never.data(), never.size(), DataType::kUint8, next, nullptr).Wait(absl::Seconds(10)).ok()) {
      return absl::InternalError("a receive posted after Abort succeeded");
    }
    comm->reset();
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace ucclzip::testing
