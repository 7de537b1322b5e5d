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

// Counts the plain blocks kAuto sends before it tries tensor 7 of peer 1 again.
uint32_t PlainBlocksBeforeTheNextTry(CompressionPolicy& policy) {
  uint32_t plain = 0;
  while (!policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, 7) && plain < 100'000) ++plain;
  return plain;
}

TEST(CompressionPolicy, EachFailedTryDoublesTheWaitUpToTheLimitAndSuccessResetsIt) {
  CompressionPolicy policy(4096);
  uint32_t expected = CompressionPolicy::kBypassBlocks;
  for (int attempt = 0; attempt < 8; ++attempt) {
    policy.Record(1, 7, kBig, kBig);  // the try did not compress
    EXPECT_EQ(PlainBlocksBeforeTheNextTry(policy), expected) << "attempt " << attempt;
    expected = std::min(2 * expected, CompressionPolicy::kMaxBypassBlocks);
  }
  EXPECT_EQ(expected, CompressionPolicy::kMaxBypassBlocks);
  policy.Record(1, 7, kBig, kBig / 2);  // the data changed and compresses
  EXPECT_EQ(PlainBlocksBeforeTheNextTry(policy), 0u);
  policy.Record(1, 7, kBig, kBig);
  EXPECT_EQ(PlainBlocksBeforeTheNextTry(policy), CompressionPolicy::kBypassBlocks);
}

}  // namespace
}  // namespace ucclzip::pipeline
