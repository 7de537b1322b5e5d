#include "pipeline_test_util.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ucclzip::testing {

std::string WithCudaTransports(const std::string& tls) {
  const char* cuda_ucx = std::getenv("UCCLZIP_TEST_CUDA_UCX");
  return cuda_ucx != nullptr && std::string(cuda_ucx) == "1" ? tls + ",cuda_copy,cuda_ipc" : tls;
}

transport::TransportOptions PipelineOptions(const std::string& tls) {
  transport::TransportOptions options;
  options.ucx_transports = WithCudaTransports(tls);
  options.block_bytes = size_t{64} << 10;
  options.staging_pool_bytes = size_t{1} << 20;
  options.pipeline_block_bytes = size_t{256} << 10;
  options.min_compress_bytes = 0;
  options.op_timeout = absl::Seconds(30);
  return options;
}

transport::TransportOptions ShortTimeoutOptions() {
  transport::TransportOptions options = PipelineOptions();
  options.op_timeout = absl::Seconds(3);
  options.shutdown_timeout = absl::Seconds(3);
  return options;
}

absl::Status ExpectSameBytes(const uint8_t* got, const uint8_t* want, size_t bytes, const std::string& what) {
  if (bytes == 0 || std::memcmp(got, want, bytes) == 0) return absl::OkStatus();
  size_t first = 0, wrong = 0;
  for (size_t i = bytes; i-- > 0;) {
    if (got[i] != want[i]) {
      first = i;
      ++wrong;
    }
  }
  return absl::DataLossError(absl::StrCat(what, ": ", wrong, " of ", bytes, " bytes differ, first at ", first));
}

absl::Status WaitOk(const Operation& operation, const std::string& what) {
  absl::Status status = operation.Wait(absl::Seconds(60));
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

}  // namespace ucclzip::testing
