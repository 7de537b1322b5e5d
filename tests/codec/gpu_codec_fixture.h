// What the GPU codec tests share: device buffers with guards, a codec with a stream, and what
// they ask of a frame.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "gpu_test.h"
#include "ucclzip/codec.h"

namespace ucclzip::testing {

// A device buffer with guard bytes on both sides, to catch writes outside it.
class DeviceBuffer {
 public:
  static constexpr size_t kGuard = 256;
  explicit DeviceBuffer(size_t bytes, size_t misalign = 0) : bytes_(bytes), misalign_(misalign) {
    EXPECT_EQ(cudaMalloc(&base_, bytes + 2 * kGuard + misalign), cudaSuccess);
    EXPECT_EQ(cudaMemset(base_, 0xCD, bytes + 2 * kGuard + misalign), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(base_); }
  uint8_t* get() { return static_cast<uint8_t*>(base_) + kGuard + misalign_; }
  void Upload(const std::vector<uint8_t>& data) {
    ASSERT_LE(data.size(), bytes_);
    ASSERT_EQ(cudaMemcpy(get(), data.data(), data.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<uint8_t> Download(size_t bytes) {
    std::vector<uint8_t> out(bytes);
    EXPECT_EQ(cudaMemcpy(out.data(), get(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  bool GuardsIntact() {
    std::vector<uint8_t> all(bytes_ + 2 * kGuard + misalign_);
    EXPECT_EQ(cudaMemcpy(all.data(), base_, all.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < kGuard + misalign_; ++i) {
      if (all[i] != 0xCD) return false;
    }
    for (size_t i = kGuard + misalign_ + bytes_; i < all.size(); ++i) {
      if (all[i] != 0xCD) return false;
    }
    return true;
  }

 private:
  void* base_ = nullptr;
  size_t bytes_, misalign_;
};

// A GpuCodec for up to kCount elements and a stream of its own; skips without a GPU.
template <uint64_t kCount>
class GpuCodecFixture : public ::testing::Test {
 protected:
  static constexpr uint64_t kMaxCount = kCount;

  void SetUp() override {
    UCCLZIP_SKIP_WITHOUT_GPU();
    auto codec = GpuCodec::Create(kMaxCount);
    ASSERT_TRUE(codec.ok()) << codec.status();
    codec_ = std::move(*codec);
    UCCLZIP_CUDA_OK(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  std::unique_ptr<GpuCodec> codec_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace ucclzip::testing
