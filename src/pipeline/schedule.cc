#include "pipeline/schedule.h"

#include <algorithm>

namespace ucclzip::pipeline {

const char* OperationKindName(OperationKind kind) {
  switch (kind) {
    case OperationKind::kSendRecv: return "sendrecv";
    case OperationKind::kAllGather: return "allgather";
    case OperationKind::kReduceScatter: return "reducescatter";
    case OperationKind::kAllReduce: return "allreduce";
    case OperationKind::kBroadcast: return "broadcast";
    case OperationKind::kReduce: return "reduce";
  }
  return "invalid";
}

uint32_t BlockCount(uint64_t count, uint64_t block_elements) {
  return static_cast<uint32_t>(std::max<uint64_t>((count + block_elements - 1) / block_elements, 1));
}

uint64_t PipelineBlockElements(uint64_t operation_count, size_t element_size, uint64_t block_bytes,
                               uint64_t min_block_bytes, uint32_t chain_hops) {
  constexpr uint64_t kRounding = uint64_t{64} << 10;
  const uint64_t blocks = kMinBlocksPerOperation * (uint64_t{std::max<uint32_t>(chain_hops, 1)} + 1) / 2;
  const uint64_t most = std::max<uint64_t>(block_bytes / element_size, 1);
  const uint64_t share = operation_count / blocks + (operation_count % blocks != 0);
  if (share >= most || min_block_bytes >= block_bytes) return most;  // (share * element_size cannot overflow below)
  const uint64_t rounded = (share * element_size + kRounding - 1) / kRounding * kRounding;
  // min_block_bytes * kMinBlocksPerOperation / blocks, rounded down, without overflow.
  const uint64_t least =
      min_block_bytes / blocks * kMinBlocksPerOperation + min_block_bytes % blocks * kMinBlocksPerOperation / blocks;
  return std::max<uint64_t>(std::min(block_bytes, std::max(least, rounded)) / element_size, 1);
}

namespace {

// Orders the blocks of `steps` steps (step s: blocks(s) blocks, to or from peer_of(s)) onto
// their links: on each, a group of group_of(peer) blocks of each of its steps after the other.
template <typename Blocks, typename PeerOf, typename GroupOf>
std::vector<std::vector<StepBlock>> OrderLinks(size_t steps, Blocks blocks, PeerOf peer_of, GroupOf group_of,
                                               int world_size) {
  // Each peer's steps, in step order: a ring step's peer is one of two, so walking every step
  // once per peer would cost world_size times the steps (milliseconds per call at 1024 ranks).
  std::vector<std::vector<size_t>> steps_of(world_size);
  for (size_t s = 0; s < steps; ++s) steps_of[peer_of(s)].push_back(s);
  std::vector<std::vector<StepBlock>> links(world_size);
  for (int peer = 0; peer < world_size; ++peer) {
    uint32_t most = 0;
    for (size_t s : steps_of[peer]) most = std::max(most, blocks(s));
    const uint32_t group_blocks = group_of(peer);
    for (uint32_t group = 0; group < most; group += group_blocks) {
      for (size_t s : steps_of[peer]) {
        for (uint32_t b = group; b < std::min(group + group_blocks, blocks(s)); ++b) {
          links[peer].push_back({static_cast<int>(s), b});
        }
      }
    }
  }
  return links;
}

}  // namespace

LinkOrder LinkOrderOf(const Schedule& schedule, uint64_t block_elements, int world_size, int rank) {
  return LinkOrder{
      .sends = OrderLinks(
          schedule.sends.size(), [&](size_t s) { return BlockCount(schedule.sends[s].chunk.count, block_elements); },
          [&](size_t s) { return schedule.sends[s].peer; },
          [&](int peer) { return LinkGroupBlocks(rank, peer, world_size); }, world_size),
      .recvs = OrderLinks(
          schedule.recvs.size(), [&](size_t s) { return BlockCount(schedule.recvs[s].count, block_elements); },
          [&](size_t s) { return schedule.recvs[s].peer; },
          [&](int peer) { return LinkGroupBlocks(peer, rank, world_size); }, world_size)};
}

}  // namespace ucclzip::pipeline
