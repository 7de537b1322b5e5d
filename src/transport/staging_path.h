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
  // `pool_bytes` is split between the two directions, at least one block each.
  static absl::StatusOr<std::unique_ptr<StagingPath>> Create(std::unique_ptr<StagingEngine> engine, size_t block_bytes,
                                                             size_t pool_bytes, int device) {
    size_t blocks = std::max<size_t>(1, pool_bytes / block_bytes / 2);
    std::unique_ptr<StagingPath> path(new StagingPath(std::move(engine), device));
    absl::StatusOr<std::unique_ptr<StagingPool>> send = StagingPool::Create(*path->engine_, block_bytes, blocks);
    if (!send.ok()) return send.status();
    absl::StatusOr<std::unique_ptr<StagingPool>> recv = StagingPool::Create(*path->engine_, block_bytes, blocks);
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
