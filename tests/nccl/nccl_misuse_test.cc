// Misuse of the NCCL C API on one rank in this process: ids that are not ids, ranks and worlds
// that cannot be, counts that overflow, communicators used or destroyed out of order around a
// group. Each returns an ncclResult_t error whose ncclGetLastError names the call and what was
// wrong; never a crash, a hang or a success.
#include <gtest/gtest.h>
#include <nccl.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "nccl/status.h"
#include "nccl_one_rank.h"

namespace ucclzip::nccl {
namespace {

// The call's result and that the last error says every one of `parts`.
void ExpectFails(ncclResult_t got, ncclResult_t want, std::vector<std::string> parts, const std::string& what) {
  EXPECT_EQ(got, want) << what << ": " << LastError();
  for (const std::string& part : parts) {
    EXPECT_NE(std::string(LastError()).find(part), std::string::npos) << what << ": \"" << LastError() << "\" lacks \"" << part << "\"";
  }
}

// An id that GetUniqueId did not make (zeros), and one that rank 0 already used, fail at once,
// naming the call and the rank: the id's own error said neither.
TEST(NcclMisuse, IdsThatAreNotUsableAreRefusedNamingTheCall) {
  ncclUniqueId zeros;
  std::memset(&zeros, 0, sizeof(zeros));
  ncclComm_t comm = reinterpret_cast<ncclComm_t>(&zeros);  // overwritten with NULL on failure
  for (int rank : {0, 1}) {
    ExpectFails(ncclCommInitRank(&comm, 2, zeros, rank), ncclInvalidArgument,
                {"ncclCommInitRank (rank " + std::to_string(rank) + " of 2)", "not a ucclzip unique id"}, "zero id");
    EXPECT_EQ(comm, nullptr);
  }
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << LastError();
  ncclComm_t first = nullptr;
  ASSERT_EQ(ncclCommInitRank(&first, 1, id, 0), ncclSuccess) << LastError();
  ExpectFails(ncclCommInitRank(&comm, 1, id, 0), ncclInvalidUsage, {"ncclCommInitRank (rank 0 of 1)", "use the id once"},
              "an id used twice");
  EXPECT_EQ(comm, nullptr);
  EXPECT_EQ(ncclCommDestroy(first), ncclSuccess) << LastError();
}

TEST(NcclMisuse, RanksAndWorldsThatCannotBeAreRefused) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << LastError();
  ncclComm_t comm = nullptr;
  for (auto [nranks, rank] : {std::pair{0, 0}, std::pair{-1, 0}, std::pair{2, -1}, std::pair{INT_MAX, INT_MAX}}) {
    ExpectFails(ncclCommInitRank(&comm, nranks, id, rank), ncclInvalidArgument,
                {"ncclCommInitRank: rank " + std::to_string(rank) + " is not a rank of a world of " + std::to_string(nranks)},
                "bad rank");
  }
  // More ranks than a communicator holds fail at once, not after a rendezvous (rank 1 of 5000
  // connected to the id's port until its timeout).
  const absl::Time start = absl::Now();
  ExpectFails(ncclCommInitRank(&comm, 5000, id, 1), ncclInvalidArgument, {"rank 1", "world size 5000", "4096"}, "5000 ranks");
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  ExpectFails(ncclCommInitAll(nullptr, 2, nullptr), ncclInvalidArgument, {"ncclCommInitAll"}, "null comms");
  ncclComm_t comms[1] = {};
  ExpectFails(ncclCommInitAll(comms, 0, nullptr), ncclInvalidArgument, {"ncclCommInitAll", "ndev 0"}, "no devices");
  // Each rank of ncclCommInitAll gets a thread at the group's end: 70000 started 70000 threads.
  std::vector<ncclComm_t> many(70000);
  ExpectFails(ncclCommInitAll(many.data(), 70000, nullptr), ncclInvalidArgument, {"ncclCommInitAll", "ndev 70000", "4096"},
              "70000 ranks");
  // Inside a group the refusal fails the group's end too, as NCCL's: a program that checks only
  // ncclGroupEnd went on with a NULL communicator (until session 41 the end succeeded).
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ExpectFails(ncclCommInitRank(&comm, 2, id, 5), ncclInvalidArgument, {"rank 5 is not a rank of a world of 2"},
              "a bad rank in a group");
  ExpectFails(ncclGroupEnd(), ncclInvalidArgument, {"rank 5 is not a rank of a world of 2"}, "the group's end");
  EXPECT_EQ(comm, nullptr);
}

// A config that NCCL 2.28 refuses is refused here too, naming the field and its value, though
// ucclzip uses none of its fields: a program learns of it before it moves to NCCL (until
// session 43 only the magic was checked). The fields a config's size or version does not cover
// are not read: an older program's struct ends earlier.
TEST(NcclMisuse, ConfigsThatNcclRefusesAreRefused) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << LastError();
  ncclComm_t comm = nullptr;
  ncclConfig_t uninitialised;
  std::memset(&uninitialised, 0, sizeof(uninitialised));
  uninitialised.size = sizeof(uninitialised);
  ExpectFails(ncclCommInitRankConfig(&comm, 1, id, 0, &uninitialised), ncclInvalidArgument,
              {"ncclCommInitRankConfig (rank 0 of 1)", "not initialised with NCCL_CONFIG_INITIALIZER"}, "no magic");
  struct Bad {
    void (*set)(ncclConfig_t&);
    std::string says;
  };
  const Bad bad[] = {
      {[](ncclConfig_t& c) { c.blocking = 2; }, "config.blocking is 2; NCCL takes 0 or 1"},
      {[](ncclConfig_t& c) { c.cgaClusterSize = -1; }, "config.cgaClusterSize is -1"},
      {[](ncclConfig_t& c) { c.minCTAs = 0; }, "config.minCTAs is 0; NCCL takes 1 or more"},
      {[](ncclConfig_t& c) { c.maxCTAs = -3; }, "config.maxCTAs is -3"},
      {[](ncclConfig_t& c) { c.minCTAs = 8, c.maxCTAs = 4; }, "config.minCTAs is 8; NCCL takes at most maxCTAs, 4"},
      {[](ncclConfig_t& c) { c.minCTAs = 8; }, "config.minCTAs is 8; NCCL takes it only with a maxCTAs"},
      {[](ncclConfig_t& c) { c.splitShare = 2; }, "config.splitShare is 2"},
      {[](ncclConfig_t& c) { c.collnetEnable = -1; }, "config.collnetEnable is -1"},
      {[](ncclConfig_t& c) { c.CTAPolicy = 4; }, "config.CTAPolicy is 4; NCCL takes NCCL_CTA_POLICY_* flags"},
      {[](ncclConfig_t& c) { c.CTAPolicy = -1; }, "config.CTAPolicy is -1"},
      {[](ncclConfig_t& c) { c.shrinkShare = 3; }, "config.shrinkShare is 3"},
      {[](ncclConfig_t& c) { c.nvlsCTAs = 0; }, "config.nvlsCTAs is 0"},
      {[](ncclConfig_t& c) { c.nChannelsPerNetPeer = 0; }, "config.nChannelsPerNetPeer is 0"},
      {[](ncclConfig_t& c) { c.nvlinkCentricSched = 7; }, "config.nvlinkCentricSched is 7"},
  };
  for (const Bad& b : bad) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    b.set(config);
    comm = reinterpret_cast<ncclComm_t>(&config);  // overwritten with NULL on failure
    ExpectFails(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument,
                {"ncclCommInitRankConfig (rank 0 of 1)", b.says}, b.says);
    EXPECT_EQ(comm, nullptr);
  }
  // In a group the refusal fails the group's end too.
  ncclConfig_t blocking_two = NCCL_CONFIG_INITIALIZER;
  blocking_two.blocking = 2;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ExpectFails(ncclCommInitRankConfig(&comm, 1, id, 0, &blocking_two), ncclInvalidArgument, {"config.blocking is 2"},
              "in a group");
  ExpectFails(ncclGroupEnd(), ncclInvalidArgument, {"config.blocking is 2"}, "the group's end");
  // Fields a config's version or size does not reach hold anything (here 0 in minCTAs and
  // nvlsCTAs, which 2.28 refuses): a 2.16 program's config, and a config whose struct ends
  // before them, are each taken.
  ncclConfig_t older = NCCL_CONFIG_INITIALIZER;
  older.version = NCCL_VERSION(2, 16, 0);
  older.minCTAs = 0;
  older.nvlsCTAs = 0;
  ncclConfig_t shorter = NCCL_CONFIG_INITIALIZER;
  shorter.size = offsetof(ncclConfig_t, cgaClusterSize);
  shorter.minCTAs = 0;
  shorter.nvlsCTAs = 0;
  for (ncclConfig_t* config : {&older, &shorter}) {
    ncclUniqueId fresh;
    ASSERT_EQ(ncclGetUniqueId(&fresh), ncclSuccess) << LastError();
    ASSERT_EQ(ncclCommInitRankConfig(&comm, 1, fresh, 0, config), ncclSuccess) << LastError();
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << LastError();
  }
}

class NcclMisuseOneRank : public NcclOneRank {};

// The communicator creations ucclzip does not have set what they would make to NULL, as NCCL's
// failures do: clean-up code that destroys it destroyed the variable's older handle.
TEST_F(NcclMisuseOneRank, UnsupportedCreationsLeaveNoCommunicator) {
  ncclComm_t made = comm_;
  ExpectFails(ncclCommSplit(comm_, 0, 0, &made, nullptr), ncclInvalidUsage, {"ncclCommSplit", "not supported"}, "split");
  EXPECT_EQ(made, nullptr);
  made = comm_;
  int excluded[1] = {0};
  ExpectFails(ncclCommShrink(comm_, excluded, 1, &made, nullptr, NCCL_SHRINK_DEFAULT), ncclInvalidUsage,
              {"ncclCommShrink", "not supported"}, "shrink");
  EXPECT_EQ(made, nullptr);
  made = comm_;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));  // not looked at
  ExpectFails(ncclCommInitRankScalable(&made, 1, 0, 1, &id, nullptr), ncclInvalidUsage,
              {"ncclCommInitRankScalable", "not supported"}, "scalable init");
  EXPECT_EQ(made, nullptr);
}

TEST_F(NcclMisuseOneRank, BadCountsPeersAndRootsAreRefused) {
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  ExpectFails(ncclAllReduce(x, y, SIZE_MAX, ncclFloat32, ncclSum, comm_, nullptr), ncclInvalidArgument,
              {"rank 0: allreduce (18446744073709551615 elements of fp32, sum)", "overflow"}, "allreduce of SIZE_MAX");
  ExpectFails(ncclAllGather(x, y, SIZE_MAX / 2, ncclFloat64, comm_, nullptr), ncclInvalidArgument, {"rank 0: allgather", "overflow"},
              "allgather of SIZE_MAX / 2");
  for (int peer : {-1, 1, INT_MAX}) {
    ExpectFails(ncclSend(x, 4, ncclFloat32, peer, comm_, nullptr), ncclInvalidArgument,
                {"rank 0: send to peer " + std::to_string(peer), "must be a rank of 1"}, "send");
    ExpectFails(ncclRecv(y, 4, ncclFloat32, peer, comm_, nullptr), ncclInvalidArgument,
                {"rank 0: recv from peer " + std::to_string(peer), "must be a rank of 1"}, "recv");
  }
  ExpectFails(ncclBcast(x, 4, ncclFloat32, INT_MIN, comm_, nullptr), ncclInvalidArgument,
              {"rank 0: broadcast (4 elements of fp32, root -2147483648)", "is not a rank of 1"}, "bcast");
  ExpectFails(ncclReduceScatter(x, y, 4, static_cast<ncclDataType_t>(-1), ncclSum, comm_, nullptr), ncclInvalidArgument,
              {"ncclReduceScatter: datatype -1"}, "reducescatter of a bad type");
  // Nothing to move needs no buffers.
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess) << LastError();
}

// Inside a group that holds calls on the communicator, finalising or destroying it is refused
// (those calls are posted only at the group's end); a destruction queued in a group refuses
// further calls and a second destruction.
TEST_F(NcclMisuseOneRank, LifecycleCallsOutOfOrderAroundAGroupAreRefused) {
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess) << LastError();
  ExpectFails(ncclCommFinalize(comm_), ncclInvalidUsage, {"ncclCommFinalize", "end the group first"}, "finalize in the group");
  ExpectFails(ncclCommDestroy(comm_), ncclInvalidUsage, {"ncclCommDestroy", "end the group first"}, "destroy in the group");
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << LastError();
  EXPECT_EQ(y[3], 4.0f);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess) << LastError();
  ExpectFails(ncclCommDestroy(comm_), ncclInvalidUsage, {"ncclCommDestroy", "already destroyed"}, "a second destroy");
  ExpectFails(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclInvalidUsage,
              {"ncclAllReduce", "destroyed at the end of the open group"}, "a call on a communicator being destroyed");
  int count = 0;
  ExpectFails(ncclCommCount(comm_, &count), ncclInvalidUsage, {"ncclCommCount"}, "count of a communicator being destroyed");
  ExpectFails(ncclGroupEnd(), ncclInvalidUsage, {"ncclAllReduce"}, "the group with the refused call");
  comm_ = nullptr;  // destroyed at the group's end
  ExpectFails(ncclGroupEnd(), ncclInvalidUsage, {"ncclGroupEnd without ncclGroupStart"}, "an extra end");
}

// A handle destroyed already, or one that was never a communicator, is refused by name by every
// call that takes one; used, it read freed memory, and a second ncclCommDestroy freed it twice.
TEST_F(NcclMisuseOneRank, AHandleThatIsNoLongerOrNeverWasACommunicatorIsRefused) {
  ncclComm_t destroyed = comm_;
  ASSERT_EQ(ncclCommDestroy(comm_), ncclSuccess) << LastError();
  comm_ = nullptr;
  int stranger_bytes[64] = {};
  ncclComm_t stranger = reinterpret_cast<ncclComm_t>(stranger_bytes);
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  int value = 0;
  ncclResult_t async = ncclSuccess;
  void* handle = nullptr;
  for (ncclComm_t bad : {destroyed, stranger}) {
    const std::string what = bad == destroyed ? "a destroyed communicator" : "a pointer to other memory";
    const std::vector<std::string> says = {"is not a communicator"};
    ExpectFails(ncclCommDestroy(bad), ncclInvalidArgument, says, what + ", destroyed");
    ExpectFails(ncclCommAbort(bad), ncclInvalidArgument, says, what + ", aborted");
    ExpectFails(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, bad, nullptr), ncclInvalidArgument, says, what + ", allreduce");
    ExpectFails(ncclCommCount(bad, &value), ncclInvalidArgument, says, what + ", count");
    ExpectFails(ncclCommCuDevice(bad, &value), ncclInvalidArgument, says, what + ", device");
    ExpectFails(ncclCommGetAsyncError(bad, &async), ncclInvalidArgument, says, what + ", async error");
    ExpectFails(ncclCommFinalize(bad), ncclInvalidArgument, says, what + ", finalize");
    ExpectFails(ncclCommRegister(bad, x, sizeof(x), &handle), ncclInvalidArgument, says, what + ", register");
  }
}

// As in NCCL, destroying or aborting a null communicator does nothing and succeeds, so that
// clean-up code that checks every result works unchanged, in a group too.
TEST(NcclMisuse, DestroyingOrAbortingANullCommunicatorDoesNothing) {
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
}

}  // namespace
}  // namespace ucclzip::nccl
