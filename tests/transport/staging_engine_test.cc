// The staging engines' copy wake-ups (CommunicatorOptions::staging_copy_wakeups): an engine
// given an eventfd signals it exactly once per copy, and only once the copy is done, which is
// what lets the progress thread sleep while copies run. The CUDA engine's test skips without
// a GPU.
#include "transport/staging_engine.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/gpu_test.h"
#include "transport/staging_path.h"
#include "transport/staging_pool.h"

namespace ucclzip::transport {
namespace {

class EventFd {
 public:
  EventFd() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~EventFd() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }
  // The signals since the last call (0 if none), and resets the count.
  uint64_t Take() {
    uint64_t count = 0;
    return read(fd_, &count, sizeof(count)) == sizeof(count) ? count : 0;
  }
  // Waits up to `timeout_ms` for `expected` signals in all, and returns how many came.
  uint64_t TakeUpTo(uint64_t expected, int timeout_ms) {
    uint64_t total = 0;
    for (int waited = 0; total < expected && waited < timeout_ms; ++waited) {
      pollfd entry{fd_, POLLIN, 0};
      if (poll(&entry, 1, 1) > 0) total += Take();
    }
    return total;
  }

 private:
  int fd_;
};

// Bytes that are never all zeros and differ per position and seed.
std::vector<uint8_t> Pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>((i * 131 + seed) | 1);
  return data;
}

TEST(HostStagingEngine, SignalsOncePerCopyWhenItIsDone) {
  EventFd wake;
  ASSERT_GE(wake.fd(), 0);
  std::unique_ptr<StagingEngine> engine = MakeHostStagingEngine(wake.fd());
  const size_t block = size_t{1} << 20;
  absl::StatusOr<void*> staging = engine->Allocate(block);
  ASSERT_TRUE(staging.ok()) << staging.status();
  std::vector<uint8_t> back(block);
  for (size_t bytes : {size_t{1}, size_t{4097}, block}) {
    const std::vector<uint8_t> source = Pattern(bytes, static_cast<uint8_t>(bytes));
    absl::StatusOr<uint32_t> in = engine->Start(*staging, source.data(), bytes, CopyDirection::kToStaging);
    ASSERT_TRUE(in.ok()) << in.status();
    EXPECT_EQ(wake.Take(), 1u) << bytes << " bytes to staging";
    EXPECT_EQ(engine->Poll(*in).value_or(false), true);
    absl::StatusOr<uint32_t> out = engine->Start(back.data(), *staging, bytes, CopyDirection::kFromStaging);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(wake.Take(), 1u) << bytes << " bytes from staging";
    EXPECT_EQ(engine->Poll(*out).value_or(false), true);
    EXPECT_EQ(std::memcmp(back.data(), source.data(), bytes), 0) << bytes << " bytes";
  }
  engine->Free(*staging);
  EXPECT_EQ(wake.Take(), 0u) << "signals without a copy";
}

// Copies in both directions on the engine's two streams; each copy's signal comes after its
// event (a Poll after the signal is true), one per copy, and none after the engine is gone.
TEST(CudaStagingEngine, SignalsOncePerCopyAfterItsEvent) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  UCCLZIP_CUDA_OK(cudaSetDevice(0));
  EventFd wake;
  ASSERT_GE(wake.fd(), 0);
  constexpr int kCopiesPerDirection = 4;
  absl::StatusOr<std::unique_ptr<StagingEngine>> engine = MakeCudaStagingEngine(0, 2 * kCopiesPerDirection, wake.fd());
  ASSERT_TRUE(engine.ok()) << engine.status();
  const size_t block = size_t{16} << 20;  // long enough for a copy to be still running when Start returns
  absl::StatusOr<void*> staging = (*engine)->Allocate(2 * kCopiesPerDirection * block);
  ASSERT_TRUE(staging.ok()) << staging.status();
  auto* pinned = static_cast<uint8_t*>(*staging);
  void* device = nullptr;
  UCCLZIP_CUDA_OK(cudaMalloc(&device, 2 * kCopiesPerDirection * block));
  auto* device_bytes = static_cast<uint8_t*>(device);
  const std::vector<uint8_t> source = Pattern(block, 7);
  UCCLZIP_CUDA_OK(cudaMemcpy(device_bytes, source.data(), block, cudaMemcpyHostToDevice));

  // One copy: once the fd is signalled, its event is complete.
  absl::StatusOr<uint32_t> first = (*engine)->Start(pinned, device_bytes, block, CopyDirection::kToStaging);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(wake.TakeUpTo(1, 10'000), 1u) << "no signal within 10 s";
  EXPECT_EQ((*engine)->Poll(*first).value_or(false), true) << "signalled before its event completed";
  EXPECT_EQ(std::memcmp(pinned, source.data(), block), 0);

  // Copies in flight in both directions: staging to device (H2D) and device to staging (D2H).
  std::vector<uint32_t> tickets;
  for (int i = 0; i < kCopiesPerDirection; ++i) {
    uint8_t* on_device = device_bytes + (1 + i) * block;
    absl::StatusOr<uint32_t> out = (*engine)->Start(on_device, pinned, block, CopyDirection::kFromStaging);
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<uint32_t> in =
        (*engine)->Start(pinned + (1 + i) * block, device_bytes, block, CopyDirection::kToStaging);
    ASSERT_TRUE(in.ok()) << in.status();
    tickets.push_back(*out);
    tickets.push_back(*in);
  }
  EXPECT_EQ(wake.TakeUpTo(tickets.size(), 10'000), tickets.size());
  for (uint32_t ticket : tickets) EXPECT_EQ((*engine)->Poll(ticket).value_or(false), true) << "ticket " << ticket;
  std::vector<uint8_t> back(block);
  for (int i = 0; i < kCopiesPerDirection; ++i) {
    UCCLZIP_CUDA_OK(cudaMemcpy(back.data(), device_bytes + (1 + i) * block, block, cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(back.data(), source.data(), block), 0) << "copy " << i << " to the device";
    EXPECT_EQ(std::memcmp(pinned + (1 + i) * block, source.data(), block), 0) << "copy " << i << " to staging";
  }
  (*engine)->Free(*staging);
  engine->reset();
  cudaFree(device);
  EXPECT_EQ(wake.Take(), 0u) << "more signals than copies";
}

// Copies that finish only when the engine waits for them (WaitForCopies, or its destructor), as
// a CUDA copy's stream finishes in CudaStagingEngine's; it records whether its staging
// memory was freed with a copy into or out of it still running.
class LateCopyEngine final : public StagingEngine {
 public:
  explicit LateCopyEngine(std::vector<std::string>* log) : log_(log) {}
  ~LateCopyEngine() override { FinishCopies(); }
  absl::StatusOr<void*> Allocate(size_t bytes) override { return memory_->Allocate(bytes); }
  void Free(void* memory) override {
    log_->push_back(in_flight_ > 0 ? "freed with a copy in flight" : "freed");
    memory_->Free(memory);
  }
  absl::StatusOr<uint32_t> Start(void*, const void*, size_t, CopyDirection) override {
    ++in_flight_;
    return 0;
  }
  absl::StatusOr<bool> Poll(uint32_t) override { return in_flight_ == 0; }
  void WaitForCopies() override { FinishCopies(); }

 private:
  void FinishCopies() {
    if (in_flight_ > 0) log_->push_back("copies finished");
    in_flight_ = 0;
  }
  std::vector<std::string>* log_;
  const std::unique_ptr<StagingEngine> memory_ = MakeHostStagingEngine(-1);
  int in_flight_ = 0;
};

// A transport destroyed after its drain ran out of time may still have a staging copy running
// (a GPU that four processes time-slice, a wedged copy): the pinned memory it reads or writes
// must outlive it. The path's pools freed their memory first, and the engine, declared before
// them so that they could free through it, finished its copies only afterwards.
TEST(StagingPath, FreesItsMemoryOnlyAfterTheCopiesInFlight) {
  std::vector<std::string> log;
  absl::StatusOr<std::unique_ptr<StagingPath>> path =
      StagingPath::Create(std::make_unique<LateCopyEngine>(&log), 4096, 4 * 4096, /*ranks=*/2, /*device=*/-1);
  ASSERT_TRUE(path.ok()) << path.status();
  std::vector<uint8_t> user(4096);
  uint8_t* staging = (*path)->send_pool().Acquire(/*peer=*/1);
  ASSERT_NE(staging, nullptr);
  ASSERT_TRUE((*path)->engine().Start(staging, user.data(), user.size(), CopyDirection::kToStaging).ok());
  path->reset();
  EXPECT_EQ(log, (std::vector<std::string>{"copies finished", "freed", "freed"}));
}

// Sends to peers that depend on each other share the send pool (staging_pool.h): the first peer
// to send may not take the blocks kept for the others, whichever order their sends come in,
// and a peer gets them back as soon as it holds none again.
TEST(StagingPool, KeepsABlockForEachOtherPeerHoldingNone) {
  const std::unique_ptr<StagingEngine> memory = MakeHostStagingEngine(-1);
  // World of 4 (rank 0's pool): 2 blocks of its own plus 2 reserved for the other two peers.
  absl::StatusOr<std::unique_ptr<StagingPool>> pool = StagingPool::Create(*memory, 4096, 4, /*ranks=*/4, /*reserved=*/2);
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<uint8_t*> to_peer1;
  for (uint8_t* block; (block = (*pool)->Acquire(1)) != nullptr;) to_peer1.push_back(block);
  EXPECT_EQ(to_peer1.size(), 2u) << "peer 1 took blocks kept for peers 2 and 3";
  uint8_t* to_peer2 = (*pool)->Acquire(2);
  ASSERT_NE(to_peer2, nullptr) << "peer 2, holding none, found no block";
  EXPECT_EQ((*pool)->Acquire(2), nullptr) << "peer 2 took the block kept for peer 3";
  uint8_t* to_peer3 = (*pool)->Acquire(3);
  ASSERT_NE(to_peer3, nullptr) << "peer 3, holding none, found no block";
  EXPECT_EQ((*pool)->Acquire(1), nullptr);
  // Peer 3 done: one block free, and peer 3 holds none, so it stays kept for peer 3.
  (*pool)->Release(to_peer3, 3);
  EXPECT_EQ((*pool)->Acquire(1), nullptr) << "peer 1 took the block kept for peer 3, which holds none again";
  // Peer 2 done too: two free, two peers holding none, and peer 1 still gets neither.
  (*pool)->Release(to_peer2, 2);
  EXPECT_EQ((*pool)->Acquire(1), nullptr);
  for (uint8_t* block : to_peer1) (*pool)->Release(block, 1);
  EXPECT_TRUE((*pool)->all_free());
  // Alone again, peer 1 has its own two and no more.
  EXPECT_NE((*pool)->Acquire(1), nullptr);
  EXPECT_NE((*pool)->Acquire(1), nullptr);
  EXPECT_EQ((*pool)->Acquire(1), nullptr);
}

// With more peers than the pool reserves for, a peer holding blocks leaves `reserved` free.
TEST(StagingPool, ReservesForAtMostItsReservedPeers) {
  const std::unique_ptr<StagingEngine> memory = MakeHostStagingEngine(-1);
  absl::StatusOr<std::unique_ptr<StagingPool>> pool = StagingPool::Create(*memory, 4096, 5, /*ranks=*/9, /*reserved=*/2);
  ASSERT_TRUE(pool.ok()) << pool.status();
  int taken = 0;
  while ((*pool)->Acquire(1) != nullptr) ++taken;
  EXPECT_EQ(taken, 3);
}

}  // namespace
}  // namespace ucclzip::transport
