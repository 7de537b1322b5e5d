// GPU tests skip, with the reason, where no usable CUDA device exists (CI has none).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

namespace ucclzip::testing {

// Empty when a CUDA device is usable, else why not.
inline std::string NoGpuReason() {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(err) + ")";
  }
  if (devices == 0) return "no CUDA device on this machine";
  return "";
}

}  // namespace ucclzip::testing

#define UCCLZIP_SKIP_WITHOUT_GPU()                                                   \
  do {                                                                               \
    if (std::string reason = ::ucclzip::testing::NoGpuReason(); !reason.empty())     \
      GTEST_SKIP() << "GPU test skipped: " << reason;                                \
  } while (0)

#define UCCLZIP_CUDA_OK(expr)                                                        \
  do {                                                                               \
    cudaError_t uz_err = (expr);                                                     \
    ASSERT_EQ(uz_err, cudaSuccess) << #expr << ": " << cudaGetErrorString(uz_err);   \
  } while (0)
