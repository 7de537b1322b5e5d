// What the staged path of one memory kind needs: a copy engine and a pool per direction.
// Separate send and receive pools keep a burst of receives from starving the sends that the
// peers' receives wait for.
#pragma once

#include <algorithm>
#include <memory>

#include "absl/status/statusor.h"
#include "transport/staging_engine.h"
#include "transport/staging_pool.h"

namespace ucclzip::transport {

class StagingPath {
 public:
  // Peers for whose first send block the send pool keeps room (staging_pool.h): sends to up to
  // kReservedPeers + 1 peers that depend on each other all start, whichever came first.
  static constexpr size_t kReservedPeers = 7;
  // Blocks the send pool holds beyond its `blocks` in a world of `ranks`: one per peer it
  // reserves for, so that sends to one peer still have `blocks` (a ring sends to one), and at
  // most half as many again, so that pools of a few large blocks (the direct path's, 256 MB
  // each, for buffers at recycled addresses) do not grow by whole blocks: they reserve none.
  static size_t ReservedBlocks(int ranks, size_t blocks) {
    return std::min({ranks > 2 ? static_cast<size_t>(ranks - 2) : size_t{0}, kReservedPeers, blocks / 2});
  }
  // The blocks per direction of `pool_bytes`: half each, at least one.
  static size_t BlocksPerDirection(size_t block_bytes, size_t pool_bytes) {
    return std::max<size_t>(1, pool_bytes / block_bytes / 2);
  }

  // `pool_bytes` is split between the two directions, at least one block each; the send pool
  // has ReservedBlocks(ranks, blocks) more.
  static absl::StatusOr<std::unique_ptr<StagingPath>> Create(std::unique_ptr<StagingEngine> engine, size_t block_bytes,
                                                             size_t pool_bytes, int ranks, int device) {
    const size_t blocks = BlocksPerDirection(block_bytes, pool_bytes);
    std::unique_ptr<StagingPath> path(new StagingPath(std::move(engine), device));
    const size_t reserved = ReservedBlocks(ranks, blocks);
    absl::StatusOr<std::unique_ptr<StagingPool>> send =
        StagingPool::Create(*path->engine_, block_bytes, blocks + reserved, ranks, reserved);
    if (!send.ok()) return send.status();
    // Receives take a block only once their message has arrived (transport_progress.cc), so
    // they never wait on each other holding one: nothing to reserve.
    absl::StatusOr<std::unique_ptr<StagingPool>> recv = StagingPool::Create(*path->engine_, block_bytes, blocks, ranks, 0);
    if (!recv.ok()) return recv.status();
    path->send_pool_ = std::move(*send);
    path->recv_pool_ = std::move(*recv);
    return path;
  }

  // A copy may still run where a drain ran out of time: its staging memory outlives it.
  ~StagingPath() { engine_->WaitForCopies(); }
  StagingPath(const StagingPath&) = delete;
  StagingPath& operator=(const StagingPath&) = delete;

  StagingEngine& engine() { return *engine_; }
  StagingPool& send_pool() { return *send_pool_; }
  StagingPool& recv_pool() { return *recv_pool_; }
  int device() const { return device_; }

 private:
  StagingPath(std::unique_ptr<StagingEngine> engine, int device) : engine_(std::move(engine)), device_(device) {}
  std::unique_ptr<StagingEngine> engine_;  // declared first: the pools free their memory through it
  std::unique_ptr<StagingPool> send_pool_;
  std::unique_ptr<StagingPool> recv_pool_;
  int device_;
};

}  // namespace ucclzip::transport
