// What one operation does on one rank, as the pipeline runs it: a list of steps, each sending a
// chunk of elements to a peer or receiving one from a peer, plus local copies. The collectives
// layer builds schedules (one algorithm per file in src/collectives); Send and Recv are the
// simplest, one step each. Every step's chunk is cut into pipeline blocks, and a send step may
// take its block b from receive step r's block b: as received (forwarded frames, no re-coding)
// or after it was reduced with local data (re-encoded).
//
// Ordering, which both ends of a link derive from their own schedules (LinkOrderOf below): the
// blocks a rank sends to one peer take transport sequences in groups of LinkGroupBlocks blocks,
// group-major (the group's blocks of every send step to that peer, in step order, then the next
// group), and the peer numbers its receives from this rank the same way. A ring's block is
// thereby sent on a group's length of places after it arrived, so that the blocks after it keep
// the link busy while it is reduced or forwarded, and never further, so that bounded receive
// slots cannot deadlock a ring (docs/COLLECTIVES.md, "Link order").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ucclzip/types.h"

namespace ucclzip::pipeline {

// What kind of operation a schedule belongs to; it travels in every block envelope so that
// ranks that called different operations fail with an error naming both.
enum class OperationKind : uint8_t {
  kSendRecv = 0,
  kAllGather = 1,
  kReduceScatter = 2,
  kAllReduce = 3,
  kBroadcast = 4,
  kReduce = 5,
};
const char* OperationKindName(OperationKind kind);
// True for the values an OperationKind may hold; envelopes are checked with it.
constexpr bool IsValidOperationKind(uint8_t value) { return value <= static_cast<uint8_t>(OperationKind::kReduce); }
// Whether the kind combines elements with a reduction operator, and whether it has a root: what
// its name and the checks of its envelopes include besides the count and type.
constexpr bool KindReduces(OperationKind kind) {
  return kind == OperationKind::kReduceScatter || kind == OperationKind::kAllReduce || kind == OperationKind::kReduce;
}
constexpr bool KindHasRoot(OperationKind kind) { return kind == OperationKind::kBroadcast || kind == OperationKind::kReduce; }

// The caller's two buffers: what it passed as input (sendbuff) and output (recvbuff).
enum class BufferRole : uint8_t { kInput, kOutput };

// `count` elements starting at element `first` of one of the caller's buffers.
struct Chunk {
  BufferRole buffer = BufferRole::kInput;
  uint64_t first = 0;
  uint64_t count = 0;
};

struct SendStep {
  enum class Source : uint8_t {
    kChunk,    // the chunk's elements, encoded (or not) by the compression policy
    kForward,  // receive step `recv_step`'s blocks exactly as they arrived
    kReduced,  // receive step `recv_step`'s result (received op local), encoded (or not)
  };
  int peer = 0;
  Chunk chunk;  // for kChunk the source; otherwise only its count matters
  Source source = Source::kChunk;
  // kForward, kReduced: the receive step whose blocks this step sends. kChunk: optionally a
  // receive step whose block b must have been written before block b is read (-1: none).
  int recv_step = -1;
};

struct RecvStep {
  int peer = 0;
  uint64_t count = 0;
  // Where the result goes (always the output buffer); unset: it stays in the block's scratch
  // for a kReduced send step, which then releases it.
  std::optional<Chunk> into;
  // Set: the result is combine(received, local chunk) instead of the received elements.
  std::optional<Chunk> reduce_with;
  // The result is divided by this after combining (avg's last hop); 1 otherwise.
  uint32_t divisor = 1;
  // Where a step combines with what another step of the same count touches, block b of it waits,
  // once landed, until block b of receive step `after_recv` is done (reduce_with reads that
  // step's result) and block b of send step `after_send` has completed (that send reads what
  // this result overwrites). -1: no such step. Recursive doubling needs both: it keeps its
  // running result in the output buffer.
  int after_recv = -1;
  int after_send = -1;
};

struct LocalCopy {
  Chunk from;
  Chunk to;
};

struct Schedule {
  OperationKind kind = OperationKind::kSendRecv;
  ReduceOp op = ReduceOp::kSum;  // the combining operator of every reducing receive
  int root = -1;                 // broadcast's or reduce's root, else -1
  uint64_t count = 0;            // the operation's count as the caller gave it
  // A collective's place among its communicator's collective calls (wrapping), set as it takes
  // its places (Engine::Queue): the same on every rank of a call, as they post their
  // collectives in the same order. Checked by each receive, where a message a disagreement left
  // behind would otherwise pass for this call's.
  uint32_t ordinal = 0;
  std::string name;              // "send to peer 1", "allreduce": what errors call it
  // How many links every block crosses one after the other: n - 1 along a chain of n ranks, 1
  // elsewhere. A chain's data is cut into more blocks (PipelineBlockElements), so that its last
  // rank starts receiving sooner. The same on every rank of a call, as its count is.
  uint32_t chain_hops = 1;
  std::vector<SendStep> sends;
  std::vector<RecvStep> recvs;
  // Done beside the transfers once the caller's stream allows, so they must not touch what a
  // send reads or a receive writes.
  std::vector<LocalCopy> copies;
};

// The pipeline blocks a chunk of `count` elements is cut into (at least one, for empty chunks).
uint32_t BlockCount(uint64_t count, uint64_t block_elements);

// How many blocks an operation's data is cut into at least, where that leaves each block at least
// the smallest block size: with one block per message nothing overlaps the first block's encode
// and the last one's decode, which are the whole codec time.
inline constexpr uint64_t kMinBlocksPerOperation = 4;

// Elements per pipeline block of an operation whose caller gave `operation_count` elements of
// `element_size` bytes and whose blocks cross `chain_hops` links in a row (Schedule::chain_hops).
// It is cut into B = kMinBlocksPerOperation * (chain_hops + 1) / 2 blocks: 4 for one hop, 8 for
// a chain of 4 ranks. Along a chain the last rank waits chain_hops - 1 block times for its first
// block, so B blocks take about (B + chain_hops - 1) block times, against B for one hop: with
// this B, at most about 1.5 times as long, 1.25 times for a chain of 4 ranks. A block is a B-th
// of the bytes (rounded up to 64 KiB), but at least min_block_bytes * kMinBlocksPerOperation / B
// (`min_block_bytes` for one hop) and at most `block_bytes`, in whole elements. Every rank of
// the operation knows its count and its schedule's hops, so both ends of every link cut alike;
// `min_block_bytes` at or above `block_bytes` gives fixed blocks of `block_bytes`.
uint64_t PipelineBlockElements(uint64_t operation_count, size_t element_size, uint64_t block_bytes,
                               uint64_t min_block_bytes, uint32_t chain_hops = 1);

// How many consecutive blocks of each step a link carries before the next step's: how many
// places after its arrival a ring sends a block on. On the links along which rings and chains
// send blocks on (a rank to its successor, from 3 ranks up) kRelayLinkGroupBlocks: the two
// blocks on their way land together, and with a group of 2 the link then waited while the first
// was reduced or forwarded; with 4 the next two are on their way meanwhile (benchmarks/RESULTS.md,
// twenty-fifth and twenty-ninth sessions). Elsewhere kLinkGroupBlocks. A receive pool holds more
// slots than its link's group (the deadlock bound, docs/COLLECTIVES.md). Protocol constants:
// both ends of every link must order alike.
inline constexpr uint32_t kLinkGroupBlocks = 2;
inline constexpr uint32_t kRelayLinkGroupBlocks = 4;
constexpr uint32_t LinkGroupBlocks(int from, int to, int world_size) {
  return world_size >= 3 && to == (from + 1) % world_size ? kRelayLinkGroupBlocks : kLinkGroupBlocks;
}

// The one peer whose blocks a rank forwards (SendStep::Source::kForward) in every algorithm:
// rings and chains send on only what they receive from their predecessor, and with fewer than
// three ranks nothing is forwarded (-1). The engine gives pinned host frames to that peer's
// receive slots alone; the schedule tests hold every algorithm to it.
constexpr int ForwardedPeer(int rank, int world) { return world >= 3 ? (rank + world - 1) % world : -1; }

// One block of one step of a schedule.
struct StepBlock {
  int step = 0;
  uint32_t block = 0;
  bool operator==(const StepBlock&) const = default;
};

// Per peer, the blocks of rank `rank`'s schedule's sends to it and receives from it in
// transport sequence order (the order above).
struct LinkOrder {
  std::vector<std::vector<StepBlock>> sends;
  std::vector<std::vector<StepBlock>> recvs;
};
LinkOrder LinkOrderOf(const Schedule& schedule, uint64_t block_elements, int world_size, int rank);

}  // namespace ucclzip::pipeline
