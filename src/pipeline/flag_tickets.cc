#include "pipeline/flag_tickets.h"

#include <atomic>

namespace ucclzip::pipeline {
namespace {
// Whether `value` is at or above `target`, modulo 2^32 as the stream wait compares them.
bool Reached(uint32_t value, uint32_t target) { return static_cast<int32_t>(value - target) >= 0; }
}  // namespace

std::optional<FlagTicket> FlagTickets::Take() {
  absl::MutexLock lock(&mutex_);
  const uint32_t count = static_cast<uint32_t>(issued_.size());
  for (uint32_t tried = 0; tried < count; ++tried) {
    const uint32_t index = next_;
    next_ = next_ + 1 == count ? 0 : next_ + 1;
    if (!Reached(std::atomic_ref<uint32_t>(flags_[index]).load(std::memory_order_acquire), issued_[index])) continue;
    return FlagTicket{.index = index, .target = ++issued_[index]};
  }
  return std::nullopt;
}

void FlagTickets::Signal(FlagTicket ticket) {
  std::atomic_ref<uint32_t> flag(flags_[ticket.index]);
  uint32_t seen = flag.load(std::memory_order_relaxed);
  while (!Reached(seen, ticket.target) && !flag.compare_exchange_weak(seen, ticket.target, std::memory_order_release)) {
  }
}

}  // namespace ucclzip::pipeline
