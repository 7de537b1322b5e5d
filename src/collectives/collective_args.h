// Checks of a collective's arguments on the calling rank, before anything is posted: the root,
// types and operators it supports, sizes that overflow, and buffers that overlap other
// than in NCCL's in-place layout. Errors name the rank, the operation and the sizes. Then what
// a checked call becomes: its algorithm by size, and the engine's call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "pipeline/engine.h"
#include "ucclzip/communicator.h"
#include "ucclzip/types.h"

namespace ucclzip::collectives {

struct CollectiveArgs {
  std::string name;  // "rank 2: allreduce (1000 elements of bf16, sum)"
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

// OK, or InvalidArgument explaining what is wrong.
absl::Status CheckArgs(const CollectiveArgs& args);

// Whether a call's schedule, and so its places on its links, can be built even where CheckArgs
// refuses it: its root is a rank, its type is one, and its sizes do not overflow. A refused call
// that can takes its places all the same (pipeline::Call::refused), so that this rank's next
// call pairs with its peers' next one.
bool Schedulable(const CollectiveArgs& args);

// True when sendbuff is exactly recvbuff + in_place_offset elements.
bool InPlace(const CollectiveArgs& args);

// "rank 2: allreduce (1000 elements of bf16, sum)"; `op` for reductions, `root` for broadcast and reduce.
std::string OperationName(int rank, pipeline::OperationKind kind, uint64_t count, DataType dtype, ReduceOp op, int root);

// Whether an operation of `bytes` takes the algorithm built for small messages (recursive
// doubling, the binomial tree) under its option's `limit` in bytes (0: never).
bool TakesSmallAlgorithm(uint64_t bytes, size_t limit);

// The call of a collective of `kind` that CheckArgs refused and whose schedule cannot be built
// (!Schedulable): what it was, without steps, for the notices that tell its peers
// (Communicator::RefusedUnplacedCollective).
pipeline::Call UnschedulableCall(pipeline::OperationKind kind, const CollectiveArgs& args, absl::Status refused);

// The engine's call for a checked collective; `refused`: what CheckArgs said, where not OK.
pipeline::Call MakeCall(pipeline::Schedule schedule, const CollectiveArgs& args, cudaStream_t stream,
                        const CollectiveOptions& options, absl::Status refused = absl::OkStatus());

}  // namespace ucclzip::collectives
