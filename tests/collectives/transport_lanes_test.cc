// Two transport lanes (CommunicatorOptions::transport_lanes = 2) at 3 and 4 ranks over tcp and
// shared memory: ring allreduce (compressed and not), chain broadcast, ring allgather and a
// send/recv shift agree bit for bit with the reference, and every link's bytes travel on the
// lane of its sender (a ring of 4 thus receives on one lane and sends on the other at every
// rank). A peer failure one lane sees fails the other lane's later operations with it at once;
// ranks that disagree on the lane count, or ask for too few or too many, fail at creation.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "collective_test_util.h"
#include "pipeline_test_util.h"

namespace ucclzip::testing {
namespace {

constexpr int kLanes = 2;

transport::TransportOptions TwoLanes(const std::string& tls) {
  transport::TransportOptions options = PipelineOptions(tls);
  options.transport_lanes = kLanes;
  return options;
}

// Each rank sends to the next and receives from the previous one.
absl::Status Shift(Communicator& comm) {
  const int world = comm.size(), rank = comm.rank();
  const uint64_t count = 70'001;
  const Distribution dist{DistKind::kGaussian, 0.5};
  std::vector<uint8_t> mine = GenerateTensor(DataType::kFloat16, count, dist, 40 + rank);
  std::vector<uint8_t> got(mine.size(), 0xA5);
  const int previous = (rank + world - 1) % world;
  comm.GroupStart();
  comm.Send(mine.data(), count, DataType::kFloat16, (rank + 1) % world, nullptr);
  comm.Recv(got.data(), count, DataType::kFloat16, previous, nullptr);
  if (absl::Status s = WaitOk(comm.GroupEnd(), "shift"); !s.ok()) return s;
  std::vector<uint8_t> want = GenerateTensor(DataType::kFloat16, count, dist, 40 + previous);
  return ExpectSameBytes(got.data(), want.data(), want.size(), absl::StrCat("rank ", rank, " shift from ", previous));
}

// Every operation above sends only to the next rank and receives only from the previous one.
absl::Status CheckLaneBytes(Communicator& comm) {
  const int world = comm.size(), rank = comm.rank();
  const std::vector<transport::Transport*> lanes = internal::CommunicatorAccess::LanesOf(comm);
  if (lanes.size() != kLanes) return absl::InternalError(absl::StrCat("rank ", rank, ": ", lanes.size(), " lanes"));
  const int send_lane = rank % kLanes, recv_lane = (rank + world - 1) % world % kLanes;
  for (int lane = 0; lane < kLanes; ++lane) {
    const uint64_t sent = lanes[lane]->bytes_sent(), received = lanes[lane]->bytes_received();
    if ((sent > 0) != (lane == send_lane) || (received > 0) != (lane == recv_lane)) {
      return absl::InternalError(absl::StrCat("rank ", rank, ": lane ", lane, " sent ", sent, " B and received ", received,
                                              " B; sends belong on lane ", send_lane, ", receives on lane ", recv_lane));
    }
  }
  return absl::OkStatus();
}

struct LanesCase {
  int world;
  std::string tls;
};

class TransportLanesWorld : public ::testing::TestWithParam<LanesCase> {};

TEST_P(TransportLanesWorld, CollectivesAndShiftAgreeWithTheReferenceAndUseTheSendersLane) {
  const LanesCase param = GetParam();
  const uint64_t count = 300'001;  // several 256 KB pipeline blocks per chunk
  const std::vector<CollectiveCase> cases = {
      {.kind = Collective::kAllReduce, .count = count, .mode = CompressionMode::kOn},
      {.kind = Collective::kAllReduce, .count = count, .mode = CompressionMode::kOff},
      {.kind = Collective::kBroadcast, .count = count, .root = 0, .mode = CompressionMode::kOff},
      {.kind = Collective::kAllGather, .dtype = DataType::kFloat32, .count = count / 3, .mode = CompressionMode::kOff},
  };
  ExpectRanksSucceeded(RunRanks({.world_size = param.world}, [&](const RankContext& context) -> absl::Status {
    // Rings and chains only: recursive doubling and the broadcast tree talk to other ranks.
    transport::TransportOptions options = TwoLanes(param.tls);
    options.recursive_doubling_bytes = options.tree_broadcast_bytes = 0;
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    for (size_t i = 0; i < cases.size(); ++i) {
      if (absl::Status s = RunAndCheck(**comm, cases[i], i); !s.ok()) return s;
    }
    if (absl::Status s = Shift(**comm); !s.ok()) return s;
    return CheckLaneBytes(**comm);
  }));
}

INSTANTIATE_TEST_SUITE_P(, TransportLanesWorld,
                         ::testing::Values(LanesCase{3, "tcp"}, LanesCase{4, "tcp"}, LanesCase{3, "posix,sysv"},
                                           LanesCase{4, "posix,sysv"}),
                         [](const auto& info) {
                           return absl::StrCat(info.param.world, "ranks_",
                                               absl::StrReplaceAll(info.param.tls, {{",", "_"}}));
                         });

// Rank 1 receives from rank 0 (lane 0) what rank 0 never sends: the deadline fails peer 0 there.
// Its next send to rank 0 (lane 1) must then fail at once, as it would with one lane.
TEST(TransportLanes, APeerFailedOnOneLaneFailsTheOtherLanesOperationsWithIt) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = ShortTimeoutOptions();
    options.transport_lanes = kLanes;
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    std::vector<uint8_t> buffer = GenerateTensor(DataType::kFloat32, 1000, {DistKind::kGaussian, 1}, 3);
    if (context.rank == 0) {
      absl::SleepFor(absl::Seconds(4));  // alive, but silent, while rank 1's receive times out
      return absl::OkStatus();
    }
    absl::Status status = (*comm)->Recv(buffer.data(), 1000, DataType::kFloat32, 0, nullptr).Wait(absl::Seconds(20));
    if (absl::Status s = ExpectFailure(status, {"rank 1", "peer 0", "made no progress"}, "receive"); !s.ok()) return s;
    const absl::Time sent = absl::Now();
    status = (*comm)->Send(buffer.data(), 1000, DataType::kFloat32, 0, nullptr).Wait(absl::Seconds(20));
    if (absl::Status s = ExpectFailure(status, {"rank 1", "send to peer 0", "peer 0 failed"}, "send"); !s.ok()) return s;
    if (absl::Now() - sent > absl::Seconds(1)) {
      return absl::InternalError(absl::StrCat("the send failed only after ", absl::FormatDuration(absl::Now() - sent)));
    }
    return absl::OkStatus();
  }));
}

// Not 1 and 2: with UCCLZIP_TRANSPORT_LANES set, a rank asking for the built-in 1 would take it.
TEST(TransportLanes, RanksThatDisagreeOnTheLaneCountFailNamingBoth) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = ShortTimeoutOptions();
    options.transport_lanes = context.rank == 0 ? 2 : 3;
    const std::string mine = absl::StrCat(options.transport_lanes), theirs = context.rank == 0 ? "3" : "2";
    return ExpectError(CreateCommunicator(context, options).status(), absl::StatusCode::kInvalidArgument,
                       {absl::StrCat("rank ", context.rank), absl::StrCat("transport_lanes ", mine),
                        absl::StrCat("rank ", 1 - context.rank, "'s ", theirs)},
                       "creation");
  }));
}

TEST(TransportLanes, ALaneCountOutOfRangeIsRefused) {
  ExpectRanksSucceeded(RunRanks({.world_size = 1}, [&](const RankContext& context) -> absl::Status {
    for (int lanes : {0, 9}) {
      transport::TransportOptions options = PipelineOptions();
      options.transport_lanes = lanes;
      if (absl::Status s = ExpectError(CreateCommunicator(context, options).status(), absl::StatusCode::kInvalidArgument,
                                       {"rank 0", absl::StrCat("transport_lanes is ", lanes), "1 to 8"}, "creation");
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace ucclzip::testing
