// A kernel that holds every multiprocessor of the current device until the host lets it go, so
// that GPU work this process queues meanwhile, on any stream, cannot start: a stand-in for a
// kernel that never finishes.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace ucclzip::testing {

class GpuStall {
 public:
  // Launches the kernel on a stream of its own and returns once it holds the device.
  static absl::StatusOr<std::unique_ptr<GpuStall>> Start();
  // Lets the kernel end and waits for it.
  absl::Status Release();
  ~GpuStall();

 private:
  GpuStall() = default;
  volatile uint32_t* release_ = nullptr;  // mapped pinned memory, read by the kernel
  uint32_t* held_ = nullptr;              // device memory: blocks that have started
  void* stream_ = nullptr;
  bool released_ = false;
};

}  // namespace ucclzip::testing
