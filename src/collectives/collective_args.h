// Checks of a collective's arguments on the calling rank, before anything is posted: the root,
// types and operators it supports, sizes that overflow, and buffers that overlap other
// than in NCCL's in-place layout. Errors name the rank, the operation and the sizes. Then what
// a checked call becomes: its algorithm by size, and the engine's call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "pipeline/engine.h"
#include "ucclzip/communicator.h"
#include "ucclzip/types.h"

namespace ucclzip::collectives {

struct CollectiveArgs {
  pipeline::OperationKind kind = pipeline::OperationKind::kAllReduce;
  int rank = 0;  // the calling rank
  const void* sendbuff = nullptr;
  const void* recvbuff = nullptr;
  uint64_t count = 0;          // the caller's count (at most world_size times it is read or written)
  uint64_t send_elements = 0;  // what the operation reads of sendbuff
  uint64_t recv_elements = 0;  // what it writes of recvbuff
  // sendbuff == recvbuff + in_place_offset elements is NCCL's in-place layout (negative where
  // recvbuff lies inside sendbuff, as for reduce-scatter). Computed in unsigned arithmetic: a
  // count too large, which CheckArgs then refuses, wraps instead of overflowing a signed product.
  int64_t in_place_offset = 0;
  DataType dtype = DataType::kRaw;
  bool reduces = false;
  ReduceOp op = ReduceOp::kSum;
  int world_size = 1;
  std::optional<int> root;  // broadcast's and reduce's: must be a rank
};

// OK, or InvalidArgument explaining what is wrong, the call named as OperationName names it.
absl::Status CheckArgs(const CollectiveArgs& args);

// True when sendbuff is exactly recvbuff + in_place_offset elements.
bool InPlace(const CollectiveArgs& args);

// "rank 2: allreduce (1000 elements of bf16, sum)": the op for reductions, the root for
// broadcast and reduce.
std::string OperationName(const CollectiveArgs& args);

// Whether an operation of `bytes` takes the algorithm built for small messages (recursive
// doubling, the binomial tree) under its option's `limit` in bytes (0: never).
bool TakesSmallAlgorithm(uint64_t bytes, size_t limit);

// What a collective call becomes for the engine: its arguments checked, and its schedule built
// by `schedule` (told whether the call is in place). A call that CheckArgs refuses still gets
// its schedule where one can be built (its root is a rank, its type is one, its sizes do not
// overflow), and so takes its places on its links (pipeline::Call::refused): this rank's next
// call then pairs with its peers' next one. Where none can be built, `placed` is false and the
// call is what was called, without steps, for the notices that tell its peers
// (Communicator::RefusedUnplacedCollective).
struct CollectiveCall {
  pipeline::Call call;
  bool placed = true;
};
CollectiveCall BuildCall(const CollectiveArgs& args, cudaStream_t stream, const CollectiveOptions& options,
                         absl::FunctionRef<pipeline::Schedule(bool in_place)> schedule);

}  // namespace ucclzip::collectives
