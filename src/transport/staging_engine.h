// Moves blocks between user buffers and staging memory asynchronously, for the staged path
// (UCX cannot read or write device memory). The CUDA engine copies on its own streams and
// tells completion by events; the host engine copies with memcpy, so that tests on machines
// without a GPU drive the same pipeline. Engines are used by the progress thread only.
//
// An engine given an eventfd (`copy_done_fd` >= 0) also signals it once per finished copy, so
// that the progress thread may sleep while copies run (CommunicatorOptions::staging_copy_wakeups)
// instead of polling them. The signal comes after the copy is done: a Poll of its ticket made
// after the signal was seen returns true.
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
  // Returns once no copy started here still reads or writes memory (its tickets stay unspent):
  // before staging memory is freed, and before the buffers the copies touch go back to their
  // owners. An engine whose copies are done when Start returns has nothing to wait for.
  virtual void WaitForCopies() {}
};

// Copies with memcpy; every copy is done, and `copy_done_fd` signalled, when Start returns.
std::unique_ptr<StagingEngine> MakeHostStagingEngine(int copy_done_fd);

// Copies on `device` with one stream per direction, so that D2H of one block overlaps H2D of
// another. `max_copies` bounds the copies in flight (one per staging block). `copy_done_fd` is
// signalled by a CUDA host function queued behind each copy; the destructor synchronises the
// streams, so none runs after the engine is gone (the fd must stay open until then).
absl::StatusOr<std::unique_ptr<StagingEngine>> MakeCudaStagingEngine(int device, size_t max_copies, int copy_done_fd);

}  // namespace ucclzip::transport
