#include "transport/staging_pool.h"

#include <algorithm>

namespace ucclzip::transport {

absl::StatusOr<std::unique_ptr<StagingPool>> StagingPool::Create(StagingEngine& engine, size_t block_bytes,
                                                                 size_t blocks, int ranks, size_t reserved) {
  absl::StatusOr<void*> memory = engine.Allocate(block_bytes * blocks);
  if (!memory.ok()) return memory.status();
  return std::unique_ptr<StagingPool>(
      new StagingPool(engine, static_cast<uint8_t*>(*memory), block_bytes, blocks, ranks, reserved));
}

StagingPool::StagingPool(StagingEngine& engine, uint8_t* memory, size_t block_bytes, size_t blocks, int ranks,
                         size_t reserved)
    : engine_(engine),
      memory_(memory),
      block_bytes_(block_bytes),
      blocks_(blocks),
      reserved_(reserved),
      held_(ranks, 0),
      holding_none_(ranks > 0 ? ranks - 1 : 0) {
  for (size_t i = blocks; i-- > 0;) free_.push_back(memory_ + i * block_bytes_);
}

StagingPool::~StagingPool() { engine_.Free(memory_); }

uint8_t* StagingPool::Acquire(int peer) {
  if (free_.empty()) return nullptr;
  if (held_[peer] > 0 && free_.size() <= std::min(reserved_, holding_none_)) return nullptr;
  if (held_[peer]++ == 0) --holding_none_;
  uint8_t* block = free_.back();
  free_.pop_back();
  return block;
}

void StagingPool::Release(uint8_t* block, int peer) {
  free_.push_back(block);
  if (--held_[peer] == 0) ++holding_none_;
}

}  // namespace ucclzip::transport
