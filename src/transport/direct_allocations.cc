#include "transport/direct_allocations.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <iterator>

#include "absl/strings/str_cat.h"
#include "transport/cuda_driver.h"

namespace ucclzip::transport {

absl::StatusOr<DeviceAllocation> FindDeviceAllocation(const void* pointer) {
  static const absl::StatusOr<void*> function = FindDriverFunction("cuPointerGetAttributes", 12000);
  if (!function.ok()) return function.status();
  auto get_attributes = reinterpret_cast<PFN_cuPointerGetAttributes_v7000>(*function);
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                      CU_POINTER_ATTRIBUTE_BUFFER_ID};
  CUdeviceptr base = 0;
  size_t size = 0;
  unsigned long long buffer_id = 0;
  void* values[] = {&base, &size, &buffer_id};
  if (CUresult result = get_attributes(3, attributes, values, reinterpret_cast<CUdeviceptr>(pointer));
      result != CUDA_SUCCESS) {
    return absl::InternalError(absl::StrCat("cuPointerGetAttributes on 0x", absl::Hex(reinterpret_cast<uintptr_t>(pointer)),
                                            ": CUresult ", static_cast<int>(result)));
  }
  return DeviceAllocation{static_cast<uintptr_t>(base), size, buffer_id};
}

bool DirectAllocations::Admit(const DeviceAllocation& allocation) {
  const uintptr_t end = allocation.base + allocation.size;
  absl::MutexLock lock(&mutex_);
  // The admitted allocations are disjoint, so only the last one that starts before this one
  // and the first one that starts within it can overlap it.
  auto next = by_base_.lower_bound(allocation.base);
  if (next != by_base_.end() && next->first < end) return next->second.buffer_id == allocation.buffer_id;
  if (next != by_base_.begin()) {
    const DeviceAllocation& before = std::prev(next)->second;
    if (before.base + before.size > allocation.base) return false;
  }
  by_base_.emplace(allocation.base, allocation);
  return true;
}

DirectAllocations& ProcessDirectAllocations() {
  static DirectAllocations* const allocations = new DirectAllocations;  // never destroyed: used until exit
  return *allocations;
}

}  // namespace ucclzip::transport
