// The nvCOMP entry points of a build that found no nvCOMP: each says so and how to get one.
#include "nvcomp_codec.h"

namespace ucclzip::bench {
namespace {

absl::Status NoNvcomp() {
  return absl::FailedPreconditionError(
      "this build has no nvCOMP: install the nvidia-libnvcomp-cu13 wheel and configure with "
      "-Dnvcomp_DIR=<wheel>/nvidia/libnvcomp/lib64/cmake/nvcomp (or CMAKE_PREFIX_PATH=<wheel>/nvidia/libnvcomp)");
}

}  // namespace

absl::StatusOr<std::string> NvcompVersion() { return NoNvcomp(); }

absl::StatusOr<CodecResult> RunNvcompAns(const std::vector<uint8_t>&, DataType, uint64_t, const GpuTimer&) {
  return NoNvcomp();
}

}  // namespace ucclzip::bench
