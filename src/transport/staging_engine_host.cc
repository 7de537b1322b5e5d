#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "transport/event_fd.h"
#include "transport/staging_engine.h"

namespace ucclzip::transport {
namespace {

class HostStagingEngine final : public StagingEngine {
 public:
  explicit HostStagingEngine(int copy_done_fd) : copy_done_fd_(copy_done_fd) {}
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* memory = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (memory == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " staging bytes"));
    return memory;
  }
  void Free(void* memory) override { std::free(memory); }
  absl::StatusOr<uint32_t> Start(void* destination, const void* source, size_t bytes, CopyDirection) override {
    std::memcpy(destination, source, bytes);
    if (copy_done_fd_ >= 0) SignalEventFd(copy_done_fd_);
    return 0;
  }
  absl::StatusOr<bool> Poll(uint32_t) override { return true; }

 private:
  const int copy_done_fd_;
};

}  // namespace

std::unique_ptr<StagingEngine> MakeHostStagingEngine(int copy_done_fd) {
  return std::make_unique<HostStagingEngine>(copy_done_fd);
}

}  // namespace ucclzip::transport
