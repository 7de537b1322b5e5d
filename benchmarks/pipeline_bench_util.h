// What the multi-rank benchmarks (sendrecv, weightsync, the collectives) share: parsing
// --compress, choosing the device, tensors in host or device memory, and exchanging results
// among the ranks through the communicator itself.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench_stats.h"
#include "ucclzip/communicator.h"

namespace ucclzip::bench {

absl::StatusOr<CompressionMode> ParseCompression(const std::string& text);
// "off,on" and the like: one or more modes, each at most once.
absl::StatusOr<std::vector<CompressionMode>> ParseCompressionList(const std::string& text);
const char* CompressionName(CompressionMode mode);

// A communicator with `options`, their transports and pipeline block size from --tls and
// --pipeline_block.
absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const BootstrapConfig& bootstrap,
                                                                 CommunicatorOptions options = {});

// --memory: true for device, false for host, an error otherwise. For device it makes the rank's
// device (local_rank modulo the devices) current.
absl::StatusOr<bool> UseDeviceMemory(int local_rank);

// Where a benchmark's buffers travel, for its output: "host" (host buffers), "direct" (device
// buffers taken by UCX) or "staged" (device buffers copied through pinned host memory).
const char* PathName(const Communicator& comm, bool device);

// Every rank's values (the same number from each), in rank order, through an uncompressed
// allgather; like any operation, it fails when it waits for a peer longer than the operation
// timeout.
absl::StatusOr<std::vector<double>> GatherDoubles(Communicator& comm, const std::vector<double>& mine);
// Returns once every rank has called it.
absl::Status Barrier(Communicator& comm);

// Repeats `round` (untimed calls, one per mode) until `at_least` has passed on the slowest rank.
// An idle GPU runs at low clocks, and the few --warmup calls of a small message are over long
// before it wakes, so small device messages were timed at idle clocks without this. The ranks
// agree when to stop through GatherDoubles after each batch of rounds (the batches double), so
// that every rank makes the same calls, as collectives need. Nothing for a zero duration.
absl::Status WarmUp(Communicator& comm, absl::Duration at_least, absl::FunctionRef<absl::Status()> round);

// DataLoss where the checks found `wrong` bytes, for the reporting rank to return once its rows
// are printed (the #wrong column shows where): the benchmark then exits non-zero, as nccl-tests
// does, so that no script takes the figures of a run that delivered wrong data.
absl::Status CheckedElements(uint64_t wrong);

// The CUDA stream of a benchmark's device calls: the legacy default stream (null), or a stream
// of its own, created cudaStreamNonBlocking and destroyed with it.
class BenchStream {
 public:
  // `name`: legacy, or nonblocking (device memory only).
  static absl::StatusOr<std::unique_ptr<BenchStream>> Create(const std::string& name, bool device);
  ~BenchStream();
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Bytes in host or device memory (device when `device`), copied from `contents`.
class TensorBuffer {
 public:
  static absl::StatusOr<std::unique_ptr<TensorBuffer>> Create(const std::vector<uint8_t>& contents, bool device);
  ~TensorBuffer();
  void* data() { return device_ != nullptr ? device_ : host_.data(); }
  // Overwrites the contents (before a checked receive, so that bytes it misses count as wrong),
  // done when it returns: a receive on a stream of the benchmark's own would not wait for it.
  absl::Status Clear();
  // Writes `contents` at byte `offset` (an in-place call's input, before each call).
  absl::Status Write(const std::vector<uint8_t>& contents, uint64_t offset);
  // Number of elements of `element_bytes` from byte `offset` on that differ from `want` in any
  // bit (nccl-tests' #wrong counts elements); an error where a device buffer cannot be read back
  // (a count from stale host bytes would be no count).
  absl::StatusOr<uint64_t> CountWrong(const std::vector<uint8_t>& want, size_t element_bytes, uint64_t offset = 0);

 private:
  std::vector<uint8_t> host_;
  void* device_ = nullptr;
};

}  // namespace ucclzip::bench
