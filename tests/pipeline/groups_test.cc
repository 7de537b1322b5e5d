// Groups as NCCL users know them: GroupStarts nest and only the outermost GroupEnd posts; a
// GroupEnd without a GroupStart fails; a communicator destroyed with a group still open fails
// that group's calls instead of leaving their Operations waiting for ever.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "pipeline_test_util.h"

namespace ucclzip::testing {
namespace {

TEST(Groups, NestedGroupsPostAtTheOutermostEnd) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const int peer = 1 - context.rank;
    const std::vector<uint8_t> mine = GenerateTensor(DataType::kFloat32, 1000, {DistKind::kGaussian, 1}, context.rank);
    const std::vector<uint8_t> theirs = GenerateTensor(DataType::kFloat32, 1000, {DistKind::kGaussian, 1}, peer);
    std::vector<uint8_t> got(theirs.size());
    c.GroupStart();
    Operation recv = c.Recv(got.data(), 1000, DataType::kFloat32, peer, nullptr);
    c.GroupStart();
    Operation send = c.Send(mine.data(), 1000, DataType::kFloat32, peer, nullptr);
    if (absl::Status s = c.GroupEnd().Wait(absl::Seconds(1)); !s.ok()) {
      return absl::InternalError(absl::StrCat("the inner GroupEnd: ", s.ToString()));
    }
    // Not posted yet, so neither call can finish, however long it is given.
    if (send.Wait(absl::Milliseconds(300)).ok() || recv.Test()) {
      return absl::InternalError(absl::StrCat("rank ", context.rank, ": the inner GroupEnd posted the calls"));
    }
    if (absl::Status s = WaitOk(c.GroupEnd(), "the outer GroupEnd"); !s.ok()) return s;
    if (absl::Status s = WaitOk(send, "the grouped send"); !s.ok()) return s;
    return ExpectSameBytes(got.data(), theirs.data(), got.size(), "the grouped receive");
  }));
}

TEST(Groups, GroupEndWithoutGroupStartFails) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    (*comm)->GroupStart();
    if (absl::Status s = (*comm)->GroupEnd().Wait(absl::Seconds(1)); !s.ok()) return s;
    return ExpectError((*comm)->GroupEnd().Wait(absl::Seconds(1)), absl::StatusCode::kFailedPrecondition,
                       {absl::StrCat("rank ", context.rank), "GroupEnd without a GroupStart"}, "unmatched GroupEnd");
  }));
}

TEST(Groups, DestroyingTheCommunicatorFailsTheCallsOfAnOpenGroup) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    std::vector<uint8_t> buffer(4000, 1);
    (*comm)->GroupStart();
    Operation send = (*comm)->Send(buffer.data(), 1000, DataType::kFloat32, 1 - context.rank, nullptr);
    Operation reduce =
        (*comm)->AllReduce(buffer.data(), buffer.data(), 1000, DataType::kFloat32, ReduceOp::kSum, nullptr);
    comm->reset();
    for (const Operation* op : {&send, &reduce}) {
      if (absl::Status s = ExpectError(op->Wait(absl::Seconds(1)), absl::StatusCode::kCancelled,
                                       {absl::StrCat("rank ", context.rank), "destroyed", "GroupStart without GroupEnd"},
                                       "a call of the open group");
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace ucclzip::testing
