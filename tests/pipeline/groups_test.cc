// Groups as NCCL users know them: GroupStarts nest and only the outermost GroupEnd posts; a
// GroupEnd without a GroupStart fails; a communicator destroyed with a group still open fails
// that group's calls instead of leaving their Operations waiting for ever.
#include <gtest/gtest.h>

#include <thread>

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

// A call queued in a group starts only at the group's end: the thread that opened the group and
// waits for the call before ending it fails at once, naming the call, where until session 43
// its Wait (by default without a timeout) waited for ever. Another thread may wait for it, and
// sees it complete once the group has ended.
TEST(Groups, WaitingForACallOfTheGroupThisThreadHasNotEndedFailsAtOnce) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const int peer = 1 - c.rank();
    std::vector<float> out(100, 1.0f + c.rank()), in(100);
    c.GroupStart();
    c.GroupStart();
    const Operation send = c.Send(out.data(), out.size(), DataType::kFloat32, peer, nullptr);
    const Operation recv = c.Recv(in.data(), in.size(), DataType::kFloat32, peer, nullptr);
    if (absl::Status s = c.GroupEnd().Wait(absl::Seconds(1)); !s.ok()) return s;  // the inner one
    const absl::Time start = absl::Now();
    if (absl::Status s = ExpectError(recv.Wait(), absl::StatusCode::kFailedPrecondition,
                                     {absl::StrCat("rank ", c.rank(), ": recv from peer ", peer), "not ended"},
                                     "a Wait inside the group");
        !s.ok()) {
      return s;
    }
    if (absl::Now() - start > absl::Seconds(1)) return absl::InternalError("the Wait inside the group did not fail at once");
    absl::Status waited;
    std::thread other([&] { waited = recv.Wait(absl::Seconds(30)); });
    const absl::Status group = c.GroupEnd().Wait(absl::Seconds(30));
    other.join();
    if (!group.ok()) return group;
    if (!waited.ok()) return absl::InternalError(absl::StrCat("another thread's Wait: ", waited.ToString()));
    if (absl::Status s = send.Wait(); !s.ok()) return s;
    if (in[0] != 1.0f + peer) return absl::InternalError(absl::StrCat("received ", in[0]));
    return absl::OkStatus();
  }));
}

// A thread that exits inside a group leaves only that group open: a later thread, which the
// system may give the same thread id, starts with none of its own (its GroupEnd without a
// GroupStart fails, as on any new thread), however many threads come and go.
TEST(Groups, AThreadThatExitsInsideAGroupLeavesNoGroupToTheNext) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    for (int i = 0; i < 20; ++i) {
      std::thread([&] { (*comm)->GroupStart(); }).join();
      absl::Status unmatched;
      std::thread([&] { unmatched = (*comm)->GroupEnd().Wait(absl::Seconds(1)); }).join();
      if (absl::Status s = ExpectError(unmatched, absl::StatusCode::kFailedPrecondition, {"GroupEnd without a GroupStart"},
                                       absl::StrCat("GroupEnd on the thread after one that exited in a group, round ", i));
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
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

namespace ucclzip::testing {
namespace {

// An all-to-all of Sends and Recvs as PyTorch builds it, each rank's own share included: in a
// group a transfer to the rank itself pairs with its partner into a copy, whichever comes first
// in the group, compressed calls too, and every share arrives.
TEST(Groups, TransfersToTheRankItselfAreCopiesInAGroup) {
  constexpr uint64_t kShare = 50'001;  // odd, and large enough for several blocks at 256 KiB
  ExpectRanksSucceeded(RunRanks({.world_size = 3}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const int world = context.world_size;
    std::vector<std::vector<uint8_t>> out(world), in(world);
    for (int peer = 0; peer < world; ++peer) {
      out[peer] = GenerateTensor(DataType::kBFloat16, kShare, {DistKind::kGaussian, 0.02}, context.rank * 10 + peer);
      in[peer].assign(out[peer].size(), 0xA5);
    }
    for (const bool receive_first : {false, true}) {
      c.GroupStart();
      for (int peer = 0; peer < world; ++peer) {
        const SendOptions compressed{.compression = CompressionMode::kOn};
        if (receive_first) c.Recv(in[peer].data(), kShare, DataType::kBFloat16, peer, nullptr);
        c.Send(out[peer].data(), kShare, DataType::kBFloat16, peer, nullptr, compressed);
        if (!receive_first) c.Recv(in[peer].data(), kShare, DataType::kBFloat16, peer, nullptr);
      }
      if (absl::Status s = c.GroupEnd().Wait(absl::Seconds(30)); !s.ok()) return s;
      for (int from = 0; from < world; ++from) {
        const std::vector<uint8_t> want = GenerateTensor(DataType::kBFloat16, kShare, {DistKind::kGaussian, 0.02},
                                                         from * 10 + context.rank);
        if (absl::Status s = ExpectSameBytes(in[from].data(), want.data(), want.size(),
                                             absl::StrCat("rank ", context.rank, ": the share from rank ", from));
            !s.ok()) {
          return s;
        }
        in[from].assign(in[from].size(), 0xA5);
      }
    }
    return absl::OkStatus();
  }));
}

// A transfer to the rank itself that the group cannot pair fails at GroupEnd, naming itself
// and what it lacks or where it differs from its partner; the group's other calls go on, and
// the exchange with the peer arrives bit for bit (each rank's data its own, not the refused
// send's).
TEST(Groups, TransfersToTheRankItselfThatCannotPairFailNamingWhy) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, ShortTimeoutOptions());
    if (!comm.ok()) return comm.status();
    Communicator& c = **comm;
    const int self = context.rank, peer = 1 - context.rank;
    const Distribution gaussian{DistKind::kGaussian, 1};
    const std::vector<uint8_t> data = GenerateTensor(DataType::kFloat32, 100, gaussian, 100 + self);
    const std::vector<uint8_t> mine = GenerateTensor(DataType::kFloat32, 100, gaussian, self);
    const std::vector<uint8_t> theirs = GenerateTensor(DataType::kFloat32, 100, gaussian, peer);
    std::vector<uint8_t> got(400, 0xA5), from_peer(400, 0xA5);
    const std::string me = absl::StrCat("rank ", self, ": ");

    c.GroupStart();
    Operation alone = c.Send(data.data(), 100, DataType::kFloat32, self, nullptr);
    Operation to_peer = c.Send(mine.data(), 100, DataType::kFloat32, peer, nullptr);
    Operation from = c.Recv(from_peer.data(), 100, DataType::kFloat32, peer, nullptr);
    c.GroupEnd();
    if (absl::Status s = ExpectError(alone.Wait(absl::Seconds(10)), absl::StatusCode::kInvalidArgument,
                                     {me + "send to peer " + std::to_string(self), "no Recv from this rank itself"},
                                     "a send to itself alone");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = to_peer.Wait(absl::Seconds(10)); !s.ok()) return s;
    if (absl::Status s = from.Wait(absl::Seconds(10)); !s.ok()) return s;
    if (absl::Status s = ExpectSameBytes(from_peer.data(), theirs.data(), theirs.size(), me + "the receive from the peer");
        !s.ok()) {
      return s;
    }

    c.GroupStart();
    Operation send = c.Send(data.data(), 100, DataType::kFloat32, self, nullptr);
    Operation recv = c.Recv(got.data(), 99, DataType::kFloat32, self, nullptr);
    c.GroupEnd();
    if (absl::Status s = ExpectError(send.Wait(absl::Seconds(10)), absl::StatusCode::kInvalidArgument,
                                     {me + "send to peer", "its group pairs it with", "recv from peer",
                                      "99 elements of fp32", "differs in count or type"},
                                     "a pair of different counts (the send)");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = ExpectError(recv.Wait(absl::Seconds(10)), absl::StatusCode::kInvalidArgument,
                                     {me + "recv from peer", "100 elements of fp32", "differs in count or type"},
                                     "a pair of different counts (the recv)");
        !s.ok()) {
      return s;
    }
    if (got != std::vector<uint8_t>(400, 0xA5)) return absl::InternalError(me + "a refused pair wrote its buffer");
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace ucclzip::testing
