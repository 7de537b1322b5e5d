// The algorithms: each builds the schedule (pipeline/schedule.h) one rank runs for one call.
// One algorithm per file, as in UCC; each file also holds the Communicator method that uses it.
// Pure functions of the rank, the world size and the counts, so every rank derives its side of
// every link on its own, and tests can check the schedules without processes.
#pragma once

#include <cstdint>
#include <vector>

#include "pipeline/schedule.h"

namespace ucclzip::collectives {

// The schedule vocabulary every algorithm file speaks.
using pipeline::BufferRole;
using pipeline::Chunk;
using pipeline::Schedule;
using pipeline::SendStep;

pipeline::Schedule SendSchedule(int peer, uint64_t count);
pipeline::Schedule RecvSchedule(int peer, uint64_t count);

// Ring allgather: rank r's block goes round the ring r -> r+1 -> ...; each rank encodes its own
// block once and forwards the others' frames as they arrived. `in_place`: the input already is
// output chunk r, so no local copy.
pipeline::Schedule RingAllGather(int rank, int size, uint64_t sendcount, bool in_place);

// Ring reduce-scatter: chunk c starts at rank c+1 and is combined at every hop (received op
// local), ending at rank c.
pipeline::Schedule RingReduceScatter(int rank, int size, uint64_t recvcount, ReduceOp op, bool in_place);

// Ring allreduce: the reduce-scatter above over near-equal chunks of the count, then a ring
// allgather of the reduced chunks, which forwards their frames without re-coding.
pipeline::Schedule RingAllReduce(int rank, int size, uint64_t count, ReduceOp op, bool in_place);

// Recursive-doubling allreduce: log2(p) exchanges of the whole vector between pairs of ranks (p
// the largest power of two <= size), with a fold before and an unfold after where size is not a
// power of two; the result is a fixed tree over the inputs (docs/COLLECTIVES.md).
pipeline::Schedule RecursiveDoublingAllReduce(int rank, int size, uint64_t count, ReduceOp op, bool in_place);


// Chain broadcast: root -> root+1 -> ... -> root-1, pipelined by blocks; the root encodes once
// and every other rank forwards the frames while it decodes its own copy. The chain's last
// rank acknowledges to the root with an empty message.
pipeline::Schedule ChainBroadcast(int rank, int size, uint64_t count, int root, bool in_place);

// Binomial-tree broadcast: ceil(log2 size) hops from the root; every rank forwards the frames
// it received, as they arrived, to its subtrees, and every leaf answers the root with an empty
// message.
pipeline::Schedule BinomialTreeBroadcast(int rank, int size, uint64_t count, int root, bool in_place);

// Chain reduce: root+1 -> root+2 -> ... -> root, pipelined by blocks; each rank combines
// (received op local) and sends the result on, re-encoded; the root combines into its output
// and answers the chain's head with an empty message. The order is the ring reduce-scatter's
// for chunk `root`.
pipeline::Schedule ChainReduce(int rank, int size, uint64_t count, ReduceOp op, int root, bool in_place);

// A chunk of the caller's buffer: `count` elements from element `first`.
struct ChunkLayout {
  uint64_t first;
  uint64_t count;
};
// Near-equal chunks of `count` over `size` ranks: the first count % size get one more.
std::vector<ChunkLayout> SplitEvenly(uint64_t count, int size);

// Appends the ring reduce-scatter's steps over `chunks` of the input, the result of chunk
// `rank` going to `result`: reduce-scatter's schedule, and the first half of allreduce's.
void AppendRingReduceScatter(pipeline::Schedule& schedule, int rank, int size, const std::vector<ChunkLayout>& chunks,
                             pipeline::Chunk result);

}  // namespace ucclzip::collectives
