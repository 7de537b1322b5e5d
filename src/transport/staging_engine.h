// Moves blocks between user buffers and staging memory asynchronously, for the staged path
// (UCX cannot read or write device memory). The CUDA engine copies on its own streams and
// tells completion by events; the host engine copies with memcpy, so that tests on machines
// without a GPU drive the same pipeline. Engines are used by the progress thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace ucclzip::transport {

enum class CopyDirection { kToStaging, kFromStaging };

class StagingEngine {
 public:
  virtual ~StagingEngine() = default;
  // The staging memory, allocated once per communicator (pinned memory for CUDA).
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* memory) = 0;
  // Starts a copy and returns a ticket for Poll.
  virtual absl::StatusOr<uint32_t> Start(void* destination, const void* source, size_t bytes,
                                         CopyDirection direction) = 0;
  // True once the copy behind `ticket` is done; the ticket is then spent.
  virtual absl::StatusOr<bool> Poll(uint32_t ticket) = 0;
};

// Copies with memcpy; every copy is done when Start returns.
std::unique_ptr<StagingEngine> MakeHostStagingEngine();

// Copies on `device` with one stream per direction, so that D2H of one block overlaps H2D of
// another. `max_copies` bounds the copies in flight (one per staging block).
absl::StatusOr<std::unique_ptr<StagingEngine>> MakeCudaStagingEngine(int device, size_t max_copies);

}  // namespace ucclzip::transport
