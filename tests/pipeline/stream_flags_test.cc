// The stream hold (stream_flags.h) on a real GPU: work queued behind a held stream waits until
// the host signals, then runs, on a stream of the program's own and on the legacy default
// stream that a call without a stream uses. Under the CUDA MPS daemon a held call went wrong on
// the H200 (benchmarks/RESULTS.md, eighteenth session); benchmarks/gpu/collectives-mps.sh runs
// these first there, so that the hold itself is tested apart from the pipeline. Skipped where
// there is no GPU.
#include "pipeline/stream_flags.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/gpu_test.h"

namespace ucclzip::pipeline {
namespace {

absl::Status Cuda(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
}

// Holds `stream`, queues a memset of a device buffer and an event behind the hold, checks that
// neither has run after a while, signals, and checks that the memset then ran.
absl::Status HoldThenRelease(StreamFlags& flags, cudaStream_t stream) {
  constexpr size_t kBytes = 4096;
  constexpr uint8_t kValue = 0x5A;
  void* buffer = nullptr;
  if (absl::Status s = Cuda(cudaMalloc(&buffer, kBytes), "cudaMalloc"); !s.ok()) return s;
  cudaEvent_t behind = nullptr;
  absl::Status status = Cuda(cudaMemset(buffer, 0, kBytes), "cudaMemset");
  status.Update(Cuda(cudaEventCreateWithFlags(&behind, cudaEventDisableTiming), "cudaEventCreate"));
  absl::StatusOr<StreamFlags::Ticket> ticket = absl::InternalError("not queued");
  if (status.ok()) {
    ticket = flags.EnqueueWait(stream);
    status.Update(ticket.status());
  }
  if (status.ok()) {
    status.Update(Cuda(cudaMemsetAsync(buffer, kValue, kBytes, stream), "cudaMemsetAsync behind the hold"));
    status.Update(Cuda(cudaEventRecord(behind, stream), "cudaEventRecord behind the hold"));
  }
  if (status.ok()) {
    absl::SleepFor(absl::Milliseconds(50));
    const cudaError_t query = cudaEventQuery(behind);
    if (query == cudaSuccess) status = absl::FailedPreconditionError("the work behind the hold ran before the signal");
    if (query != cudaSuccess && query != cudaErrorNotReady) status = Cuda(query, "cudaEventQuery while held");
  }
  if (ticket.ok()) flags.Signal(*ticket);  // never leave the stream held, whatever failed
  if (status.ok()) status = Cuda(cudaEventSynchronize(behind), "cudaEventSynchronize after the signal");
  std::vector<uint8_t> back(kBytes);
  if (status.ok()) status = Cuda(cudaMemcpy(back.data(), buffer, kBytes, cudaMemcpyDeviceToHost), "cudaMemcpy back");
  if (status.ok()) {
    for (size_t i = 0; i < kBytes; ++i) {
      if (back[i] != kValue) {
        status = absl::DataLossError(absl::StrCat("byte ", i, " is ", int{back[i]}, " after the release, not ", int{kValue}));
        break;
      }
    }
  }
  if (behind != nullptr) cudaEventDestroy(behind);
  cudaFree(buffer);
  return status;
}

// The device's flags, once they have held and released `stream` (HoldThenRelease).
absl::StatusOr<StreamFlags*> FlagsThatHeldAndReleased(cudaStream_t stream) {
  absl::StatusOr<StreamFlags*> flags = StreamFlags::ForDevice(0);
  if (!flags.ok()) return flags.status();
  if (absl::Status held = HoldThenRelease(**flags, stream); !held.ok()) return held;
  return flags;
}

TEST(PipelineDeviceStreamFlags, HoldTheProgramsStreamUntilSignalled) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  absl::StatusOr<StreamFlags*> flags = StreamFlags::ForDevice(0);
  ASSERT_TRUE(flags.ok()) << flags.status();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (int round = 0; round < 3; ++round) {  // the flags are reused with rising targets
    const absl::Status held = HoldThenRelease(**flags, stream);
    EXPECT_TRUE(held.ok()) << "round " << round << ": " << held;
  }
  cudaStreamDestroy(stream);
}

TEST(PipelineDeviceStreamFlags, HoldTheLegacyDefaultStreamUntilSignalled) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  const absl::StatusOr<StreamFlags*> flags = FlagsThatHeldAndReleased(nullptr);
  EXPECT_TRUE(flags.ok()) << flags.status();
}

// The flags outlive every communicator, and a cudaDeviceReset, which unregisters them, has them
// registered again by the next communicator's ForDevice: the same flags hold and release a
// stream of the new context. (ctest runs each test in a process of its own, so the reset
// touches no other test.)
TEST(PipelineDeviceStreamFlags, TheSameFlagsHoldAgainAfterADeviceReset) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  const absl::StatusOr<StreamFlags*> before = FlagsThatHeldAndReleased(nullptr);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  absl::StatusOr<StreamFlags*> after = StreamFlags::ForDevice(0);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, *before);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const absl::Status again = HoldThenRelease(**after, stream);
  EXPECT_TRUE(again.ok()) << again;
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace ucclzip::pipeline
