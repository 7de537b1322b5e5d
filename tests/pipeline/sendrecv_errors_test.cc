// Send/Recv failures: a receive of the wrong count or type gets a clear error naming both (and
// the receive side refuses later receives from that peer rather than mismatching them), bad
// arguments fail at once, and a per-call timeout fires.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "pipeline_test_util.h"

namespace ucclzip::testing {
namespace {


struct Mismatch {
  std::string name;
  DataType send_type;
  uint64_t send_count;
  DataType recv_type;
  uint64_t recv_count;
};

class PipelineMismatch : public ::testing::TestWithParam<Mismatch> {};

TEST_P(PipelineMismatch, ReceiverGetsAClearErrorAndNothingIsWritten) {
  const Mismatch m = GetParam();
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    if (context.rank == 0) {
      std::vector<uint8_t> data = GenerateTensor(m.send_type, m.send_count, {DistKind::kGaussian, 1}, 5);
      // The receiver never takes the data: a small send may still complete (UCX buffers it
      // eagerly), a large one fails at the transport's deadline; neither may hang.
      absl::Status status = (*comm)->Send(data.data(), m.send_count, m.send_type, 1, nullptr).Wait(absl::Seconds(30));
      return absl::StrContains(status.message(), "caller's deadline") ? status : absl::OkStatus();
    }
    std::vector<uint8_t> out(m.recv_count * ElementSize(m.recv_type) + 1, 0xA5);
    absl::Status status = (*comm)->Recv(out.data(), m.recv_count, m.recv_type, 0, nullptr).Wait(absl::Seconds(30));
    if (absl::Status s = ExpectError(status, absl::StatusCode::kInvalidArgument,
                                     {"rank 1", "peer 0", absl::StrCat(m.send_count, " elements of ", DataTypeName(m.send_type)),
                                      absl::StrCat("expects ", m.recv_count, " elements of ", DataTypeName(m.recv_type))},
                                     "mismatched receive");
        !s.ok()) {
      return s;
    }
    for (uint8_t byte : out) {
      if (byte != 0xA5) return absl::InternalError("the mismatched receive wrote into the buffer");
    }
    status = (*comm)->Recv(out.data(), 1, DataType::kUint8, 0, nullptr).Wait(absl::Seconds(30));
    return ExpectError(status, absl::StatusCode::kFailedPrecondition, {"out of step"}, "later receive");
  }));
}

INSTANTIATE_TEST_SUITE_P(, PipelineMismatch,
                         ::testing::Values(Mismatch{"count", DataType::kBFloat16, 100'000, DataType::kBFloat16, 99'999},
                                           Mismatch{"dtype", DataType::kFloat32, 1000, DataType::kBFloat16, 2000},
                                           Mismatch{"blocks", DataType::kFloat32, 1'000'000, DataType::kFloat32, 10}),
                         [](const auto& info) { return info.param.name; });

TEST(PipelineErrors, BadArgumentsFailAtOnceAndATimeoutFires) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    uint32_t word = 0;
    if (absl::Status s = ExpectError(c.Send(&word, 1, DataType::kUint32, 2, nullptr).Wait(), absl::StatusCode::kInvalidArgument,
                                     {"peer 2", "another rank"}, "peer out of range");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = ExpectError(c.Recv(&word, 1, DataType::kUint32, context.rank, nullptr).Wait(),
                                     absl::StatusCode::kInvalidArgument, {"another rank"}, "self");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = ExpectError(c.Send(nullptr, 5, DataType::kFloat32, 1 - context.rank, nullptr).Wait(),
                                     absl::StatusCode::kInvalidArgument, {"null buffer", "5 elements of fp32"}, "null");
        !s.ok()) {
      return s;
    }
    if (context.rank == 1) {
      absl::Status status = c.Recv(&word, 1, DataType::kUint32, 0, nullptr, RecvOptions{.timeout = absl::Milliseconds(200)})
                                .Wait(absl::Seconds(20));
      if (absl::Status s = ExpectError(status, absl::StatusCode::kDeadlineExceeded, {"rank 1", "recv from peer 0", "timeout"},
                                       "per-call timeout");
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }));
}

TEST(PipelineErrors, BadCpuCodecThreadsFailCreation) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = ShortTimeoutOptions();
    options.cpu_codec_threads = -2;
    return ExpectError(CreateCommunicator(context, options).status(), absl::StatusCode::kInvalidArgument,
                       {absl::StrCat("rank ", context.rank), "CPU codec threads", "-2"}, "negative threads");
  }));
}

}  // namespace
}  // namespace ucclzip::testing
