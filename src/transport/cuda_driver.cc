#include "transport/cuda_driver.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"

namespace ucclzip::transport {

absl::StatusOr<void*> FindDriverFunction(const char* name, int cuda_version) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err = cudaGetDriverEntryPointByVersion(name, &function, cuda_version, cudaEnableDefault, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || function == nullptr) {
    cudaGetLastError();
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA driver offers no ", name, " (as of CUDA ", cuda_version / 1000, ".", cuda_version % 1000 / 10,
                     "): ", cudaGetErrorString(err)));
  }
  return function;
}

}  // namespace ucclzip::transport
