// What a collective must return, computed on the CPU from every rank's input in the order that
// docs/COLLECTIVES.md documents, through the public API alone: the tests and the benchmarks
// check results against it bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "ucclzip/types.h"

namespace ucclzip::testing {

enum class Collective { kAllGather, kReduceScatter, kAllReduce, kBroadcast, kReduce };
const char* CollectiveName(Collective kind);  // "allgather", ...; as the benchmark names them
// Whether the collective takes a reduction operator, and whether it takes a root.
bool Reduces(Collective kind);
bool HasRoot(Collective kind);

struct CollectiveShape {
  Collective kind = Collective::kAllReduce;
  DataType dtype = DataType::kBFloat16;
  ReduceOp op = ReduceOp::kSum;
  uint64_t count = 0;  // NCCL's count: per rank for allgather (send) and reduce-scatter (recv)
  int root = 0;
  int world = 1;
  // The communicator's CommunicatorOptions::recursive_doubling_bytes: an allreduce of at most
  // this many bytes (0: none) combines in recursive doubling's order, not the ring's.
  uint64_t recursive_doubling_bytes = 0;
};

// Elements one rank reads from its send buffer and writes to its receive buffer.
uint64_t SendElements(const CollectiveShape& shape);
uint64_t RecvElements(const CollectiveShape& shape);

// Rank `rank`'s output, from `inputs` (one per rank, SendElements each); empty for the ranks of
// a reduce other than its root, which receive nothing.
std::vector<uint8_t> ReferenceOutput(const CollectiveShape& shape, const std::vector<std::vector<uint8_t>>& inputs, int rank);

}  // namespace ucclzip::testing
