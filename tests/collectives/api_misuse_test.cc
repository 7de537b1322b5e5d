// Misuse of the public Communicator API: values outside their enums, ranks and roots outside
// the world, counts whose bytes overflow, null and overlapping buffers, absurd options, groups
// and Operations used out of order, communicators destroyed or aborted under their calls. Each
// must get a clear error naming the rank, the operation and the offending value: never a
// crash, a hang, an access outside the buffers or wrong data. Most run on a communicator of one
// rank in this process (no peers to reach, so each takes milliseconds); those that need a peer
// run as two processes.
#include <gtest/gtest.h>

#include <algorithm>

#include <climits>
#include <cstring>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collective_test_util.h"
#include "pipeline_test_util.h"

namespace ucclzip::testing {
namespace {

// A hang fails the test rather than blocking CI: the parent kills ranks still running then.
constexpr absl::Duration kKillAfter = absl::Seconds(40);

// Options for a communicator of one rank in this process: tcp (always there), short timeouts.
CommunicatorConfig OneRankConfig() {
  CommunicatorConfig config;
  config.bootstrap.rank = 0;
  config.bootstrap.world_size = 1;
  config.bootstrap.timeout = absl::Seconds(5);
  config.options.ucx_transports = "tcp";
  config.options.op_timeout = absl::Seconds(3);
  config.options.shutdown_timeout = absl::Seconds(1);
  return config;
}

std::unique_ptr<Communicator> OneRank(CommunicatorConfig config = OneRankConfig()) {
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::Create(config);
  EXPECT_TRUE(comm.ok()) << comm.status();
  return comm.ok() ? std::move(*comm) : nullptr;
}

// The call's error: code and every part of its message (a hang is a DeadlineExceeded at 5 s).
void ExpectRefused(const Operation& op, absl::StatusCode code, std::vector<std::string> parts, const std::string& what) {
  const absl::Status status = op.Wait(absl::Seconds(5));
  EXPECT_TRUE(ExpectError(status, code, std::move(parts), what).ok()) << what << ": got " << status;
}

// --- Creation ----------------------------------------------------------------------------------

TEST(ApiMisuse, CreateRefusesRanksAndWorldsThatCannotBe) {
  struct Bad {
    int rank, world;
    std::string says;
  };
  for (const Bad& b : {Bad{-1, 1, "rank -1"}, Bad{1, 1, "rank 1"}, Bad{INT_MAX, 2, "rank 2147483647"},
                       Bad{0, 0, "world size 0"}, Bad{0, -1, "world size -1"}, Bad{0, INT_MAX, "world size 2147483647"},
                       // More than the transport holds: refused before the rendezvous, which
                       // rank 1 tried (port 1) until its timeout.
                       Bad{1, 5000, "world size 5000 exceeds the 4096"}}) {
    CommunicatorConfig config = OneRankConfig();
    config.bootstrap.rank = b.rank;
    config.bootstrap.world_size = b.world;
    config.bootstrap.port = 1;  // not reached: the configuration is refused first
    const absl::Time start = absl::Now();
    const absl::Status status = Communicator::Create(config).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find(b.says), absl::string_view::npos) << status;
    EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << status;
  }
}

// Every option outside what it can be fails Create naming the rank, the option and its value.
TEST(ApiMisuse, CreateRefusesOptionsOutsideTheirRange) {
  struct Bad {
    std::string name;
    std::function<void(CommunicatorOptions&)> set;
    std::vector<std::string> says;
  };
  const Bad bad[] = {
      {"zero op timeout", [](CommunicatorOptions& o) { o.op_timeout = absl::ZeroDuration(); }, {"rank 0", "op_timeout", "0"}},
      {"negative op timeout", [](CommunicatorOptions& o) { o.op_timeout = absl::Seconds(-1); }, {"rank 0", "op_timeout", "-1s"}},
      {"negative shutdown timeout", [](CommunicatorOptions& o) { o.shutdown_timeout = absl::Seconds(-2); },
       {"rank 0", "shutdown_timeout", "-2s"}},
      {"no lanes", [](CommunicatorOptions& o) { o.transport_lanes = 0; }, {"rank 0", "transport_lanes is 0"}},
      {"negative lanes", [](CommunicatorOptions& o) { o.transport_lanes = -3; }, {"rank 0", "transport_lanes is -3"}},
      {"too many lanes", [](CommunicatorOptions& o) { o.transport_lanes = 9; }, {"rank 0", "transport_lanes is 9"}},
      {"zero transport block", [](CommunicatorOptions& o) { o.block_bytes = 0; }, {"rank 0", "block_bytes is 0"}},
      {"transport block over the limit", [](CommunicatorOptions& o) { o.block_bytes = size_t{32} << 30; },
       {"rank 0", "block_bytes is 34359738368"}},
      {"too many codec threads", [](CommunicatorOptions& o) { o.cpu_codec_threads = INT_MAX; },
       {"rank 0", "2147483647"}},
      {"negative codec threads", [](CommunicatorOptions& o) { o.cpu_codec_threads = INT_MIN; }, {"rank 0", "-2147483648"}},
      {"negative device slots", [](CommunicatorOptions& o) { o.device_slots = -1; }, {"rank 0", "device_slots is -1"}},
      // device_slots plus the ring's blocks is an int: INT_MAX overflowed it.
      {"absurd device slots", [](CommunicatorOptions& o) { o.device_slots = INT_MAX; },
       {"rank 0", "device_slots is 2147483647"}},
      {"compression outside its enum", [](CommunicatorOptions& o) { o.compression = static_cast<CompressionMode>(7); },
       {"rank 0", "compression", "7"}},
      {"zero pipeline block", [](CommunicatorOptions& o) { o.pipeline_block_bytes = 0; },
       {"rank 0", "pipeline_block_bytes is 0"}},
  };
  for (const Bad& b : bad) {
    CommunicatorConfig config = OneRankConfig();
    b.set(config.options);
    const absl::Time start = absl::Now();
    const absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::Create(config);
    EXPECT_TRUE(ExpectError(comm.status(), absl::StatusCode::kInvalidArgument, b.says, b.name).ok())
        << b.name << ": got " << comm.status();
    EXPECT_LT(absl::Now() - start, absl::Seconds(3)) << b.name;
  }
}

// --- Send and Recv -----------------------------------------------------------------------------

TEST(ApiMisuse, SendAndRecvRefuseRanksOutsideTheWorld) {
  std::unique_ptr<Communicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  uint32_t word = 7;
  for (int peer : {-1, 1, INT_MAX, INT_MIN}) {
    ExpectRefused(comm->Send(&word, 1, DataType::kUint32, peer, nullptr), absl::StatusCode::kInvalidArgument,
                  {absl::StrCat("rank 0: send to peer ", peer, " (1 elements of uint32"),
                   absl::StrCat("peer ", peer, " must be a rank of 1")},
                  absl::StrCat("send to peer ", peer));
    ExpectRefused(comm->Recv(&word, 1, DataType::kUint32, peer, nullptr), absl::StatusCode::kInvalidArgument,
                  {absl::StrCat("rank 0: recv from peer ", peer, " (1 elements of uint32"),
                   absl::StrCat("peer ", peer, " must be a rank of 1")},
                  absl::StrCat("recv from peer ", peer));
  }
}

TEST(ApiMisuse, EveryCallRefusesADataTypeOutsideItsEnum) {
  std::unique_ptr<Communicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  Communicator& c = *comm;
  std::vector<uint8_t> a(256), b(256);
  for (int value : {13, 200, 255}) {
    const auto dtype = static_cast<DataType>(value);
    const std::string why = absl::StrCat("invalid dtype ", value);
    c.GroupStart();
    const Operation send = c.Send(a.data(), 4, dtype, 0, nullptr);
    const Operation recv = c.Recv(b.data(), 4, dtype, 0, nullptr);
    const Operation group = c.GroupEnd();
    ExpectRefused(send, absl::StatusCode::kInvalidArgument, {"rank 0: send to peer 0 (4 elements of invalid", why}, "send");
    ExpectRefused(recv, absl::StatusCode::kInvalidArgument, {"rank 0: recv from peer 0 (4 elements of invalid", why}, "recv");
    ExpectRefused(group, absl::StatusCode::kInvalidArgument, {why}, "the group");
    ExpectRefused(c.AllReduce(a.data(), b.data(), 4, dtype, ReduceOp::kSum, nullptr), absl::StatusCode::kInvalidArgument,
                  {"rank 0: allreduce (4 elements of invalid, sum)", why}, "allreduce");
    ExpectRefused(c.AllGather(a.data(), b.data(), 4, dtype, nullptr), absl::StatusCode::kInvalidArgument,
                  {"rank 0: allgather (4 elements of invalid)", why}, "allgather");
    ExpectRefused(c.ReduceScatter(a.data(), b.data(), 4, dtype, ReduceOp::kMax, nullptr),
                  absl::StatusCode::kInvalidArgument, {"rank 0: reducescatter (4 elements of invalid, max)", why},
                  "reducescatter");
    ExpectRefused(c.Broadcast(a.data(), b.data(), 4, dtype, 0, nullptr), absl::StatusCode::kInvalidArgument,
                  {"rank 0: broadcast (4 elements of invalid, root 0)", why}, "broadcast");
    ExpectRefused(c.Reduce(a.data(), b.data(), 4, dtype, ReduceOp::kMin, 0, nullptr), absl::StatusCode::kInvalidArgument,
                  {"rank 0: reduce (4 elements of invalid, min, root 0)", why}, "reduce");
  }
}

// A mode outside CompressionMode was taken for kAuto without a word.
TEST(ApiMisuse, ACompressionModeOutsideItsEnumIsRefused) {
  std::unique_ptr<Communicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  Communicator& c = *comm;
  std::vector<uint8_t> a(64, 1), b(64);
  const auto mode = static_cast<CompressionMode>(9);
  ExpectRefused(c.AllReduce(a.data(), b.data(), 16, DataType::kFloat32, ReduceOp::kSum, nullptr, {.compression = mode}),
                absl::StatusCode::kInvalidArgument, {"rank 0: allreduce (16 elements of fp32, sum)", "compression mode 9"},
                "allreduce");
  c.GroupStart();
  const Operation send = c.Send(a.data(), 16, DataType::kFloat32, 0, nullptr, {.compression = mode});
  c.Recv(b.data(), 16, DataType::kFloat32, 0, nullptr);
  const Operation group = c.GroupEnd();
  ExpectRefused(send, absl::StatusCode::kInvalidArgument, {"rank 0: send to peer 0 (16 elements of fp32", "compression mode 9"},
                "send");
  ExpectRefused(group, absl::StatusCode::kInvalidArgument, {"compression mode 9"}, "the group");
}

// A count whose bytes do not fit 64 bits: with blocks as large as the options allow, no block
// count catches it, and the byte count wrapped to a few bytes.
TEST(ApiMisuse, CountsWhoseBytesOverflowAreRefused) {
  CommunicatorConfig config = OneRankConfig();
  config.options.pipeline_block_bytes = config.options.min_pipeline_block_bytes = std::numeric_limits<size_t>::max();
  std::unique_ptr<Communicator> comm = OneRank(config);
  ASSERT_NE(comm, nullptr);
  Communicator& c = *comm;
  std::vector<uint8_t> a(64, 1), b(64, 0);
  const size_t wraps = (size_t{1} << 62) + 1;  // x 4 bytes = 4 bytes, mod 2^64
  c.GroupStart();
  const Operation send = c.Send(a.data(), wraps, DataType::kFloat32, 0, nullptr);
  const Operation recv = c.Recv(b.data(), wraps, DataType::kFloat32, 0, nullptr);
  const Operation group = c.GroupEnd();
  ExpectRefused(send, absl::StatusCode::kInvalidArgument, {"rank 0: send to peer 0 (4611686018427387905 elements of fp32",
                                                           "overflow"}, "send");
  ExpectRefused(recv, absl::StatusCode::kInvalidArgument, {"rank 0: recv from peer 0 (4611686018427387905 elements of fp32",
                                                           "overflow"}, "recv");
  ExpectRefused(group, absl::StatusCode::kInvalidArgument, {"overflow"}, "the group");
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], 0) << "byte " << i << " written";
  // The collectives check their own (SIZE_MAX elements of any type).
  ExpectRefused(c.AllReduce(a.data(), b.data(), SIZE_MAX, DataType::kFloat32, ReduceOp::kSum, nullptr),
                absl::StatusCode::kInvalidArgument, {"rank 0: allreduce (18446744073709551615 elements of fp32", "overflow"},
                "allreduce");
  ExpectRefused(c.AllGather(a.data(), b.data(), SIZE_MAX / 2, DataType::kFloat32, nullptr), absl::StatusCode::kInvalidArgument,
                {"rank 0: allgather", "overflow"}, "allgather");
}

// Null buffers are fine where nothing is read or written (count 0), and refused otherwise.
TEST(ApiMisuse, NullBuffersPassOnlyWithNoElements) {
  std::unique_ptr<Communicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  Communicator& c = *comm;
  c.GroupStart();
  c.Send(nullptr, 0, DataType::kFloat32, 0, nullptr);
  c.Recv(nullptr, 0, DataType::kFloat32, 0, nullptr);
  EXPECT_TRUE(c.GroupEnd().Wait(absl::Seconds(5)).ok());
  EXPECT_TRUE(c.AllReduce(nullptr, nullptr, 0, DataType::kFloat32, ReduceOp::kSum, nullptr).Wait(absl::Seconds(5)).ok());
  EXPECT_TRUE(c.Broadcast(nullptr, nullptr, 0, DataType::kFloat32, 0, nullptr).Wait(absl::Seconds(5)).ok());
  float x = 1;
  ExpectRefused(c.AllReduce(&x, nullptr, 1, DataType::kFloat32, ReduceOp::kSum, nullptr), absl::StatusCode::kInvalidArgument,
                {"rank 0: allreduce (1 elements of fp32, sum)", "null buffer"}, "allreduce to null");
  ExpectRefused(c.Broadcast(nullptr, &x, 1, DataType::kFloat32, 0, nullptr), absl::StatusCode::kInvalidArgument,
                {"rank 0: broadcast (1 elements of fp32, root 0)", "null buffer"}, "broadcast from null on the root");
  c.GroupStart();
  const Operation send = c.Send(nullptr, 1, DataType::kFloat32, 0, nullptr);
  c.Recv(&x, 1, DataType::kFloat32, 0, nullptr);
  EXPECT_FALSE(c.GroupEnd().Wait(absl::Seconds(5)).ok());
  ExpectRefused(send, absl::StatusCode::kInvalidArgument, {"rank 0: send to peer 0 (1 elements of fp32", "null buffer"},
                "send of null");
}

TEST(ApiMisuse, RootsOutsideTheWorldAreRefused) {
  std::unique_ptr<Communicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  std::vector<float> a(4, 1), b(4);
  for (int root : {-1, 1, INT_MAX, INT_MIN}) {
    ExpectRefused(comm->Broadcast(a.data(), b.data(), 4, DataType::kFloat32, root, nullptr),
                  absl::StatusCode::kInvalidArgument,
                  {absl::StrCat("rank 0: broadcast (4 elements of fp32, root ", root, ")"),
                   absl::StrCat("root ", root, " is not a rank of 1")},
                  absl::StrCat("broadcast root ", root));
    ExpectRefused(comm->Reduce(a.data(), b.data(), 4, DataType::kFloat32, ReduceOp::kSum, root, nullptr),
                  absl::StatusCode::kInvalidArgument, {absl::StrCat("root ", root, " is not a rank of 1")},
                  absl::StrCat("reduce root ", root));
  }
}

// A transfer to itself is a copy, which a group pairs; buffers that overlap without being the
// same were copied a slice at a time, each slice reading what the one before had just written
// (8 MiB, one byte apart: wrong from the second slice on).
TEST(ApiMisuse, ASelfTransferBetweenOverlappingBuffersIsRefused) {
  std::unique_ptr<Communicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  Communicator& c = *comm;
  const size_t count = size_t{8} << 20;
  std::vector<uint8_t> buffer(count + 1);
  std::iota(buffer.begin(), buffer.end(), uint8_t{0});
  const std::vector<uint8_t> before = buffer;
  c.GroupStart();
  const Operation send = c.Send(buffer.data(), count, DataType::kUint8, 0, nullptr);
  const Operation recv = c.Recv(buffer.data() + 1, count, DataType::kUint8, 0, nullptr);
  const absl::Status status = c.GroupEnd().Wait(absl::Seconds(10));
  EXPECT_TRUE(ExpectError(status, absl::StatusCode::kInvalidArgument, {"rank 0", "overlap"}, "the group").ok()) << status;
  EXPECT_TRUE(ExpectError(recv.Wait(absl::Seconds(1)), absl::StatusCode::kInvalidArgument,
                          {"rank 0: recv from peer 0 (8388608 elements of uint8", "overlap"}, "the recv")
                  .ok())
      << recv.Wait(absl::Seconds(1));
  EXPECT_FALSE(send.Wait(absl::Seconds(1)).ok());
  EXPECT_TRUE(buffer == before) << "the refused copy wrote the buffer";
  // The same buffer (a copy onto itself) is no overlap: it succeeds and changes nothing.
  c.GroupStart();
  c.Send(buffer.data(), count, DataType::kUint8, 0, nullptr);
  c.Recv(buffer.data(), count, DataType::kUint8, 0, nullptr);
  EXPECT_TRUE(c.GroupEnd().Wait(absl::Seconds(10)).ok());
  EXPECT_TRUE(buffer == before);
}

// The calls of a group run side by side in no order: a Recv into the buffer that a Send of the
// same group reads (a shift written in place), or two calls writing one buffer, would race and
// deliver half-written bytes with no error. Both ranks refuse both calls, naming the other,
// touch neither buffer, and the next group, with buffers of its own, runs as it should.
TEST(ApiMisuse, CallsOfAGroupThatRaceForABufferAreRefused) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2, .kill_after = kKillAfter}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const int peer = 1 - context.rank;
    std::vector<float> shared(1000, static_cast<float>(context.rank + 1));
    const std::vector<float> before = shared;
    c.GroupStart();
    const Operation send = c.Send(shared.data(), 500, DataType::kFloat32, peer, nullptr);
    const Operation recv = c.Recv(shared.data() + 250, 500, DataType::kFloat32, peer, nullptr);
    const absl::Status group = c.GroupEnd().Wait(absl::Seconds(20));
    if (absl::Status s = ExpectError(group, absl::StatusCode::kInvalidArgument, {"of the same group"}, "the group");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = ExpectError(recv.Wait(absl::ZeroDuration()), absl::StatusCode::kInvalidArgument,
                                     {absl::StrCat("rank ", context.rank, ": recv from peer ", peer, " (500 elements"),
                                      "it writes", absl::StrCat("which \"rank ", context.rank, ": send to peer ", peer),
                                      "run side by side"},
                                     "the recv");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = ExpectError(send.Wait(absl::ZeroDuration()), absl::StatusCode::kInvalidArgument,
                                     {"it reads", "writes at"}, "the send");
        !s.ok()) {
      return s;
    }
    if (shared != before) return absl::InternalError("a refused call wrote the buffer");
    // Disjoint buffers (and two sends reading one buffer) are no race.
    std::vector<float> theirs(1000, 0);
    c.GroupStart();
    c.Send(shared.data(), 500, DataType::kFloat32, peer, nullptr);
    c.Send(shared.data() + 250, 500, DataType::kFloat32, peer, nullptr);
    c.Recv(theirs.data(), 500, DataType::kFloat32, peer, nullptr);
    c.Recv(theirs.data() + 500, 500, DataType::kFloat32, peer, nullptr);
    if (absl::Status s = c.GroupEnd().Wait(absl::Seconds(20)); !s.ok()) return s;
    if (theirs != std::vector<float>(1000, static_cast<float>(peer + 1))) {
      return absl::InternalError("the next group delivered wrong data");
    }
    return absl::OkStatus();
  }));
}

// No race, no refusal: a copy of a buffer onto itself (a Send and Recv to this rank itself of one
// buffer) beside a call that reads that buffer, and an in-place allreduce beside another call
// reading its input, in one group.
TEST(ApiMisuse, CallsOfAGroupThatOnlyShareWhatTheyReadRun) {
  std::unique_ptr<Communicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  Communicator& c = *comm;
  std::vector<float> x(1000, 3.0f), y(1000, 0.0f), z(1000, 5.0f), w(1000, 0.0f);
  c.GroupStart();
  c.Send(x.data(), x.size(), DataType::kFloat32, 0, nullptr);
  c.Recv(x.data(), x.size(), DataType::kFloat32, 0, nullptr);
  c.AllReduce(x.data(), y.data(), x.size(), DataType::kFloat32, ReduceOp::kSum, nullptr);
  c.AllReduce(z.data(), z.data(), z.size(), DataType::kFloat32, ReduceOp::kMax, nullptr);
  c.AllReduce(x.data(), w.data(), x.size(), DataType::kFloat32, ReduceOp::kSum, nullptr);
  const absl::Status status = c.GroupEnd().Wait(absl::Seconds(10));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(y, std::vector<float>(1000, 3.0f));
  EXPECT_EQ(z, std::vector<float>(1000, 5.0f));
  EXPECT_EQ(w, std::vector<float>(1000, 3.0f));
}

// An in-place allgather only reads its own shard, so a Send of that shard in its group is no
// race, on every rank: on the middle ranks the allgather's writes lie on both sides of the shard,
// and a race check that took them for one span refused the group there alone, leaving the other
// ranks to wait for the timeout (found by review in session 38).
TEST(ApiMisuse, AnInPlaceAllGatherRunsBesideASendOfItsOwnShardOnEveryRank) {
  constexpr int kWorld = 3;
  ExpectRanksSucceeded(RunRanks({.world_size = kWorld, .kill_after = kKillAfter}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    constexpr size_t kShard = 1000;
    const int rank = context.rank;
    std::vector<float> gathered(kWorld * kShard, -1.0f), from_previous(kShard, 0.0f);
    std::fill_n(gathered.begin() + rank * kShard, kShard, static_cast<float>(rank + 1));
    c.GroupStart();
    c.AllGather(gathered.data() + rank * kShard, gathered.data(), kShard, DataType::kFloat32, nullptr);
    c.Send(gathered.data() + rank * kShard, kShard, DataType::kFloat32, (rank + 1) % kWorld, nullptr);
    c.Recv(from_previous.data(), kShard, DataType::kFloat32, (rank + kWorld - 1) % kWorld, nullptr);
    if (absl::Status s = WaitOk(c.GroupEnd(), "the group"); !s.ok()) return s;
    for (int r = 0; r < kWorld; ++r) {
      if (!std::all_of(gathered.begin() + r * kShard, gathered.begin() + (r + 1) * kShard,
                       [&](float x) { return x == static_cast<float>(r + 1); })) {
        return absl::InternalError(absl::StrCat("rank ", rank, ": shard ", r, " gathered wrong"));
      }
    }
    const float previous = static_cast<float>((rank + kWorld - 1) % kWorld + 1);
    if (from_previous != std::vector<float>(kShard, previous)) {
      return absl::InternalError(absl::StrCat("rank ", rank, ": the previous rank's shard arrived wrong"));
    }
    return absl::OkStatus();
  }));
}

// Blocks as large as the options allow (2^62 bytes) only mean one block per message: a small
// send, receive and allreduce between two ranks still move, nothing being sized by the option.
TEST(ApiMisuse, HugeBlockSizesStillMoveSmallMessages) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2, .kill_after = kKillAfter}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = ShortTimeoutOptions();
    options.pipeline_block_bytes = options.min_pipeline_block_bytes = size_t{1} << 62;
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const int peer = 1 - context.rank;
    std::vector<float> mine(1000, static_cast<float>(context.rank + 1)), theirs(1000, 0), sum(1000, 0);
    c.GroupStart();
    c.Send(mine.data(), mine.size(), DataType::kFloat32, peer, nullptr);
    c.Recv(theirs.data(), theirs.size(), DataType::kFloat32, peer, nullptr);
    if (absl::Status s = WaitOk(c.GroupEnd(), "the exchange"); !s.ok()) return s;
    if (theirs != std::vector<float>(1000, static_cast<float>(peer + 1))) return absl::InternalError("wrong data received");
    if (absl::Status s = WaitOk(c.AllReduce(mine.data(), sum.data(), mine.size(), DataType::kFloat32, ReduceOp::kSum, nullptr),
                                "the allreduce");
        !s.ok()) {
      return s;
    }
    return sum == std::vector<float>(1000, 3.0f) ? absl::OkStatus() : absl::InternalError("wrong sum");
  }));
}

// --- Groups and Operations ---------------------------------------------------------------------

TEST(ApiMisuse, GroupsNestDeeplyAndAnExtraGroupEndFails) {
  std::unique_ptr<Communicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  Communicator& c = *comm;
  std::vector<float> a(100, 2), b(100, 0);
  constexpr int kDepth = 10000;
  for (int i = 0; i < kDepth; ++i) c.GroupStart();
  c.Send(a.data(), a.size(), DataType::kFloat32, 0, nullptr);
  c.Recv(b.data(), b.size(), DataType::kFloat32, 0, nullptr);
  for (int i = 1; i < kDepth; ++i) EXPECT_TRUE(c.GroupEnd().Test());
  EXPECT_TRUE(c.GroupEnd().Wait(absl::Seconds(5)).ok());
  EXPECT_EQ(a, b);
  ExpectRefused(c.GroupEnd(), absl::StatusCode::kFailedPrecondition, {"rank 0: GroupEnd without a GroupStart"}, "extra end");
}

TEST(ApiMisuse, OperationsCanBeWaitedOnAgainAndWithoutTime) {
  const Operation empty;
  EXPECT_TRUE(empty.Test());
  EXPECT_TRUE(empty.Wait().ok());
  EXPECT_TRUE(empty.Wait(-absl::InfiniteDuration()).ok());
  std::unique_ptr<Communicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  uint32_t word = 0;
  const Operation bad = comm->Send(&word, 1, DataType::kUint32, 5, nullptr);
  const absl::Status first = bad.Wait(), second = bad.Wait(absl::ZeroDuration());
  EXPECT_EQ(first, second);
  EXPECT_FALSE(first.ok());
  // Pending in an open group: a zero or negative wait says so at once, and the call goes on.
  comm->GroupStart();
  const Operation pending = comm->Send(&word, 1, DataType::kUint32, 0, nullptr);
  EXPECT_EQ(pending.Wait(absl::Seconds(-1)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(pending.Wait(absl::ZeroDuration()).code(), absl::StatusCode::kDeadlineExceeded);
  uint32_t got = 1;
  comm->Recv(&got, 1, DataType::kUint32, 0, nullptr);
  EXPECT_TRUE(comm->GroupEnd().Wait(absl::Seconds(5)).ok());
  EXPECT_TRUE(pending.Wait(absl::Seconds(5)).ok());
  EXPECT_EQ(got, 0u);
}

// A per-call timeout of zero or less is already over: the call fails at once, naming it.
TEST(ApiMisuse, ANonPositiveCallTimeoutFailsTheCallAtOnce) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2, .kill_after = kKillAfter}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    uint32_t word = 0;
    if (context.rank == 1) {
      const absl::Time start = absl::Now();
      const absl::Status status =
          (*comm)->Recv(&word, 1, DataType::kUint32, 0, nullptr, {.timeout = absl::Seconds(-5)}).Wait(absl::Seconds(10));
      if (absl::Now() - start > absl::Seconds(2)) return absl::InternalError("the receive waited");
      return ExpectError(status, absl::StatusCode::kDeadlineExceeded, {"rank 1: recv from peer 0 (1 elements of uint32"},
                         "negative timeout");
    }
    return absl::OkStatus();
  }));
}

// --- Communicator lifetime ---------------------------------------------------------------------

// Rank 0's receive from rank 2 is never matched and rank 1's send to rank 2 never received
// (rank 2 posts nothing); all three communicators are destroyed with them in flight. Their
// Operations, which outlive the communicators, must end with an error naming the rank rather
// than wait for ever or touch freed memory. The send is 4 MB, which UCX sends by rendezvous:
// begun, it never finished, its transport's drain ran out of time, and the destructor then
// waited for ever for the pipeline thread, which waited for that send.
TEST(ApiMisuse, OperationsOutliveADestroyedCommunicatorAndFail) {
  ExpectRanksSucceeded(RunRanks({.world_size = 3, .kill_after = kKillAfter}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = ShortTimeoutOptions();
    options.shutdown_timeout = absl::Seconds(1);
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    std::vector<uint8_t> data(size_t{4} << 20, 3);
    if (context.rank == 2) return absl::OkStatus();
    const Operation op = context.rank == 0 ? (*comm)->Recv(data.data(), data.size() / 4, DataType::kFloat32, 2, nullptr)
                                           : (*comm)->Send(data.data(), data.size() / 2, DataType::kBFloat16, 2, nullptr);
    comm->reset();
    const absl::Status status = op.Wait(absl::Seconds(10));
    if (status.ok()) return absl::InternalError(absl::StrCat("rank ", context.rank, ": an unmatched call succeeded"));
    if (!op.Test()) return absl::InternalError(absl::StrCat("rank ", context.rank, ": the call still waits after the destruction"));
    return ExpectFailure(status, {absl::StrCat("rank ", context.rank, ": ", context.rank == 0 ? "recv from" : "send to",
                                               " peer 2")},
                         "the call cut off by the destruction");
  }));
}

// After Abort, every call fails at once, naming the rank and the abort; the peer's allreduce,
// which needs the aborted rank, fails too. (The peer's send may complete: UCX may take a small
// message before the abort reaches the link.)
TEST(ApiMisuse, CallsAfterAbortFailAtOnce) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2, .kill_after = kKillAfter}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = ShortTimeoutOptions();
    options.shutdown_timeout = absl::Seconds(1);
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    if (context.rank == 0) c.Abort();
    std::vector<float> a(1000, 1), b(1000);
    const int peer = 1 - context.rank;
    std::vector<Operation> calls;
    const Operation send = c.Send(a.data(), a.size(), DataType::kFloat32, peer, nullptr);
    if (context.rank == 0) calls.push_back(send);
    calls.push_back(c.AllReduce(a.data(), b.data(), a.size(), DataType::kFloat32, ReduceOp::kSum, nullptr));
    for (const Operation& op : calls) {
      const absl::Status status = op.Wait(absl::Seconds(10));
      if (status.ok()) return absl::InternalError(absl::StrCat("rank ", context.rank, ": a call succeeded after the abort"));
      if (status.code() == absl::StatusCode::kDeadlineExceeded && !op.Test()) {
        return absl::InternalError(absl::StrCat("rank ", context.rank, ": a call waits after the abort"));
      }
      if (context.rank == 0) {
        if (absl::Status s = ExpectFailure(status, {"rank 0", "Abort"}, "a call after the abort"); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }));
}

// Work that stays on this rank fails after an abort too: a world of one's collectives and a
// group's transfer to this rank itself never touch the transports, whose abort alone let them
// run and succeed (found by review in session 38). Nothing is written.
TEST(ApiMisuse, CallsAfterAbortFailAtOnceThoughTheyStayOnThisRank) {
  std::unique_ptr<Communicator> comm = OneRank();
  ASSERT_NE(comm, nullptr);
  Communicator& c = *comm;
  c.Abort();
  std::vector<float> a(1000, 1), b(1000, 0), d(1000, 0);
  const absl::Status allreduce =
      c.AllReduce(a.data(), b.data(), a.size(), DataType::kFloat32, ReduceOp::kSum, nullptr).Wait(absl::Seconds(10));
  EXPECT_TRUE(ExpectFailure(allreduce, {"rank 0", "allreduce", "Abort"}, "an allreduce after the abort").ok()) << allreduce;
  c.GroupStart();
  c.Send(a.data(), a.size(), DataType::kFloat32, 0, nullptr);
  c.Recv(d.data(), d.size(), DataType::kFloat32, 0, nullptr);
  const absl::Status self = c.GroupEnd().Wait(absl::Seconds(10));
  EXPECT_TRUE(ExpectFailure(self, {"rank 0", "Abort"}, "a transfer to this rank itself after the abort").ok()) << self;
  EXPECT_EQ(b, std::vector<float>(1000, 0));
  EXPECT_EQ(d, std::vector<float>(1000, 0));
}

// An aborted communicator is destroyed at once, without waiting for its peers at the shutdown
// barrier (NCCL's abort is local; PyTorch aborts from its watchdog while peers are busy): here
// rank 1 is busy for 3 s and the shutdown timeout is 5 s, and rank 0's destruction after its
// abort took them all until the fix. Rank 1's own destruction then fails its barrier fast.
TEST(ApiMisuse, AnAbortedCommunicatorIsDestroyedWithoutWaitingForItsPeers) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2, .kill_after = kKillAfter}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = ShortTimeoutOptions();
    options.shutdown_timeout = absl::Seconds(5);
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    if (context.rank == 1) {
      absl::SleepFor(absl::Seconds(3));
      comm->reset();
      return absl::OkStatus();
    }
    (*comm)->Abort();
    const absl::Time start = absl::Now();
    comm->reset();
    if (const absl::Duration took = absl::Now() - start; took > absl::Seconds(2)) {
      return absl::InternalError(absl::StrCat("rank 0: destroying the aborted communicator took ", absl::FormatDuration(took)));
    }
    return absl::OkStatus();
  }));
}

// Ranks that disagree on the world size fail Create, each naming both sizes, within the
// bootstrap timeout.
TEST(ApiMisuse, RanksThatDisagreeOnTheWorldSizeFailCreate) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2, .bootstrap_timeout = absl::Seconds(3), .kill_after = kKillAfter},
                                [&](const RankContext& context) -> absl::Status {
                                  RankContext odd = context;
                                  if (context.rank == 1) odd.bootstrap.world_size = 3;
                                  const absl::Time start = absl::Now();
                                  auto comm = CreateCommunicator(odd, ShortTimeoutOptions());
                                  if (comm.ok()) return absl::InternalError("created with disagreeing world sizes");
                                  if (absl::Now() - start > absl::Seconds(12)) {
                                    return absl::InternalError(absl::StrCat("took ", absl::FormatDuration(absl::Now() - start)));
                                  }
                                  return ExpectFailure(comm.status(), {absl::StrCat("rank ", context.rank)}, "world sizes");
                                }));
}

}  // namespace
}  // namespace ucclzip::testing
