#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "transport/staging_engine.h"

namespace ucclzip::transport {
namespace {

class HostStagingEngine final : public StagingEngine {
 public:
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* memory = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (memory == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " staging bytes"));
    return memory;
  }
  void Free(void* memory) override { std::free(memory); }
  absl::StatusOr<uint32_t> Start(void* destination, const void* source, size_t bytes, CopyDirection) override {
    std::memcpy(destination, source, bytes);
    return 0;
  }
  absl::StatusOr<bool> Poll(uint32_t) override { return true; }
};

}  // namespace

std::unique_ptr<StagingEngine> MakeHostStagingEngine() { return std::make_unique<HostStagingEngine>(); }

}  // namespace ucclzip::transport
