// Collectives between real processes over UCX with host buffers (CPU codec), checked bit for
// bit against a reference computed in the documented order: every operation x type x
// reduction at an odd world size with uneven chunks, compressed and not; counts of 0, 1, below
// the world size and of several pipeline blocks; in place; 1 to 8, 17 and 32 ranks; groups
// that mix collectives with point-to-point calls, and reduces to every root; shared memory as
// well as tcp.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "collective_test_util.h"
#include "pipeline_test_util.h"

namespace ucclzip::testing {
namespace {



const DataType kReducibleTypes[] = {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32, DataType::kFloat8E4M3,
                                    DataType::kFloat8E5M2, DataType::kInt8,   DataType::kUint8,   DataType::kInt32,
                                    DataType::kUint32,     DataType::kInt64,  DataType::kUint64,  DataType::kFloat64};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg};

// Every case in turn on one communicator per rank; the first failure names its case. Every
// link's transport sequences start at `first_sequence`.
void RunCases(int world, const std::vector<CollectiveCase>& cases, const transport::TransportOptions& options,
              uint32_t first_sequence = 0) {
  ExpectRanksSucceeded(RunRanks({.world_size = world, .kill_after = absl::Seconds(300)},
                                [&](const RankContext& context) -> absl::Status {
                                  auto comm = CreateCommunicator(context, options);
                                  if (!comm.ok()) return comm.status();
                                  internal::CommunicatorAccess::StartSequencesAt(**comm, first_sequence);
                                  for (size_t i = 0; i < cases.size(); ++i) {
                                    if (absl::Status s = RunAndCheck(**comm, cases[i], i); !s.ok()) return s;
                                  }
                                  return absl::OkStatus();
                                }));
}

// The matrix once with rings and chains alone (recursive_doubling_bytes and
// tree_broadcast_bytes 0), and its allreduces and broadcasts again by the algorithms for small
// messages (the default for these 2 KB vectors): recursive doubling, which at 3 ranks also folds
// and unfolds, and the binomial tree.
class CollectivesMatrix : public ::testing::TestWithParam<bool> {};

TEST_P(CollectivesMatrix, EveryOperationTypeAndReductionAtAnOddWorldSize) {
  const bool small_algorithms = GetParam();
  transport::TransportOptions options = PipelineOptions();
  if (!small_algorithms) options.recursive_doubling_bytes = options.tree_broadcast_bytes = 0;
  std::vector<CollectiveCase> cases;
  for (Collective kind : kEveryCollective) {
    if (small_algorithms && kind != Collective::kAllReduce && kind != Collective::kBroadcast) continue;
    for (DataType dtype : kReducibleTypes) {
      for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
        const Distribution dist = IsCompressibleType(dtype) ? Distribution{DistKind::kGaussian, 0.5}
                                                            : Distribution{DistKind::kRandomBytes, 1};
        if (!Reduces(kind)) {
          cases.push_back({.kind = kind, .dtype = dtype, .count = 1001, .root = 2, .mode = mode, .dist = dist});
          continue;
        }
        for (ReduceOp op : kOps) {
          cases.push_back({.kind = kind, .dtype = dtype, .op = op, .count = 1001, .root = 1, .mode = mode, .dist = dist});
        }
      }
    }
  }
  RunCases(3, cases, options);
}

INSTANTIATE_TEST_SUITE_P(, CollectivesMatrix, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "SmallMessageAlgorithms" : "RingsAndChains"; });

// An allreduce of up to recursive_doubling_bytes (here 8 KiB) runs by recursive doubling, one
// element more by the ring, each giving its own order's bits, compressed and not, in place and
// not; 4 ranks (no fold) and 6 (two folded). The two orders give different sums on these
// inputs, so each result shows which algorithm ran.
class AllReduceAlgorithms : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceAlgorithms, EachSizeRunsItsAlgorithmInItsOrder) {
  const int world = GetParam();
  constexpr uint64_t kDoublingBytes = 8 << 10, kLargestDoubling = kDoublingBytes / 2;  // bf16 elements
  std::vector<CollectiveCase> cases;
  for (uint64_t count : {kLargestDoubling, kLargestDoubling + 1}) {
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      for (bool in_place : {false, true}) {
        cases.push_back({.kind = Collective::kAllReduce, .count = count, .in_place = in_place, .mode = mode,
                         .dist = {DistKind::kGaussian, 1}});
      }
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) {  // RunCases gives case i the seed i
    const CollectiveCase& c = cases[i];
    std::vector<std::vector<uint8_t>> inputs;
    for (int r = 0; r < world; ++r) inputs.push_back(CaseInput(c, world, r, i));
    ASSERT_NE(ReferenceOutput(c.Shape(world, 0), inputs, 0), ReferenceOutput(c.Shape(world, uint64_t{1} << 40), inputs, 0))
        << c.Name() << ": the ring's order and recursive doubling's give the same bits";
  }
  transport::TransportOptions options = PipelineOptions();
  options.recursive_doubling_bytes = kDoublingBytes;
  RunCases(world, cases, options);
}

INSTANTIATE_TEST_SUITE_P(, AllReduceAlgorithms, ::testing::Values(4, 6),
                         [](const auto& info) { return absl::StrCat(info.param, "ranks"); });

TEST(Collectives, SpecialValuesHeavyTailsAndRawBytes) {
  std::vector<CollectiveCase> cases;
  for (Collective kind : kEveryCollective) {
    for (DataType dtype : {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32, DataType::kFloat8E4M3,
                           DataType::kFloat8E5M2}) {
      for (Distribution dist : {Distribution{DistKind::kSpecialValues, 1}, Distribution{DistKind::kStudentT3, 0.01}}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
          cases.push_back({.kind = kind, .dtype = dtype, .op = op, .count = 4099, .root = 1, .dist = dist});
          if (!Reduces(kind)) break;
        }
      }
    }
  }
  cases.push_back({.kind = Collective::kAllGather, .dtype = DataType::kRaw, .count = 333, .dist = {DistKind::kRandomBytes, 1}});
  cases.push_back({.kind = Collective::kBroadcast, .dtype = DataType::kRaw, .count = 333, .root = 3, .dist = {DistKind::kRandomBytes, 1}});
  RunCases(4, cases, PipelineOptions());
}

// Counts of 0, 1, below the world size, not divisible by it, and of several pipeline blocks
// per chunk (256 KB blocks), in place and not, at world sizes 1, 2, 5 and 8.
std::vector<CollectiveCase> SizeCases(int world) {
  std::vector<CollectiveCase> cases;
  for (Collective kind : kEveryCollective) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t(world - 1), uint64_t{7919}, uint64_t{400'003}}) {
      for (bool in_place : {false, true}) {
        CollectiveCase c{.kind = kind, .dtype = DataType::kBFloat16, .op = ReduceOp::kSum, .count = count,
                         .root = world - 1, .in_place = in_place, .mode = CompressionMode::kAuto};
        if (count == 400'003 && kind != Collective::kAllReduce && world > 4) c.count = 150'001;  // bounded run time
        cases.push_back(c);
      }
    }
  }
  cases.push_back({.kind = Collective::kAllReduce, .dtype = DataType::kFloat32, .op = ReduceOp::kAvg, .count = 65'537});
  cases.push_back({.kind = Collective::kReduceScatter, .dtype = DataType::kInt64, .op = ReduceOp::kProd, .count = 999,
                   .dist = {DistKind::kRandomBytes, 1}});
  return cases;
}

class CollectivesWorld : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesWorld, CountsFromZeroToSeveralBlocksInPlaceAndNot) { RunCases(GetParam(), SizeCases(GetParam()), PipelineOptions()); }

INSTANTIATE_TEST_SUITE_P(, CollectivesWorld, ::testing::Values(1, 2, 5, 8),
                         [](const auto& info) { return absl::StrCat(info.param, "ranks"); });

// Worlds beyond one node's GPUs: 17 ranks, where recursive doubling folds one pair around 16,
// the tree is five levels deep and a ring takes 16 hops, and 32 (four nodes of eight). Every
// operation, compressed, in place and not, once by the algorithms for small messages and once
// by rings and chains alone.
class CollectivesLargeWorld : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesLargeWorld, EveryOperationBySmallAndLargeMessageAlgorithms) {
  const int world = GetParam();
  for (bool small_algorithms : {true, false}) {
    std::vector<CollectiveCase> cases;
    for (Collective kind : kEveryCollective) {
      for (bool in_place : {false, true}) {
        cases.push_back({.kind = kind, .op = ReduceOp::kAvg, .count = 333, .root = 11, .in_place = in_place});
      }
    }
    transport::TransportOptions options = PipelineOptions();
    if (!small_algorithms) options.recursive_doubling_bytes = options.tree_broadcast_bytes = 0;
    SCOPED_TRACE(small_algorithms ? "recursive doubling and the tree" : "rings and chains");
    RunCases(world, cases, options);
  }
}

INSTANTIATE_TEST_SUITE_P(, CollectivesLargeWorld, ::testing::Values(17, 32),
                         [](const auto& info) { return absl::StrCat(info.param, "ranks"); });

// A link's transport sequence is 20 bits wide (transport/message_tag.h): a server that runs for
// days wraps it every million blocks. Here every link starts three short of the wrap, so that
// the first call's blocks take sequences on both sides of it, and every later call's lie past
// it: every collective, compressed and not, in blocks of 16 KiB.
TEST(Collectives, LinkSequencesWrapAround) {
  transport::TransportOptions options = PipelineOptions();
  options.pipeline_block_bytes = options.min_pipeline_block_bytes = 16 << 10;
  std::vector<CollectiveCase> cases;
  for (Collective kind : kEveryCollective) {
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      cases.push_back({.kind = kind, .count = 3 * 20'001, .root = 2, .mode = mode});
    }
  }
  RunCases(3, cases, options, transport::kMaxSequence - 2);
}

TEST(Collectives, SharedMemoryAndSmallBlocksWithManyBlocksPerChunk) {
  transport::TransportOptions options = PipelineOptions("posix,sysv");
  options.pipeline_block_bytes = 16 << 10;  // 60 blocks per chunk: every link pipelines deeply
  options.block_bytes = 8 << 10;
  std::vector<CollectiveCase> cases;
  for (Collective kind : kEveryCollective) {
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      cases.push_back({.kind = kind, .dtype = DataType::kBFloat16, .count = 4 * 120'001, .root = 1, .mode = mode});
    }
  }
  RunCases(4, cases, options);
}

// Host receive blocks hold their buffers in places bounded as a device receive pool's slots are
// (engine.cc, ReceiveBlocksPerPeer): with one block on its way per peer, the fewest there can
// be, 1 + the link's group (pipeline::LinkGroupBlocks) per peer, one more than a ring keeps
// between a block's arrival and its forward, so every ring still moves; alone and in one group. 4 ranks, 16 KiB blocks: each
// chunk far more blocks than the places, every frame and reduced block holding one.
TEST(Collectives, OneBlockPerPeerKeepsEveryRingMovingOnHostMemory) {
  transport::TransportOptions options = PipelineOptions();
  options.pipeline_block_bytes = 16 << 10;
  options.device_slots = 1;
  std::vector<CollectiveCase> cases;
  for (Collective kind : kEveryCollective) {
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      cases.push_back({.kind = kind, .dtype = DataType::kBFloat16, .count = 4 * 32'003, .root = 3, .mode = mode});
    }
  }
  RunCases(4, cases, options);
  ExpectRanksSucceeded(RunRanks({.world_size = 4}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    const std::vector<CollectiveCase> group = {
        {.kind = Collective::kAllReduce, .count = 100'003},
        {.kind = Collective::kReduceScatter, .dtype = DataType::kFloat32, .op = ReduceOp::kMax, .count = 20'001},
        {.kind = Collective::kBroadcast, .count = 70'001, .root = 1},
        {.kind = Collective::kAllGather, .count = 30'001, .in_place = true},
    };
    return RunAndCheckGroup(**comm, group, 60);
  }));
}

// Blocks large enough that their CPU codec work and reductions run on the host codec thread
// (host_codec_jobs.h), every reducing operation among them, compressed and not.
TEST(Collectives, HostBlocksCodedOffThePipelineThread) {
  transport::TransportOptions options = PipelineOptions();
  options.pipeline_block_bytes = size_t{1} << 20;
  options.block_bytes = size_t{256} << 10;
  std::vector<CollectiveCase> cases;
  for (Collective kind : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kReduce, Collective::kBroadcast}) {
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      cases.push_back({.kind = kind, .dtype = DataType::kBFloat16, .count = 3 * 700'001, .root = 2, .mode = mode});
    }
  }
  cases.push_back({.kind = Collective::kAllReduce, .dtype = DataType::kFloat32, .op = ReduceOp::kMax, .count = 900'001,
                   .dist = {DistKind::kLaplace, 0.5}});
  RunCases(3, cases, options);
}

// An operation under four largest blocks is cut into four blocks of at least the smallest size
// (schedule.h), which need not line up with the ranks' chunks: here 192 KiB blocks over chunks of
// about 200 KB, so most chunks end in a short block. Every operation, compressed and not.
TEST(Collectives, OperationsUnderFourLargestBlocksAreCutIntoFour) {
  transport::TransportOptions options = PipelineOptions();
  options.pipeline_block_bytes = size_t{1} << 20;
  options.min_pipeline_block_bytes = size_t{64} << 10;
  std::vector<CollectiveCase> cases;
  for (Collective kind : kEveryCollective) {
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      cases.push_back({.kind = kind, .dtype = DataType::kBFloat16, .count = 3 * 100'003, .root = 1, .mode = mode});
    }
  }
  RunCases(3, cases, options);
}

// A chain of n ranks is cut into 2n blocks (schedule.h): 4 ranks cut 2 MB of bf16 into 8
// blocks of 256 KiB where one hop takes 4 of 512 KiB. The broadcast's root and the reduce's
// chain head (rank 1 for root 0) each encode the message once, so they count its frames; every
// rank's output is checked as everywhere else.
TEST(Collectives, ChainsAreCutIntoTwiceAsManyBlocksAsRanks) {
  transport::TransportOptions options = PipelineOptions();
  options.pipeline_block_bytes = size_t{1} << 20;
  options.min_pipeline_block_bytes = size_t{256} << 10;
  options.tree_broadcast_bytes = 0;
  constexpr uint64_t kCount = uint64_t{1} << 20;
  ExpectRanksSucceeded(RunRanks({.world_size = 4}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    for (Collective kind : {Collective::kBroadcast, Collective::kReduce}) {
      const CollectiveCase c{.kind = kind, .count = kCount, .root = 0, .mode = CompressionMode::kOn};
      const uint64_t before = (*comm)->stats().blocks_compressed;
      if (absl::Status s = RunAndCheck(**comm, c, 7); !s.ok()) return s;
      const uint64_t frames = (*comm)->stats().blocks_compressed - before;
      const bool encodes_the_message = (kind == Collective::kBroadcast ? 0 : 1) == (*comm)->rank();
      if (encodes_the_message && frames != 8) {
        return absl::InternalError(absl::StrCat("rank ", (*comm)->rank(), ": ", c.Name(), " sent ", frames,
                                                " frames, not 8 (a chain of 4 ranks cuts its 2 MB into 8 blocks)"));
      }
    }
    return absl::OkStatus();
  }));
}

// Host memory through the transport's staging pipeline (as device memory goes where UCX does not
// take it), so that CI covers the staged path's small, empty and adjacent messages too.
TEST(Collectives, StagedTransportPath) {
  transport::TransportOptions options = PipelineOptions();
  options.stage_host_memory = true;
  options.staging_pool_bytes = 2 << 20;
  RunCases(3, SizeCases(3), options);
}

// A group may hold collectives and point-to-point calls together; each keeps its order.
TEST(Collectives, GroupsMixCollectivesAndPointToPoint) {
  ExpectRanksSucceeded(RunRanks({.world_size = 3}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, PipelineOptions());
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const int world = c.size(), rank = c.rank();
    const CollectiveCase reduce{.kind = Collective::kAllReduce, .dtype = DataType::kBFloat16, .count = 90'001};
    const CollectiveCase gather{.kind = Collective::kAllGather, .dtype = DataType::kFloat32, .count = 30'000};
    std::vector<uint8_t> reduce_in = CaseInput(reduce, world, rank, 1), gather_in = CaseInput(gather, world, rank, 2);
    std::vector<uint8_t> reduce_out(reduce_in.size()), gather_out(gather_in.size() * world);
    std::vector<uint8_t> p2p_out(4000), p2p_in = GenerateTensor(DataType::kFloat16, 2000, {DistKind::kGaussian, 1}, rank);
    c.GroupStart();
    Post(c, reduce, reduce_in.data(), reduce_out.data(), nullptr);
    c.Send(p2p_in.data(), 2000, DataType::kFloat16, (rank + 2) % world, nullptr);
    c.Recv(p2p_out.data(), 2000, DataType::kFloat16, (rank + 1) % world, nullptr);
    Post(c, gather, gather_in.data(), gather_out.data(), nullptr);
    if (absl::Status s = WaitOk(c.GroupEnd(), "group"); !s.ok()) return s;
    std::vector<uint8_t> want = ReferenceOutput(reduce, c, 1);
    if (absl::Status s = ExpectSameBytes(reduce_out.data(), want.data(), want.size(), "allreduce in a group"); !s.ok()) return s;
    want = ReferenceOutput(gather, c, 2);
    if (absl::Status s = ExpectSameBytes(gather_out.data(), want.data(), want.size(), "allgather in a group"); !s.ok()) return s;
    want = GenerateTensor(DataType::kFloat16, 2000, {DistKind::kGaussian, 1}, (rank + 1) % world);
    return ExpectSameBytes(p2p_out.data(), want.data(), want.size(), "send/recv in a group");
  }));
}

// A group of hundreds of calls of every kind, most of a block but some of several, through a
// send window of two small blocks: most calls wait on links that earlier calls still hold,
// which the engine passes by until they open (OperationTask::Parked), and every call must
// still finish with its bytes. Each rank also sends to both its neighbours in the group.
TEST(Collectives, GroupsOfManyCallsOfEveryKindFinishWithTheRightBytes) {
  transport::TransportOptions options = PipelineOptions();
  options.pipeline_block_bytes = 16 << 10;
  options.device_slots = 2;
  ExpectRanksSucceeded(RunRanks({.world_size = 3}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const int world = c.size(), rank = c.rank();
    const Collective kinds[] = {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                                Collective::kBroadcast, Collective::kReduce};
    const CompressionMode modes[] = {CompressionMode::kOn, CompressionMode::kOff, CompressionMode::kAuto};
    const DataType types[] = {DataType::kBFloat16, DataType::kFloat32, DataType::kInt32};
    struct Posted {
      int seed = 0;  // its call's place in the group
      CollectiveCase shape;
      std::vector<uint8_t> input, output, want;
    };
    std::vector<Posted> collectives;
    struct PointToPoint {
      int call = 0;
      std::vector<uint8_t> sent, from_previous, from_next;
    };
    std::vector<PointToPoint> point_to_point;
    constexpr int kCalls = 400;
    collectives.reserve(kCalls);
    point_to_point.reserve(kCalls);
    c.GroupStart();
    for (int i = 0; i < kCalls; ++i) {
      // Mostly under a block (16 KB), every seventh call several.
      const uint64_t count = i % 7 == 6 ? 20'000 + 37 * i : 1 + (i * 7919) % 3000;
      if (i % 4 == 3) {
        PointToPoint& p = point_to_point.emplace_back();
        p.call = i;
        const auto seeded = [&](int from) {
          return GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, 1000 * i + from);
        };
        p.sent = seeded(rank);
        p.from_previous.resize(p.sent.size());
        p.from_next.resize(p.sent.size());
        const SendOptions send{.compression = modes[i % 3]};
        c.Send(p.sent.data(), count, DataType::kBFloat16, (rank + 1) % world, nullptr, send);
        c.Recv(p.from_previous.data(), count, DataType::kBFloat16, (rank + world - 1) % world, nullptr);
        c.Send(p.sent.data(), count, DataType::kBFloat16, (rank + world - 1) % world, nullptr, send);
        c.Recv(p.from_next.data(), count, DataType::kBFloat16, (rank + 1) % world, nullptr);
        continue;
      }
      Posted& posted = collectives.emplace_back();
      posted.seed = i;
      const DataType dtype = types[(i / 5) % 3];
      posted.shape = {.kind = kinds[i % 5], .dtype = dtype, .op = i % 2 ? ReduceOp::kMax : ReduceOp::kSum,
                      .count = count, .root = i % world, .mode = modes[(i / 3) % 3]};
      posted.input = CaseInput(posted.shape, world, rank, i);
      posted.want = ReferenceOutput(posted.shape, c, i);
      posted.output.resize(posted.want.size());
      Post(c, posted.shape, posted.input.data(), posted.output.data(), nullptr);
    }
    if (absl::Status s = WaitOk(c.GroupEnd(), "a group of 400 calls"); !s.ok()) return s;
    for (const PointToPoint& p : point_to_point) {
      for (const auto& [got, from] : {std::pair{&p.from_previous, (rank + world - 1) % world},
                                      std::pair{&p.from_next, (rank + 1) % world}}) {
        const std::vector<uint8_t> want = GenerateTensor(DataType::kBFloat16, got->size() / 2,
                                                         {DistKind::kGaussian, 0.02}, 1000 * p.call + from);
        if (absl::Status s = ExpectSameBytes(got->data(), want.data(), want.size(),
                                             absl::StrCat("call ", p.call, " from peer ", from));
            !s.ok()) {
          return s;
        }
      }
    }
    for (const Posted& posted : collectives) {
      if (absl::Status s = ExpectSameBytes(posted.output.data(), posted.want.data(), posted.want.size(),
                                           absl::StrCat("call ", posted.seed, ": ", posted.shape.Name()));
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }));
}

// Rings and chains in one group share every link and, on the GPU, each peer's slots: their
// blocks start in call order link by link (docs/COLLECTIVES.md, "Link order"). Many blocks a
// chunk, compressed and not.
TEST(Collectives, GroupsOfRingsAndChainsShareEveryLink) {
  transport::TransportOptions options = PipelineOptions();
  options.pipeline_block_bytes = 16 << 10;
  ExpectRanksSucceeded(RunRanks({.world_size = 4}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    for (CompressionMode mode : {CompressionMode::kOn, CompressionMode::kOff}) {
      const std::vector<CollectiveCase> group = {
          {.kind = Collective::kAllReduce, .count = 100'003, .mode = mode},
          {.kind = Collective::kAllGather, .count = 30'001, .mode = mode},
          {.kind = Collective::kReduceScatter, .dtype = DataType::kFloat32, .op = ReduceOp::kMax, .count = 20'001, .mode = mode},
          {.kind = Collective::kBroadcast, .count = 70'001, .root = 2, .mode = mode},
          {.kind = Collective::kAllGather, .count = 30'001, .in_place = true, .mode = mode},
      };
      if (absl::Status s = RunAndCheckGroup(**comm, group, 40); !s.ok()) return s;
    }
    return absl::OkStatus();
  }));
}

// NCCL's reduce: recvbuff matters on the root only, so the others may pass null; reduces to
// different roots in one group each keep their own chain.
TEST(Collectives, ReduceTakesNullOffTheRootAndGroupsWithOtherRoots) {
  ExpectRanksSucceeded(RunRanks({.world_size = 4}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, PipelineOptions());
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const int world = c.size(), rank = c.rank();
    std::vector<CollectiveCase> cases;
    for (int root = 0; root < world; ++root) {
      cases.push_back({.kind = Collective::kReduce, .dtype = DataType::kFloat32, .op = ReduceOp::kSum,
                       .count = 50'001 + uint64_t(root), .root = root});
    }
    std::vector<std::vector<uint8_t>> inputs, outputs;
    c.GroupStart();
    for (size_t i = 0; i < cases.size(); ++i) {
      inputs.push_back(CaseInput(cases[i], world, rank, i));
      outputs.emplace_back(inputs.back().size());
      Post(c, cases[i], inputs.back().data(), rank == cases[i].root ? outputs.back().data() : nullptr, nullptr);
    }
    if (absl::Status s = WaitOk(c.GroupEnd(), "a group of reduces"); !s.ok()) return s;
    const std::vector<uint8_t> want = ReferenceOutput(cases[rank], c, rank);
    return ExpectSameBytes(outputs[rank].data(), want.data(), want.size(), absl::StrCat("reduce to root ", rank));
  }));
}

// Sends to two peers in one group, where one receiver first needs data that the other gets
// only from this group: per-peer slots and windows let both go on (docs/PIPELINE.md). Also
// staged and uncompressed, where a plain run's one transport message would hold the staging
// blocks that the send to the other peer needs until its receiver posts (docs/PIPELINE.md,
// "Plain runs": there are none on staged paths). With a window as large as the send staging
// pool (as the defaults make them: 2 slots of 16 MB against 8 blocks of 4 MB), the send to the
// first peer could take every staging block, and the one to the other never started
// (staging_pool.h).
class GroupedSendsToPeersThatDependOnEachOther
    : public ::testing::TestWithParam<std::tuple<bool, CompressionMode, bool>> {};

TEST_P(GroupedSendsToPeersThatDependOnEachOther, FinishWithTheRightBytes) {
  const auto [staged, mode, window_fills_pool] = GetParam();
  ExpectRanksSucceeded(RunRanks({.world_size = 3}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = PipelineOptions();
    options.stage_host_memory = staged;
    options.staging_pool_bytes = 2 << 20;
    if (window_fills_pool) {
      options.device_slots = 4;  // a window of 4 pipeline blocks of 256 KB: the 1 MB send pool
      options.op_timeout = absl::Seconds(5);
    }
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const uint64_t count = 600'000;  // several blocks each: more than the slots, the window and the pool hold
    const SendOptions send{.compression = mode};
    std::vector<uint8_t> a = GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, 1);
    std::vector<uint8_t> b = GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, 2);
    std::vector<uint8_t> got(a.size()), relay(a.size());
    if (c.rank() == 0) {
      c.GroupStart();
      c.Send(a.data(), count, DataType::kBFloat16, 1, nullptr, send);
      c.Send(b.data(), count, DataType::kBFloat16, 2, nullptr, send);
      return WaitOk(c.GroupEnd(), "rank 0's group");
    }
    if (c.rank() == 2) {
      if (absl::Status s = WaitOk(c.Recv(got.data(), count, DataType::kBFloat16, 0, nullptr), "b"); !s.ok()) return s;
      return WaitOk(c.Send(got.data(), count, DataType::kBFloat16, 1, nullptr, send), "relay of b");
    }
    if (absl::Status s = WaitOk(c.Recv(relay.data(), count, DataType::kBFloat16, 2, nullptr), "relay"); !s.ok()) {
      return s;
    }
    if (absl::Status s = WaitOk(c.Recv(got.data(), count, DataType::kBFloat16, 0, nullptr), "a"); !s.ok()) return s;
    if (absl::Status s = ExpectSameBytes(relay.data(), b.data(), b.size(), "relayed b"); !s.ok()) return s;
    return ExpectSameBytes(got.data(), a.data(), a.size(), "a");
  }));
}

INSTANTIATE_TEST_SUITE_P(Collectives, GroupedSendsToPeersThatDependOnEachOther,
                         ::testing::Values(std::make_tuple(false, CompressionMode::kAuto, false),
                                           std::make_tuple(false, CompressionMode::kOff, false),
                                           std::make_tuple(true, CompressionMode::kAuto, false),
                                           std::make_tuple(true, CompressionMode::kOff, false),
                                           std::make_tuple(true, CompressionMode::kOff, true)),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param) ? "staged_" : "unstaged_",
                                               std::get<1>(info.param) == CompressionMode::kOff ? "off" : "auto",
                                               std::get<2>(info.param) ? "_window_fills_pool" : "");
                         });

}  // namespace
}  // namespace ucclzip::testing
