// Which device allocations may go to UCX directly, and which must be staged because their
// addresses once belonged to another allocation that went directly.
//
// A peer's UCX (cuda_ipc) maps the device memory we hand it and caches the mapping by address.
// When that memory is freed and a new allocation takes its addresses, the peer finds the cached
// mapping stale on the next transfer there and closes it on our behalf, and that close can wait
// for its device to idle while the pipeline's stream waits keep the device busy until the very
// transfer completes: both ranks hang (docs/TRANSPORT.md, "Known gaps"). A buffer at recycled
// addresses is therefore staged through pinned host memory, which no peer maps.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace ucclzip::transport {

// One allocation as the driver knows it: its address range and the id that no other
// allocation in this process ever gets, even at the same addresses.
struct DeviceAllocation {
  uintptr_t base = 0;
  size_t size = 0;
  uint64_t buffer_id = 0;
};

// The allocation that holds `pointer` (cuPointerGetAttributes), or why the driver cannot say.
absl::StatusOr<DeviceAllocation> FindDeviceAllocation(const void* pointer);

// The allocations that went directly, which never overlap one another: an allocation that
// overlaps one of them is another allocation at recycled addresses, and is never admitted.
class DirectAllocations {
 public:
  // True when `allocation` may go directly: it is one already admitted, or it overlaps none
  // (it is admitted now). False when it overlaps an admitted allocation with another id.
  bool Admit(const DeviceAllocation& allocation) ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  absl::Mutex mutex_;
  absl::btree_map<uintptr_t, DeviceAllocation> by_base_ ABSL_GUARDED_BY(mutex_);
};

// The one record per process: peers cache mappings per process, whichever communicator or
// UCX context the memory went through.
DirectAllocations& ProcessDirectAllocations();

}  // namespace ucclzip::transport
