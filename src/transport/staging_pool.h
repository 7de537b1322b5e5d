// A bounded pool of equal staging blocks carved from one allocation made at creation (pinned
// host memory for CUDA), so that the staged path never allocates per message.
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
  static absl::StatusOr<std::unique_ptr<StagingPool>> Create(StagingEngine& engine, size_t block_bytes, size_t blocks);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A free block, or nullptr when all are in use.
  uint8_t* Acquire();
  void Release(uint8_t* block);
  size_t block_bytes() const { return block_bytes_; }
  size_t blocks() const { return blocks_; }
  bool all_free() const { return free_.size() == blocks_; }

 private:
  StagingPool(StagingEngine& engine, uint8_t* memory, size_t block_bytes, size_t blocks);
  StagingEngine& engine_;
  uint8_t* memory_;
  size_t block_bytes_;
  size_t blocks_;
  std::vector<uint8_t*> free_;
};

}  // namespace ucclzip::transport
