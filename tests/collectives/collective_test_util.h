// What the collective tests share: one call of any collective on real buffers (host or
// device), with every rank's input generated from a seed, and a reference computed on the host
// in the documented order (docs/COLLECTIVES.md) with which the output must agree bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collective_reference.h"
#include "tensor_gen.h"
#include "ucclzip/communicator.h"

namespace ucclzip::testing {

inline constexpr Collective kEveryCollective[] = {Collective::kAllGather, Collective::kReduceScatter,
                                                 Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce};

struct CollectiveCase {
  Collective kind = Collective::kAllReduce;
  DataType dtype = DataType::kBFloat16;
  ReduceOp op = ReduceOp::kSum;
  uint64_t count = 0;  // NCCL's count: per rank for allgather (send) and reduce-scatter (recv)
  int root = 0;
  bool in_place = false;
  CompressionMode mode = CompressionMode::kOn;
  Distribution dist{DistKind::kGaussian, 0.02};
  std::string Name() const;
  // `recursive_doubling_bytes`: the communicator's option, which picks the allreduce's order.
  CollectiveShape Shape(int world, uint64_t recursive_doubling_bytes = 0) const {
    return {kind, dtype, op, count, root, world, recursive_doubling_bytes};
  }
};

// Rank `rank`'s input for the case (the same on every rank that asks).
std::vector<uint8_t> CaseInput(const CollectiveCase& c, int world, int rank, uint64_t seed);

// What `comm`'s rank's output must be, from every rank's input, in the documented order (of the
// algorithm that comm's options pick).
std::vector<uint8_t> ReferenceOutput(const CollectiveCase& c, const Communicator& comm, uint64_t seed);

// Runs the case once on `comm` with host or device buffers (device: on `stream`, waiting on
// the stream) and compares the output with the reference; the error names the case.
absl::Status RunAndCheck(Communicator& comm, const CollectiveCase& c, uint64_t seed, bool device = false,
                         cudaStream_t stream = nullptr);

// The cases in one group (GroupStart/GroupEnd; case i's inputs from seed + i), then each output
// compared with its reference. A single case is posted alone.
absl::Status RunAndCheckGroup(Communicator& comm, const std::vector<CollectiveCase>& cases, uint64_t seed,
                              bool device = false, cudaStream_t stream = nullptr);

// A rank's buffer, holding `contents`, in host memory or on the current CUDA device (as the
// bench's TensorBuffer): the tests that run on both pass data() to the call.
class TestBuffer {
 public:
  TestBuffer(std::vector<uint8_t> contents, bool device);
  ~TestBuffer();
  TestBuffer(const TestBuffer&) = delete;
  TestBuffer& operator=(const TestBuffer&) = delete;

  // Whether the device copy was made.
  const absl::Status& status() const { return status_; }
  void* data() { return device_ != nullptr ? device_ : host_.data(); }
  // Fills it with 0xA5, before a checked call, so that a byte the call misses shows.
  absl::Status Clear();
  // What it holds now.
  absl::StatusOr<std::vector<uint8_t>> Read();

 private:
  std::vector<uint8_t> host_;
  void* device_ = nullptr;
  absl::Status status_;
};

// Posts the case's call on buffers already in place.
Operation Post(Communicator& comm, const CollectiveCase& c, const void* send, void* recv, cudaStream_t stream);

}  // namespace ucclzip::testing
