// Collectives on device buffers (the GPU codec and reduction kernels), 2 to 4 processes
// sharing the machine's GPU: every operation and type, odd counts and several blocks per chunk,
// in place, on a stream, compressed and not; and grouped sends to peers that depend on each
// other, which needs each peer's own device slots. Skipped without a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "collective_test_util.h"
#include "gpu_test.h"
#include "pipeline/stream_flags.h"
#include "pipeline_test_util.h"

namespace ucclzip::testing {
namespace {



transport::TransportOptions DeviceOptions(const std::string& tls) {
  transport::TransportOptions options = PipelineOptions(tls);
  options.pipeline_block_bytes = 1 << 20;
  options.block_bytes = 256 << 10;
  options.staging_pool_bytes = 8 << 20;
  return options;
}

// DeviceOptions over tcp with smaller pipeline and transport blocks: many blocks per chunk.
transport::TransportOptions SmallBlockOptions(size_t pipeline_block_bytes, size_t block_bytes) {
  transport::TransportOptions options = DeviceOptions("tcp");
  options.pipeline_block_bytes = pipeline_block_bytes;
  options.block_bytes = block_bytes;
  return options;
}

// Every case in turn on device buffers, one communicator per rank, every rank on device 0
// (odd cases on a stream of their own, even ones on the default stream).
void RunDeviceCases(int world, const transport::TransportOptions& options, const std::vector<CollectiveCase>& cases,
                    absl::Duration kill_after = absl::Seconds(280)) {
  ExpectRanksSucceeded(RunRanks({.world_size = world, .kill_after = kill_after}, [&](const RankContext& context) -> absl::Status {
    if (cudaSetDevice(0) != cudaSuccess) return absl::InternalError("cudaSetDevice");
    cudaStream_t stream;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return absl::InternalError("stream");
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    for (size_t i = 0; i < cases.size(); ++i) {
      if (absl::Status s = RunAndCheck(**comm, cases[i], i, true, i % 2 ? stream : nullptr); !s.ok()) return s;
    }
    return absl::OkStatus();
  }));
}

class CollectivesDevice : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(CollectivesDevice, EveryOperationAndTypeMatchesTheReference) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  const auto [world, tls] = GetParam();
  std::vector<CollectiveCase> cases;
  for (Collective kind : kEveryCollective) {
    for (DataType dtype : {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32, DataType::kFloat8E4M3,
                           DataType::kFloat8E5M2, DataType::kInt32, DataType::kUint8, DataType::kInt64, DataType::kFloat64}) {
      for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
        const ReduceOp op = dtype == DataType::kFloat8E4M3 ? ReduceOp::kMax : ReduceOp::kAvg;
        cases.push_back({.kind = kind, .dtype = dtype, .op = op, .count = 600'001, .root = world - 1, .mode = mode,
                         .dist = {DistKind::kGaussian, 0.02}});
      }
    }
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{4'000'037}}) {
      cases.push_back({.kind = kind, .count = count, .root = 1, .in_place = true});
    }
    cases.push_back({.kind = kind, .dtype = DataType::kFloat16, .op = ReduceOp::kMin, .count = 77'777, .root = 0,
                     .dist = {DistKind::kSpecialValues, 1}});
  }
  RunDeviceCases(world, DeviceOptions(tls), cases);
}

INSTANTIATE_TEST_SUITE_P(, CollectivesDevice,
                         ::testing::Values(std::make_tuple(2, std::string("tcp")), std::make_tuple(3, std::string("posix,sysv")),
                                           std::make_tuple(4, std::string("tcp"))),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param), "ranks_", std::get<1>(info.param) == "tcp" ? "tcp" : "shm");
                         });

// Small enough for compute-sanitizer (scripts/gpu-run SANITIZE=CollectivesDeviceSmall.*): many
// 64 KB blocks per chunk, every operation, compressed and not, a reduction in each width.
TEST(CollectivesDeviceSmall, ManyBlocksEveryOperation) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  std::vector<CollectiveCase> cases;
  for (Collective kind : kEveryCollective) {
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      cases.push_back({.kind = kind, .dtype = DataType::kBFloat16, .count = 40'003, .root = 2, .mode = mode});
      cases.push_back({.kind = kind, .dtype = DataType::kFloat32, .op = ReduceOp::kAvg, .count = 10'001, .root = 1, .mode = mode});
    }
    cases.push_back({.kind = kind, .dtype = DataType::kInt64, .op = ReduceOp::kMax, .count = 3'001, .in_place = true,
                     .dist = {DistKind::kRandomBytes, 1}});
  }
  RunDeviceCases(3, SmallBlockOptions(64 << 10, 32 << 10), cases);
}

// Where UCX stages device memory, a relaying rank forwards every block, frame or plain, from the
// pinned host frame it landed in (operation_task_recv.cc), unless forward_from_host is off;
// where UCX takes device memory, blocks go to UCX directly and none is forwarded from the host.
// 3 ranks: the chain 0 -> 1 -> 2 has one relay (rank 1), and every rank of the allgather ring
// forwards the chunk it received first. The results are checked as everywhere else.
class CollectivesDeviceRelays : public ::testing::TestWithParam<bool> {};

TEST_P(CollectivesDeviceRelays, ForwardFromTheHostWhereDeviceMemoryIsStaged) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  transport::TransportOptions options = SmallBlockOptions(64 << 10, 32 << 10);
  options.forward_from_host = GetParam();
  // The chain and the ring: the binomial tree would send these 200 KB from the root to both.
  options.tree_broadcast_bytes = 0;
  const uint64_t block_elements = (64 << 10) / ElementSize(DataType::kBFloat16);
  ExpectRanksSucceeded(RunRanks({.world_size = 3}, [&](const RankContext& context) -> absl::Status {
    if (cudaSetDevice(0) != cudaSuccess) return absl::InternalError("cudaSetDevice");
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    uint64_t seed = 0;
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      const CollectiveCase broadcast{.kind = Collective::kBroadcast, .count = 100'000, .root = 0, .mode = mode};
      const CollectiveCase allgather{.kind = Collective::kAllGather, .count = 40'003, .mode = mode};
      for (const CollectiveCase& c : {broadcast, allgather}) {
        const uint64_t before = (*comm)->stats().blocks_forwarded_from_host;
        if (absl::Status s = RunAndCheck(**comm, c, ++seed, true); !s.ok()) return s;
        const uint64_t forwarded = (*comm)->stats().blocks_forwarded_from_host - before;
        const bool relays = c.kind == Collective::kAllGather || context.rank == 1;
        const uint64_t expected = (*comm)->device_memory_direct() || !options.forward_from_host || !relays
                                      ? 0
                                      : (c.count + block_elements - 1) / block_elements;
        if (forwarded != expected) {
          return absl::InternalError(absl::StrCat(c.Name(), ": rank ", context.rank, " forwarded ", forwarded,
                                                  " blocks from the host, expected ", expected, " (device memory ",
                                                  (*comm)->device_memory_direct() ? "direct" : "staged", ")"));
        }
      }
    }
    return absl::OkStatus();
  }));
}

INSTANTIATE_TEST_SUITE_P(, CollectivesDeviceRelays, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "from_host" : "through_the_device"; });

// One device slot per peer and direction, the fewest there can be: receive pools then hold
// 1 + the link's group (pipeline::LinkGroupBlocks) slots per peer, one more than a ring keeps
// between a block's arrival and its forward, so every ring still moves (docs/COLLECTIVES.md, "Link order").
// 4 ranks, 16 blocks per chunk, every block a frame or a reduced block holding its slot.
TEST(CollectivesDeviceSmall, OneSlotPerPeerKeepsEveryRingMoving) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  std::vector<CollectiveCase> cases;
  for (Collective kind : kEveryCollective) {
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      cases.push_back({.kind = kind, .dtype = DataType::kBFloat16, .count = 131'101, .root = 3, .mode = mode});
    }
  }
  transport::TransportOptions options = SmallBlockOptions(16 << 10, 16 << 10);
  options.device_slots = 1;
  RunDeviceCases(4, options, cases);
}

// The smallest run that still crosses every path (frames, plain blocks, forwarding, reduction,
// several blocks a chunk), for compute-sanitizer's memcheck, under which every kernel launch
// costs a great deal: scripts/gpu-run SANITIZE=CollectivesDeviceSanitized.*.
TEST(CollectivesDeviceSanitized, TwoRanksEveryOperation) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  std::vector<CollectiveCase> cases;
  for (Collective kind : kEveryCollective) {
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      cases.push_back({.kind = kind, .dtype = DataType::kBFloat16, .count = 6'001, .root = 1, .mode = mode});
    }
    cases.push_back({.kind = kind, .dtype = DataType::kFloat32, .op = ReduceOp::kAvg, .count = 3'001, .in_place = true});
  }
  transport::TransportOptions options = SmallBlockOptions(8 << 10, 8 << 10);
  // memcheck drains the device after every launch, which a held stream would never let
  // finish (CommunicatorOptions::hold_caller_stream); RunAndCheck waits on each operation
  // before it touches the stream, as an unheld stream requires.
  options.hold_caller_stream = false;
  // Killed early enough that the stacks of a hang still reach the log under the sanitizer.
  RunDeviceCases(2, options, cases, absl::Seconds(200));
}

// The forwarding path of a relaying rank (blocks that land in pinned host frames, leave from
// there and are copied to the device) under memcheck: 3 ranks, a chain and a ring, frames and
// plain blocks, several blocks a chunk.
TEST(CollectivesDeviceSanitized, ThreeRanksForwardingChainAndRing) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  std::vector<CollectiveCase> cases;
  for (Collective kind : {Collective::kBroadcast, Collective::kAllGather, Collective::kAllReduce}) {
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      cases.push_back({.kind = kind, .dtype = DataType::kBFloat16, .count = 9'001, .root = 2, .mode = mode});
    }
  }
  transport::TransportOptions options = SmallBlockOptions(8 << 10, 8 << 10);
  options.hold_caller_stream = false;  // as in TwoRanksEveryOperation
  RunDeviceCases(3, options, cases, absl::Seconds(200));
}

// Collectives in one group on device buffers, each peer's slots shared by all of them, with one
// slot per peer: without the link's call order across them (docs/COLLECTIVES.md, "Link
// order"), a later ring could take the receive slots an earlier one needs, and every rank
// wait (LinkOrderSimulation.GroupsOfCollectivesFinishWithTheEnginesSlots found such orders).
TEST(CollectivesDeviceGroups, RingsInOneGroupShareEachPeersSlots) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  transport::TransportOptions options = SmallBlockOptions(16 << 10, 16 << 10);
  options.device_slots = 1;
  ExpectRanksSucceeded(RunRanks({.world_size = 4}, [&](const RankContext& context) -> absl::Status {
    if (cudaSetDevice(0) != cudaSuccess) return absl::InternalError("cudaSetDevice");
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    const std::vector<CollectiveCase> group = {
        {.kind = Collective::kAllReduce, .count = 200'003},
        {.kind = Collective::kAllGather, .count = 60'001},
        {.kind = Collective::kReduceScatter, .dtype = DataType::kFloat32, .op = ReduceOp::kMax, .count = 30'001},
        {.kind = Collective::kBroadcast, .count = 120'001, .root = 1},
        {.kind = Collective::kAllGather, .count = 60'001, .in_place = true},
    };
    return RunAndCheckGroup(**comm, group, 50, true);
  }));
}

TEST(CollectivesDeviceGroups, SendsToPeersThatDependOnEachOtherDoNotDeadlock) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  ExpectRanksSucceeded(RunRanks({.world_size = 3}, [&](const RankContext& context) -> absl::Status {
    if (cudaSetDevice(0) != cudaSuccess) return absl::InternalError("cudaSetDevice");
    auto comm = CreateCommunicator(context, DeviceOptions("tcp"));
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const uint64_t count = 6'000'000;  // 12 blocks of 1 MB each: more than any peer's slots
    const std::vector<uint8_t> a = GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, 1);
    const std::vector<uint8_t> b = GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, 2);
    void *da, *db, *dgot, *drelay;
    for (void** p : {&da, &db, &dgot, &drelay}) {
      if (cudaMalloc(p, a.size()) != cudaSuccess) return absl::InternalError("cudaMalloc");
    }
    cudaMemcpy(da, a.data(), a.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size(), cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();  // pageable uploads may return before their DMA lands
    absl::Status status;
    if (c.rank() == 0) {
      c.GroupStart();
      c.Send(da, count, DataType::kBFloat16, 1, nullptr);
      c.Send(db, count, DataType::kBFloat16, 2, nullptr);
      status = WaitOk(c.GroupEnd(), "rank 0's group");
    } else if (c.rank() == 2) {
      status = WaitOk(c.Recv(dgot, count, DataType::kBFloat16, 0, nullptr), "b");
      if (status.ok()) status = WaitOk(c.Send(dgot, count, DataType::kBFloat16, 1, nullptr), "relay of b");
    } else {
      status = WaitOk(c.Recv(drelay, count, DataType::kBFloat16, 2, nullptr), "relay");
      if (status.ok()) status = WaitOk(c.Recv(dgot, count, DataType::kBFloat16, 0, nullptr), "a");
      std::vector<uint8_t> got(a.size()), relay(a.size());
      cudaMemcpy(got.data(), dgot, a.size(), cudaMemcpyDeviceToHost);
      cudaMemcpy(relay.data(), drelay, a.size(), cudaMemcpyDeviceToHost);
      if (status.ok()) status = ExpectSameBytes(relay.data(), b.data(), b.size(), "relayed b");
      if (status.ok()) status = ExpectSameBytes(got.data(), a.data(), a.size(), "a");
    }
    for (void* p : {da, db, dgot, drelay}) cudaFree(p);
    return status;
  }));
}

// --- Destruction with a caller's stream held -----------------------------------------------------

// What a rank's StuckCopyEngine is told, and what it saw (one rank per process).
struct HeldTeardown {
  std::atomic<bool> stuck{false};  // copies started from now on never finish
  std::atomic<cudaStream_t> held{nullptr};
  std::atomic<bool> freed_while_held{false};
};
HeldTeardown& ThisRanksTeardown() {
  static HeldTeardown teardown;
  return teardown;
}

// Stages host memory by memcpy until HeldTeardown::stuck, after which a copy never finishes,
// as a copy of a wedged GPU: its transport op outlives the drain, and the pipeline task sending
// it outlives the engine's grace with its caller's stream held. Free, which the transport's
// destruction calls, records whether that stream was still held then (let go of, it runs on
// within moments).
class StuckCopyEngine final : public transport::StagingEngine {
 public:
  absl::StatusOr<void*> Allocate(size_t bytes) override { return memory_->Allocate(bytes); }
  void Free(void* memory) override {
    HeldTeardown& teardown = ThisRanksTeardown();
    if (cudaStream_t held = teardown.held.load(); held != nullptr) {
      const absl::Time give_up = absl::Now() + absl::Seconds(2);
      while (cudaStreamQuery(held) == cudaErrorNotReady && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
      if (cudaStreamQuery(held) == cudaErrorNotReady) teardown.freed_while_held.store(true);
    }
    memory_->Free(memory);
  }
  absl::StatusOr<uint32_t> Start(void* destination, const void* source, size_t bytes, transport::CopyDirection) override {
    absl::MutexLock lock(&mutex_);
    if (ThisRanksTeardown().stuck.load()) {
      stuck_.insert(next_ticket_);
    } else {
      std::memcpy(destination, source, bytes);
    }
    return next_ticket_++;
  }
  absl::StatusOr<bool> Poll(uint32_t ticket) override {
    absl::MutexLock lock(&mutex_);
    return !stuck_.contains(ticket);
  }

 private:
  const std::unique_ptr<transport::StagingEngine> memory_ = transport::MakeHostStagingEngine(-1);  // allocates only
  absl::Mutex mutex_;
  uint32_t next_ticket_ ABSL_GUARDED_BY(mutex_) = 0;
  std::set<uint32_t> stuck_ ABSL_GUARDED_BY(mutex_);
};

// Rank 0 sends on a stream the pipeline holds, and the send never finishes (its staging copy is
// stuck); both communicators are then destroyed. The task outlives the transports' drain and the
// engine's grace, and its stream must be let go of before the transports are destroyed: their
// pinned staging memory's free may wait for the device to idle, which a held stream never lets
// it do (the destructor hung), or, where it does not wait, the stream stayed held past it. The
// send then fails, and the stream runs on.
TEST(CollectivesDeviceLifetime, AHeldStreamIsLetGoOfBeforeTheTransportsAreDestroyed) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  transport::TransportOptions options = DeviceOptions("tcp");
  options.ucx_transports = "tcp";  // staged device memory: the stream is held, not waited for in Send
  options.stage_host_memory = true;
  options.host_staging_engine = [](int) { return std::make_unique<StuckCopyEngine>(); };
  options.op_timeout = absl::Seconds(3);
  options.shutdown_timeout = absl::Seconds(1);
  ExpectRanksSucceeded(RunRanks({.world_size = 2, .kill_after = absl::Seconds(60)}, [&](const RankContext& context) -> absl::Status {
    if (cudaSetDevice(0) != cudaSuccess) return absl::InternalError("cudaSetDevice");
    cudaStream_t stream;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return absl::InternalError("stream");
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    if (context.rank == 1) return absl::OkStatus();
    std::vector<uint8_t> data(size_t{1} << 20, 7);
    HeldTeardown& teardown = ThisRanksTeardown();
    teardown.stuck.store(true);
    const Operation op = (*comm)->Send(data.data(), data.size(), DataType::kUint8, 1, stream);
    teardown.held.store(stream);
    // The hold is queued on the stream by Send (on a stream and staged: stream_order.h).
    if (cudaStreamQuery(stream) != cudaErrorNotReady) {
      return absl::InternalError("rank 0: the send's stream was not held, so the test shows nothing");
    }
    comm->reset();
    if (teardown.freed_while_held.load()) {
      return absl::InternalError("rank 0: the transports freed their staging memory with the caller's stream still held");
    }
    const absl::Status status = op.Wait(absl::Seconds(10));
    if (status.ok() || !op.Test()) return absl::InternalError(absl::StrCat("rank 0: the stuck send ended with ", status.ToString()));
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (cudaStreamQuery(stream) == cudaErrorNotReady && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
    if (cudaStreamQuery(stream) != cudaSuccess) return absl::InternalError("rank 0: the stream stays held after the destruction");
    cudaStreamDestroy(stream);
    return absl::OkStatus();
  }));
}

// Rank 0 sends on a stream that the test holds first, with a flag of its own: the send waits for
// the stream's earlier work, which does not end before the communicator is destroyed, so the
// communicator goes with the send failed and the stream not yet at the pipeline's hold. The
// test then lets the stream go: it reaches that hold and reads its flag, which must still be
// mapped memory (raised by the destruction), and runs on without a fault. Flags freed with the
// communicator would fault it where the free does not wait for the device; on an H100 the
// destruction waited for the stream (RESULTS.md, s33-6), and there the test shows that nothing
// hangs or faults.
TEST(CollectivesDeviceLifetime, AStreamReachesItsHoldAfterTheCommunicatorIsGone) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  transport::TransportOptions options = DeviceOptions("tcp");
  // Staged device memory, also where the tests run with a CUDA-enabled UCX: the stream is held.
  // On the direct path the send returns only once done, and with its input behind the test's
  // gate it never would (s44-1, on the CUDA-enabled UCX of the libucx-cu13 wheel).
  options.ucx_transports = "tcp";
  options.op_timeout = absl::Seconds(3);
  options.shutdown_timeout = absl::Seconds(1);
  ExpectRanksSucceeded(RunRanks({.world_size = 2, .kill_after = absl::Seconds(60)}, [&](const RankContext& context) -> absl::Status {
    if (cudaSetDevice(0) != cudaSuccess) return absl::InternalError("cudaSetDevice");
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    constexpr size_t kBytes = size_t{1} << 20;
    void* data = nullptr;
    if (cudaMalloc(&data, kBytes) != cudaSuccess) return absl::InternalError("cudaMalloc");
    // A first exchange sets up the communicator's device resources: set up behind the test's
    // hold, their kernel loads would wait for the device to idle, which it never would.
    const Operation first = context.rank == 0 ? (*comm)->Send(data, kBytes, DataType::kUint8, 1, nullptr)
                                              : (*comm)->Recv(data, kBytes, DataType::kUint8, 0, nullptr);
    if (absl::Status s = first.Wait(absl::Seconds(30)); !s.ok()) return s;
    if (cudaDeviceSynchronize() != cudaSuccess) return absl::InternalError("cudaDeviceSynchronize");
    if (context.rank == 1) return absl::OkStatus();
    cudaStream_t stream;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return absl::InternalError("stream");
    absl::StatusOr<pipeline::StreamFlags*> flags = pipeline::StreamFlags::ForDevice(0);
    if (!flags.ok()) return flags.status();
    absl::StatusOr<pipeline::StreamFlags::Ticket> gate = (*flags)->EnqueueWait(stream);
    if (!gate.ok()) return gate.status();
    const Operation op = (*comm)->Send(data, kBytes, DataType::kUint8, 1, stream);
    // The gate opens once the communicator is gone, or after a while if its destruction waits for
    // the device to idle (a platform whose cudaFreeHost synchronises): the stream then passes
    // both holds before the free returns, and the test shows only that nothing hangs.
    std::atomic<bool> destroyed{false};
    std::thread opener([&] {
      const absl::Time give_up = absl::Now() + absl::Seconds(5);
      while (!destroyed.load() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
      (*flags)->Signal(*gate);
    });
    comm->reset();
    destroyed.store(true);
    opener.join();
    const absl::Status status = op.Wait(absl::Seconds(10));
    const cudaError_t after = cudaStreamSynchronize(stream);
    if (after != cudaSuccess) {
      return absl::InternalError(absl::StrCat("rank 0: the stream failed at its hold after the communicator was gone: ",
                                              cudaGetErrorName(after)));
    }
    if (status.ok()) return absl::InternalError("rank 0: a send whose input never became ready succeeded");
    cudaStreamDestroy(stream);
    cudaFree(data);
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace ucclzip::testing
