// The shim's pieces below the C API: which ncclResult_t each kind of failure becomes, the
// last error kept per thread, and the one setting it reads from the environment itself.
#include <gtest/gtest.h>
#include <nccl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nccl/comm.h"
#include "nccl/environment.h"
#include "nccl/status.h"
#include "gpu_test.h"
#include "nccl_one_rank.h"
#include "ucclzip/communicator.h"

namespace ucclzip::nccl {
namespace {

TEST(NcclStatus, EveryKindOfFailureHasItsNcclResult) {
  EXPECT_EQ(ResultOf(absl::OkStatus()), ncclSuccess);
  EXPECT_EQ(ResultOf(absl::InvalidArgumentError("")), ncclInvalidArgument);
  EXPECT_EQ(ResultOf(absl::OutOfRangeError("")), ncclInvalidArgument);
  EXPECT_EQ(ResultOf(absl::FailedPreconditionError("")), ncclInvalidUsage);
  EXPECT_EQ(ResultOf(absl::UnimplementedError("")), ncclInvalidUsage);
  for (const absl::Status& remote : {absl::UnavailableError(""), absl::DeadlineExceededError(""), absl::DataLossError(""),
                                     absl::AbortedError(""), absl::CancelledError("")}) {
    EXPECT_EQ(ResultOf(remote), ncclRemoteError) << remote;
  }
  EXPECT_EQ(ResultOf(absl::InternalError("")), ncclInternalError);
  EXPECT_EQ(ResultOf(absl::ResourceExhaustedError("")), ncclSystemError);
  EXPECT_EQ(ResultOf(absl::PermissionDeniedError("")), ncclSystemError);
}

TEST(NcclStatus, TheLastErrorIsPerThreadAndKeptOverSuccesses) {
  EXPECT_EQ(Report(absl::InvalidArgumentError("rank 1: allreduce: bad")), ncclInvalidArgument);
  EXPECT_EQ(Report(absl::OkStatus()), ncclSuccess);
  EXPECT_STREQ(LastError(), "rank 1: allreduce: bad");
  std::thread([] { EXPECT_STREQ(LastError(), ""); }).join();
}

class NcclEnvironment : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("UCCLZIP_BOOTSTRAP_TIMEOUT"); }
};

TEST_F(NcclEnvironment, TheBootstrapTimeoutComesFromTheEnvironmentWhereSet) {
  absl::StatusOr<absl::Duration> timeout = BootstrapTimeoutFromEnvironment(absl::Seconds(60));
  ASSERT_TRUE(timeout.ok()) << timeout.status();
  EXPECT_EQ(*timeout, absl::Seconds(60));
  setenv("UCCLZIP_BOOTSTRAP_TIMEOUT", "7", 1);
  timeout = BootstrapTimeoutFromEnvironment(absl::Seconds(60));
  ASSERT_TRUE(timeout.ok()) << timeout.status();
  EXPECT_EQ(*timeout, absl::Seconds(7));
}

TEST_F(NcclEnvironment, AMalformedBootstrapTimeoutIsNamed) {
  for (const char* bad : {"0", "1.5", "soon", "86401"}) {
    setenv("UCCLZIP_BOOTSTRAP_TIMEOUT", bad, 1);
    absl::StatusOr<absl::Duration> timeout = BootstrapTimeoutFromEnvironment(absl::Seconds(60));
    ASSERT_EQ(timeout.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(timeout.status().message(),
              absl::StrCat("UCCLZIP_BOOTSTRAP_TIMEOUT='", bad, "': expected whole seconds from 1 to 86400"));
  }
}

// A malformed timeout fails ncclCommInitRank before the id is used: rank 0 can start again
// with the same id, whose listening socket was neither taken over nor leaked.
TEST_F(NcclEnvironment, AMalformedBootstrapTimeoutLeavesTheIdUsable) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << LastError();
  setenv("UCCLZIP_BOOTSTRAP_TIMEOUT", "0", 1);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclInvalidArgument);
  EXPECT_TRUE(absl::StrContains(LastError(), "ncclCommInitRank (rank 0 of 1): UCCLZIP_BOOTSTRAP_TIMEOUT='0'"))
      << LastError();
  unsetenv("UCCLZIP_BOOTSTRAP_TIMEOUT");
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << LastError();
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << LastError();
}

// As in NCCL (ncclGroupErrCheck), a call of a group that fails its checks fails the outermost
// ncclGroupEnd too, whichever layer refused it: a type, an operator or a comm the shim itself
// refuses as well as a null buffer that the Communicator refuses. The others of the group are
// still posted, and the next group starts clean.
TEST_F(NcclOneRank, ACallRefusedInAGroupFailsItsGroupEnd) {
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  struct Refused {
    const char* what;
    std::function<ncclResult_t()> call;
    ncclResult_t result;
  };
  const std::vector<Refused> refusals = {
      {"datatype 99", [&] { return ncclAllReduce(in, out, 4, static_cast<ncclDataType_t>(99), ncclSum, comm_, nullptr); },
       ncclInvalidArgument},
      {"reduction operator 7", [&] { return ncclAllReduce(in, out, 4, ncclFloat32, static_cast<ncclRedOp_t>(7), comm_, nullptr); },
       ncclInvalidArgument},
      {"ncclAllGather: comm is NULL", [&] { return ncclAllGather(in, out, 4, ncclFloat32, nullptr, nullptr); },
       ncclInvalidArgument},
      {"null buffer", [&] { return ncclAllReduce(nullptr, out, 4, ncclFloat32, ncclSum, comm_, nullptr); },
       ncclInvalidArgument},
  };
  for (const Refused& refused : refusals) {
    SCOPED_TRACE(refused.what);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);  // nested: only the outermost end reports
    EXPECT_EQ(refused.call(), refused.result);
    EXPECT_TRUE(absl::StrContains(LastError(), refused.what)) << LastError();
    EXPECT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess) << LastError();
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << LastError();
    EXPECT_EQ(ncclGroupEnd(), refused.result);
    EXPECT_TRUE(absl::StrContains(LastError(), refused.what)) << LastError();
    // Only the call and its group's end return an argument error, as in NCCL: it is not the
    // communicator's async error (a watchdog polling it would abort the job over it).
    ncclResult_t async = ncclInternalError;
    EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
    EXPECT_EQ(out[3], 4.0f);  // the group's valid call ran
    out[3] = 0;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess) << LastError();
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << LastError();
    EXPECT_EQ(out[3], 4.0f);
  }
}

// Some calls are refused only when their group is posted, at ncclGroupEnd: a self-send without
// its receive, calls that race for a buffer. On a stream the group's end does not wait for its
// calls, and until session 40 it returned success for them: the refusal surfaced only as the
// communicator's async error, and the stream ran on as if the call had been made (found by
// review). It must fail the group's end, as any argument error does, and not the communicator.
class NcclOneRankDevice : public NcclOneRank {};

TEST_F(NcclOneRankDevice, ACallRefusedWhenItsGroupIsPostedFailsTheGroupsEndOnAStream) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* data = nullptr;
  ASSERT_EQ(cudaMalloc(&data, 4096), cudaSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclSend(data, 1024, ncclFloat32, 0, comm_, stream), ncclSuccess) << LastError();
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_TRUE(absl::StrContains(LastError(), "send to peer 0")) << LastError();
  ncclResult_t async = ncclInternalError;
  EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  // The communicator goes on: a paired self-transfer on the same stream runs.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclSend(data, 512, ncclFloat32, 0, comm_, stream), ncclSuccess) << LastError();
  EXPECT_EQ(ncclRecv(static_cast<float*>(data) + 512, 512, ncclFloat32, 0, comm_, stream), ncclSuccess) << LastError();
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << LastError();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaFree(data);
  cudaStreamDestroy(stream);
}

// ncclCommInitAll creates its ranks on a thread each at the group's end. A process out of
// threads used to end there (an uncaught std::system_error); now no creation runs and the call
// fails, naming why. The child (a fresh process: gtest's threadsafe death test) runs as
// nobody with no thread to spare (RLIMIT_NPROC 0, which root would ignore).
TEST(NcclGroupEnd, AProcessOutOfThreadsGetsAnErrorNotAnAbort) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to become a user whose thread limit holds";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto init_all_out_of_threads = [] {
    const rlimit no_threads{0, 0};
    if (setuid(65534) != 0 || setrlimit(RLIMIT_NPROC, &no_threads) != 0) _exit(3);
    const auto open_descriptors = [] {
      return std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator());
    };
    const auto open_before = open_descriptors();
    ncclComm_t comms[2] = {nullptr, nullptr};
    const int devices[2] = {0, 0};  // any machine with a GPU has device 0
    const ncclResult_t result = ncclCommInitAll(comms, 2, devices);
    std::fprintf(stderr, "result %d: %s\n", static_cast<int>(result), LastError());
    if (result != ncclSystemError) _exit(1);
    // The id's listening socket, which rank 0's creation would have taken, is not left open.
    _exit(open_descriptors() == open_before ? 0 : 2);
  };
  EXPECT_EXIT(init_all_out_of_threads(), ::testing::ExitedWithCode(0),
              "result 2: ncclGroupEnd: could not start a thread for each of its 2");
}

// The profiling twins are the shim's own functions: a tool that interposes on ncclAllReduce and
// calls on through pncclAllReduce stays on ucclzip's communicator.
TEST_F(NcclOneRank, TheProfilingTwinsAreTheShimsFunctions) {
  int count = 0;
  EXPECT_EQ(pncclCommCount(comm_, &count), ncclSuccess) << LastError();
  EXPECT_EQ(count, 1);
  float in[3] = {1, 2, 3}, out[3] = {};
  EXPECT_EQ(pncclAllReduce(in, out, 3, ncclFloat32, ncclMax, comm_, nullptr), ncclSuccess) << LastError();
  EXPECT_EQ(out[2], 3.0f);
  EXPECT_EQ(pncclAllReduce(in, out, 3, static_cast<ncclDataType_t>(99), ncclSum, comm_, nullptr), ncclInvalidArgument);
  EXPECT_TRUE(absl::StrContains(LastError(), "ncclAllReduce: datatype 99")) << LastError();
}

// A non-blocking communicator created in a group whose creation fails: NCCL sets the failure
// as the communicator's async error (ncclCommSetAsyncError for !config.blocking), which is
// what a program that polls ncclCommGetAsyncError after ncclGroupEnd reads. Here the id is
// not one of ncclGetUniqueId's, so the creation fails at the group's end.
TEST(NcclAsyncError, ACommunicatorWhoseCreationFailedInAGroupReportsIt) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclSuccess) << LastError();
  ASSERT_NE(comm, nullptr);
  // Until the group's end creates it, its async error is ncclInProgress, as NCCL's; a watchdog
  // thread may poll it meanwhile (under ThreadSanitizer: the creation's writes race no read).
  ncclResult_t pending = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &pending), ncclSuccess);
  EXPECT_EQ(pending, ncclInProgress);
  std::atomic<bool> ended{false};
  std::thread watchdog([&] {
    while (!ended.load()) {
      ncclResult_t polled = ncclSuccess;
      EXPECT_EQ(ncclCommGetAsyncError(comm, &polled), ncclSuccess);
    }
  });
  const ncclResult_t created = ncclGroupEnd();
  ended.store(true);
  watchdog.join();
  ASSERT_NE(created, ncclSuccess);
  ASSERT_NE(created, ncclInProgress);
  const std::string why = LastError();
  ncclResult_t async_error = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &async_error), ncclSuccess);
  EXPECT_EQ(async_error, created) << "the async error of a communicator whose creation failed with " << why;
  int count = 0;
  EXPECT_EQ(ncclCommCount(comm, &count), ncclInvalidUsage);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << LastError();
}

// ncclCommFinalize waits for the communicator's operations and never reports success while one
// is still running: the caller would free buffers that are still in use. It used to wait one
// operation timeout and then report the failures so far, which were none for a receive that
// fails only a moment after that (its timeout counts from when it stopped making progress).
// The receive is posted through the C++ API: the shim's own calls on host buffers return only
// once they are done. Both ranks name device 0, which a machine with a GPU has (the buffers are
// the host's): by default rank 1 would take device 1, which failed the test on a one-GPU machine
// (H100 run s40-1).
TEST(NcclFinalize, NeverSucceedsWhileAnOperationIsStillRunning) {
  setenv("UCCLZIP_OP_TIMEOUT", "0.5", 1);
  ncclComm_t comms[2] = {nullptr, nullptr};
  const int devices[2] = {0, 0};
  const ncclResult_t created = ncclCommInitAll(comms, 2, devices);
  unsetenv("UCCLZIP_OP_TIMEOUT");
  ASSERT_EQ(created, ncclSuccess) << LastError();
  std::vector<float> never_sent(1024, 1.0f);
  const Operation receive = comms[0]->communicator->Recv(never_sent.data(), never_sent.size(), DataType::kFloat32,
                                                         1, nullptr);
  ASSERT_FALSE(receive.Test()) << receive.Wait(absl::ZeroDuration());
  comms[0]->Track(receive);
  const absl::Time start = absl::Now();
  EXPECT_EQ(ncclCommFinalize(comms[0]), ncclRemoteError) << LastError();
  EXPECT_TRUE(absl::StrContains(LastError(), "rank 0")) << LastError();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (ncclComm_t comm : comms) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << LastError();
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << LastError();
  EXPECT_TRUE(receive.Test());
}

// A call on the null stream returns its own outcome, which is then not the communicator's async
// error (docs/NCCL_API.md: only operations that completed after their call returned are): two
// ranks that disagree on an allreduce's count each get ncclInvalidArgument from the call, and
// ncclCommGetAsyncError still says ncclSuccess (until session 41 it said ncclInvalidArgument too,
// and ncclCommFinalize failed with it).
TEST(NcclAsyncError, ANullStreamCallsOwnFailureIsNotTheAsyncError) {
  ncclComm_t comms[2] = {nullptr, nullptr};
  const int devices[2] = {0, 0};  // a machine with a GPU has device 0; the buffers are the host's
  ASSERT_EQ(ncclCommInitAll(comms, 2, devices), ncclSuccess) << LastError();
  std::vector<float> in(8, 1.0f), out(8);
  ncclResult_t results[2] = {ncclSuccess, ncclSuccess};
  std::thread other([&] { results[1] = ncclAllReduce(in.data(), out.data(), 8, ncclFloat32, ncclSum, comms[1], nullptr); });
  std::vector<float> out0(4);
  results[0] = ncclAllReduce(in.data(), out0.data(), 4, ncclFloat32, ncclSum, comms[0], nullptr);
  other.join();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(results[rank], ncclInvalidArgument) << "rank " << rank;
    ncclResult_t async_error = ncclInternalError;
    EXPECT_EQ(ncclCommGetAsyncError(comms[rank], &async_error), ncclSuccess);
    EXPECT_EQ(async_error, ncclSuccess) << "rank " << rank;
    EXPECT_EQ(ncclCommFinalize(comms[rank]), ncclSuccess) << "rank " << rank << ": " << LastError();
  }
  for (ncclComm_t comm : comms) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << LastError();
}

// NCCL's own single-process example destroys its ranks one after another, outside a group. Each
// rank's end waits for the others, so until session 41 the first destruction waited the whole
// shutdown timeout, and every rank then warned that it closed without the others. A rank
// destroyed while others of its communicator in this process are live is now ended with the last
// of them; finalised first or not, and with a rank aborted among them, which waits for none.
class NcclDestroyOneByOne : public ::testing::TestWithParam<std::string> {};

TEST_P(NcclDestroyOneByOne, DoesNotWaitForTheRanksStillToBeDestroyed) {
  const std::string how = GetParam();
  setenv("UCCLZIP_SHUTDOWN_TIMEOUT", "5", 1);
  ncclComm_t comms[3] = {nullptr, nullptr, nullptr};
  const int devices[3] = {0, 0, 0};  // a machine with a GPU has device 0; the buffers are the host's
  const ncclResult_t created = ncclCommInitAll(comms, 3, devices);
  unsetenv("UCCLZIP_SHUTDOWN_TIMEOUT");
  ASSERT_EQ(created, ncclSuccess) << LastError();
  std::vector<std::vector<float>> in(3, std::vector<float>(1000)), out(3, std::vector<float>(1000));
  for (int r = 0; r < 3; ++r) std::fill(in[r].begin(), in[r].end(), float(r + 1));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ncclAllReduce(in[r].data(), out[r].data(), 1000, ncclFloat32, ncclSum, comms[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << LastError();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r][999], 6.0f);
  if (how == "finalized") {
    for (ncclComm_t comm : comms) EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess) << LastError();
  }
  const absl::Time start = absl::Now();
  for (int r = 0; r < 3; ++r) {
    if (how == "one_aborted" && r == 1) {
      EXPECT_EQ(ncclCommAbort(comms[r]), ncclSuccess) << LastError();
    } else {
      EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess) << LastError();
    }
    int count = 0;
    EXPECT_EQ(ncclCommCount(comms[r], &count), ncclInvalidArgument) << "rank " << r << " is still a communicator";
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(3)) << "the ranks waited for each other's destruction";
}

INSTANTIATE_TEST_SUITE_P(, NcclDestroyOneByOne, ::testing::Values("destroyed", "finalized", "one_aborted"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ucclzip::nccl
