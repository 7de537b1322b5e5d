// The compress-or-not decision with the rates injected (never timed): forced modes and types,
// the throughput model (off where the codec is the bottleneck, on where the link is, rare probes,
// a change of speed noticed), and the memory of tensors that did not compress.
#include "pipeline/compression_policy.h"

#include <gtest/gtest.h>

namespace ucclzip::pipeline {
namespace {

using transport::MemoryType;

constexpr uint64_t kBig = 1 << 20;
constexpr MemoryType kHost = MemoryType::kHost;
constexpr uint32_t kBlocks = 64;  // blocks in each message decided on: the pipeline overlaps them

// Feeds `blocks` plain sends to `peer` at `link` bytes/s and as many encodes at `codec` bytes/s
// (0: none), one block after the other, with a ratio of `ratio`, on a clock of its own.
void Observe(CompressionPolicy& policy, int peer, MemoryType memory, double link, double codec, double ratio, int blocks = 32) {
  static absl::Time clock = absl::UnixEpoch();
  for (int i = 0; i < blocks; ++i) {
    if (link > 0) {
      policy.PlainSendStarted(peer, memory, kBig, clock);
      clock += absl::Seconds(kBig / link);
      policy.PlainSendDone(peer, memory, kBig, true, clock);
    }
    if (codec > 0) {
      policy.EncodeStarted(memory, kBig, clock);
      clock += absl::Seconds(kBig / codec);
      policy.EncodeDone(memory, kBig, true, clock);
      policy.Record(peer, memory, 1000 + peer, kBig, static_cast<uint64_t>(kBig / ratio));
    }
  }
}

// Of `blocks` auto decisions for tensor 7 of `peer`, how many compress.
int Compressed(CompressionPolicy& policy, int peer, MemoryType memory, int blocks) {
  int compressed = 0;
  for (int i = 0; i < blocks; ++i) compressed += policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, kBlocks, peer, memory, 7);
  return compressed;
}

TEST(CompressionPolicy, ForcedModesAndTypes) {
  CompressionPolicy policy(4096);
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kOn, DataType::kBFloat16, 100, kBlocks, 1, kHost, 7));
  EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kOff, DataType::kBFloat16, kBig, kBlocks, 1, kHost, 7));
  EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kOn, DataType::kInt32, kBig, kBlocks, 1, kHost, 7));
  EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kFloat32, 100, kBlocks, 1, kHost, 7));
  // Auto learns the link first (plain blocks cost no codec time), then the codec.
  EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kFloat32, kBig, kBlocks, 1, kHost, 7));
  Observe(policy, 1, kHost, 1e9, 0, 0);
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kFloat32, kBig, kBlocks, 1, kHost, 7));
}

TEST(CompressionPolicy, AutoIsOffWhereTheCodecIsTheBottleneckAndOnWhereTheLinkIs) {
  CompressionPolicy policy(4096);
  // The 2-core CPU machine: a 0.3 GB/s CPU codec against 2.7 GB/s of shared memory.
  Observe(policy, 1, kHost, 2.7e9, 0.3e9, 1.5);
  EXPECT_NEAR(*policy.link_rate(1, kHost), 2.7e9, 1e7);
  EXPECT_NEAR(*policy.codec_rate(kHost), 0.3e9, 1e6);
  EXPECT_LE(Compressed(policy, 1, kHost, 4000), 10);  // probes only
  // A 1 Gbit/s link to another peer, the same codec: compressed goes 1.5 times as fast.
  Observe(policy, 2, kHost, 0.125e9, 0, 0);
  EXPECT_GE(Compressed(policy, 2, kHost, 4000), 3990);
  // Device memory keeps its own estimates: a GPU codec at 20 GB/s against a 135 GB/s direct
  // path does not pay; against 4 GB/s of staged tcp it does.
  Observe(policy, 1, MemoryType::kDevice, 135e9, 20e9, 1.5);
  EXPECT_LE(Compressed(policy, 1, MemoryType::kDevice, 4000), 10);
  Observe(policy, 3, MemoryType::kDevice, 4e9, 0, 0);
  EXPECT_GE(Compressed(policy, 3, MemoryType::kDevice, 4000), 3990);
  // A near tie stays uncompressed: 1.03 times the link's rate is within the margin.
  CompressionPolicy tie(4096);
  Observe(tie, 1, kHost, 1e9, 1.03e9, 1.5);
  EXPECT_LE(Compressed(tie, 1, kHost, 1000), 10);
}

TEST(CompressionPolicy, AMessageOfFewBlocksOverlapsLessAndNeedsAFasterCodec) {
  // A 0.3 GB/s codec on a 1 Gbit/s link: pays for long messages, not for one block, whose
  // encode, transfer and decode follow each other (6 times the link's rate would be needed).
  CompressionPolicy policy(4096);
  Observe(policy, 1, kHost, 0.125e9, 0.3e9, 1.5);
  auto decide = [&](uint32_t blocks) {
    return policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, blocks, 1, kHost, 11);
  };
  EXPECT_FALSE(decide(1));
  EXPECT_TRUE(decide(16));
  CompressionPolicy fast(4096);
  Observe(fast, 1, kHost, 0.125e9, 1e9, 1.5);  // 8 times the link
  EXPECT_TRUE(fast.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, 1, kHost, 11));
}

TEST(CompressionPolicy, ProbesGetRarerAndAChangeOfSpeedIsNoticed) {
  CompressionPolicy policy(4096);
  Observe(policy, 1, kHost, 2.7e9, 0.3e9, 1.5);
  std::vector<int> probes;
  for (int i = 0; i < 20000; ++i) {
    if (policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, kBlocks, 1, kHost, 7)) probes.push_back(i);
  }
  ASSERT_GE(probes.size(), 4u);
  for (size_t i = 2; i < probes.size(); ++i) EXPECT_GE(probes[i] - probes[i - 1], probes[i - 1] - probes[i - 2]);
  EXPECT_GE(probes.front(), int(CompressionPolicy::kFirstCompressedProbe) - 1);
  EXPECT_LE(probes.back() - probes[probes.size() - 2], int(CompressionPolicy::kMaxCompressedProbe));
  // The link slows to 0.1 GB/s (congestion): the plain blocks' samples move the estimate, and
  // compression pays from then on.
  Observe(policy, 1, kHost, 0.1e9, 0, 0, 16);
  EXPECT_GE(Compressed(policy, 1, kHost, 1000), 990);
}

TEST(CompressionPolicy, AutoBypassesATensorThatDidNotCompressThenRetries) {
  CompressionPolicy policy(4096);
  Observe(policy, 1, kHost, 0.1e9, 1e9, 1.5);
  Observe(policy, 2, kHost, 0.1e9, 0, 0);
  Observe(policy, 3, kHost, 0.1e9, 0, 0);
  policy.Record(1, kHost, 7, kBig, kBig - 10);  // ratio ~1.0
  for (uint32_t i = 0; i < CompressionPolicy::kBypassBlocks; ++i) {
    EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, kBlocks, 1, kHost, 7)) << i;
  }
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, kBlocks, 1, kHost, 7));
  // Other tensors and peers are unaffected; forcing on still compresses.
  policy.Record(1, kHost, 7, kBig, kBig);
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, kBlocks, 2, kHost, 7));
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, kBlocks, 1, kHost, 8));
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kOn, DataType::kBFloat16, kBig, kBlocks, 1, kHost, 7));
  // A tensor that compresses keeps compressing.
  policy.Record(3, kHost, 9, kBig, kBig / 2);
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, kBlocks, 3, kHost, 9));
}

// Counts the plain blocks kAuto sends before it tries tensor 7 of peer 1 again.
uint32_t PlainBlocksBeforeTheNextTry(CompressionPolicy& policy) {
  uint32_t plain = 0;
  while (!policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, kBlocks, 1, kHost, 7) && plain < 100'000) ++plain;
  return plain;
}

TEST(CompressionPolicy, EachFailedTryDoublesTheWaitUpToTheLimitAndSuccessResetsIt) {
  CompressionPolicy policy(4096);
  Observe(policy, 1, kHost, 0.1e9, 1e9, 1.5);
  uint32_t expected = CompressionPolicy::kBypassBlocks;
  for (int attempt = 0; attempt < 8; ++attempt) {
    policy.Record(1, kHost, 7, kBig, kBig);  // the try did not compress
    EXPECT_EQ(PlainBlocksBeforeTheNextTry(policy), expected) << "attempt " << attempt;
    expected = std::min(2 * expected, CompressionPolicy::kMaxBypassBlocks);
  }
  EXPECT_EQ(expected, CompressionPolicy::kMaxBypassBlocks);
  policy.Record(1, kHost, 7, kBig, kBig / 2);  // the data changed and compresses
  EXPECT_EQ(PlainBlocksBeforeTheNextTry(policy), 0u);
  policy.Record(1, kHost, 7, kBig, kBig);
  EXPECT_EQ(PlainBlocksBeforeTheNextTry(policy), CompressionPolicy::kBypassBlocks);
}

}  // namespace
}  // namespace ucclzip::pipeline
