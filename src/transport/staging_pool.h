// A bounded pool of equal staging blocks carved from one allocation made at creation (pinned
// host memory for CUDA), so that the staged path never allocates per message.
//
// Every peer's transfers share a pool, and a staged send holds its block until its receiver
// takes the data, which may wait on another peer's transfer: rank 0 sends to ranks 1 and 2 in
// one group while rank 1 first waits for what rank 2 relays. Had the send to rank 1 taken every
// block, the send to rank 2 would never start, and the timeout would fail healthy peers. So a
// pool may keep blocks for peers that hold none: a peer that holds some takes another only
// while more stay free than min(reserved, the other peers holding none), and a peer holding
// none may take any free block. Up to `reserved` + 1 peers then each get a block whatever the
// order of their sends (the send pool reserves for up to 7: staging_path.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/staging_engine.h"

namespace ucclzip::transport {

class StagingPool {
 public:
  // `ranks`: the world, whose every rank but the pool's own may take blocks.
  static absl::StatusOr<std::unique_ptr<StagingPool>> Create(StagingEngine& engine, size_t block_bytes, size_t blocks,
                                                             int ranks, size_t reserved);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A free block for a transfer with `peer`, or nullptr when none is free for it.
  uint8_t* Acquire(int peer);
  void Release(uint8_t* block, int peer);
  size_t block_bytes() const { return block_bytes_; }
  size_t blocks() const { return blocks_; }
  bool all_free() const { return free_.size() == blocks_; }

 private:
  StagingPool(StagingEngine& engine, uint8_t* memory, size_t block_bytes, size_t blocks, int ranks, size_t reserved);
  StagingEngine& engine_;
  uint8_t* memory_;
  size_t block_bytes_;
  size_t blocks_;
  size_t reserved_;
  std::vector<uint8_t*> free_;
  std::vector<uint32_t> held_;  // per rank
  size_t holding_none_;         // ranks but the pool's own whose held_ is 0
};

}  // namespace ucclzip::transport
