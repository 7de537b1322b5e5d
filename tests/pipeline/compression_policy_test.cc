#include "pipeline/compression_policy.h"

#include <gtest/gtest.h>

namespace ucclzip::pipeline {
namespace {

constexpr uint64_t kBig = 1 << 20;

TEST(CompressionPolicy, ForcedModesAndTypes) {
  CompressionPolicy policy(4096);
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kOn, DataType::kBFloat16, 100, 1, 7));
  EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kOff, DataType::kBFloat16, kBig, 1, 7));
  EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kOn, DataType::kInt32, kBig, 1, 7));
  EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kFloat32, 100, 1, 7));
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kFloat32, kBig, 1, 7));
}

TEST(CompressionPolicy, AutoBypassesATensorThatDidNotCompressThenRetries) {
  CompressionPolicy policy(4096);
  policy.Record(1, 7, kBig, kBig - 10);  // ratio ~1.0
  for (uint32_t i = 0; i < CompressionPolicy::kBypassBlocks; ++i) {
    EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, 7)) << i;
  }
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, 7));
  // Other tensors and peers are unaffected; forcing on still compresses.
  policy.Record(1, 7, kBig, kBig);
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 2, 7));
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, 8));
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kOn, DataType::kBFloat16, kBig, 1, 7));
  // A tensor that compresses keeps compressing.
  policy.Record(3, 9, kBig, kBig / 2);
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 3, 9));
}

}  // namespace
}  // namespace ucclzip::pipeline
