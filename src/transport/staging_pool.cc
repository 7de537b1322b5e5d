#include "transport/staging_pool.h"

namespace ucclzip::transport {

absl::StatusOr<std::unique_ptr<StagingPool>> StagingPool::Create(StagingEngine& engine, size_t block_bytes,
                                                                 size_t blocks) {
  absl::StatusOr<void*> memory = engine.Allocate(block_bytes * blocks);
  if (!memory.ok()) return memory.status();
  return std::unique_ptr<StagingPool>(new StagingPool(engine, static_cast<uint8_t*>(*memory), block_bytes, blocks));
}

StagingPool::StagingPool(StagingEngine& engine, uint8_t* memory, size_t block_bytes, size_t blocks)
    : engine_(engine), memory_(memory), block_bytes_(block_bytes), blocks_(blocks) {
  for (size_t i = blocks; i-- > 0;) free_.push_back(memory_ + i * block_bytes_);
}

StagingPool::~StagingPool() { engine_.Free(memory_); }

uint8_t* StagingPool::Acquire() {
  if (free_.empty()) return nullptr;
  uint8_t* block = free_.back();
  free_.pop_back();
  return block;
}

void StagingPool::Release(uint8_t* block) { free_.push_back(block); }

}  // namespace ucclzip::transport
