// Plain runs against the compression policy, with the rates injected: a run covers exactly the
// blocks that deciding block by block would send plainly, ends before auto's probe or a
// tensor's retry, asks the policy once per block, stays within its byte limit, and is one
// sample of the plain rate.
#include "pipeline/plain_run.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "pipeline/compression_policy.h"

namespace ucclzip::pipeline {
namespace {

using transport::MemoryType;

constexpr uint64_t kBlock = 16 << 20;
constexpr MemoryType kDevice = MemoryType::kDevice;

// Feeds the policy `items` sends of `bytes` each to peer 1 at `rate` bytes/s, one after the
// other, plain or compressed.
void Feed(CompressionPolicy& policy, bool compressed, uint64_t bytes, double rate, int items, absl::Time& clock) {
  for (int i = 0; i < items; ++i) {
    const absl::Time start = clock;
    clock += absl::Seconds(static_cast<double>(bytes) / rate);
    if (compressed) {
      // A frame at the ratio of bf16 weights, 1.5.
      const uint64_t ticket = policy.CompressedSendStarted(1, kDevice, bytes, bytes * 2 / 3, start, start);
      policy.CompressedSendDone(1, kDevice, bytes, ticket, true, clock);
    } else {
      const uint64_t ticket = policy.PlainSendStarted(1, kDevice, bytes, start);
      policy.PlainSendDone(1, kDevice, bytes, ticket, true, clock);
    }
  }
}

bool Decide(CompressionPolicy& policy, CompressionMode mode = CompressionMode::kAuto) {
  return policy.ShouldCompress(mode, DataType::kBFloat16, kBlock, 1, kDevice, 7);
}

// A policy that has settled on plain for peer 1: plain blocks at 100 GB/s, frames at 20.
void SettleOnPlain(CompressionPolicy& policy) {
  absl::Time clock = absl::UnixEpoch();
  Feed(policy, false, kBlock, 100e9, 8, clock);
  Feed(policy, true, kBlock, 20e9, 8, clock);
  ASSERT_FALSE(Decide(policy));
}

// Forms runs as the send path does, with no byte limit: the run's first block is decided on its
// own, the rest by ExtendPlainRun, and the block that ends a run is later sent with the answer
// it got then. Returns the run lengths over `blocks` blocks, 0 for each compressed block.
std::vector<uint32_t> Runs(CompressionPolicy& policy, uint32_t blocks) {
  std::vector<uint32_t> runs;
  std::optional<bool> kept;
  for (uint32_t b = 0; b < blocks;) {
    const bool compress = kept ? *kept : Decide(policy);
    kept.reset();
    if (compress) {
      runs.push_back(0);
      ++b;
      continue;
    }
    const PlainRun run = ExtendPlainRun(
        kBlock, blocks - b - 1, UINT64_MAX, [](uint32_t) { return kBlock; },
        [&](uint32_t) {
          const bool frame = Decide(policy);
          if (frame) kept = true;
          return !frame;
        });
    EXPECT_EQ(run.bytes, run.blocks * kBlock);
    runs.push_back(run.blocks);
    b += run.blocks;
  }
  return runs;
}

TEST(PlainRun, CoversExactlyTheBlocksThatGoPlainlyAndEndsBeforeAutosProbe) {
  CompressionPolicy by_block(4096), by_run(4096);
  SettleOnPlain(by_block);
  SettleOnPlain(by_run);
  // Block by block: the compressed probes' places among kBlocks blocks (frames 5 times as slow
  // as plain blocks: a probe every 1 600 blocks or more, CompressionPolicy::kProbeCostShare).
  constexpr uint32_t kBlocks = 5000;
  std::vector<uint32_t> probes;
  for (uint32_t b = 0; b < kBlocks; ++b) {
    if (Decide(by_block)) probes.push_back(b);
  }
  ASSERT_GE(probes.size(), 2u);
  // In runs: plain runs exactly between the probes, each probe a frame of its own.
  std::vector<uint32_t> want;
  uint32_t from = 0;
  for (uint32_t probe : probes) {
    if (probe > from) want.push_back(probe - from);
    want.push_back(0);
    from = probe + 1;
  }
  if (from < kBlocks) want.push_back(kBlocks - from);
  EXPECT_EQ(Runs(by_run, kBlocks), want);
  // Both policies were asked once per block: they go on deciding alike.
  for (int b = 0; b < 5000; ++b) ASSERT_EQ(Decide(by_block), Decide(by_run)) << b;
}

TEST(PlainRun, EndsWhereATensorThatDidNotCompressIsTriedAgain) {
  // Frames pay on this link, but tensor 7's last frame did not shrink: its next
  // kBypassBlocks blocks go plainly, as one run, and the retry is a frame.
  CompressionPolicy policy(4096);
  absl::Time clock = absl::UnixEpoch();
  Feed(policy, false, kBlock, 1e9, 8, clock);
  Feed(policy, true, kBlock, 3e9, 8, clock);
  policy.Record(1, 7, kBlock, kBlock);
  EXPECT_EQ(Runs(policy, CompressionPolicy::kBypassBlocks + 3),
            (std::vector<uint32_t>{CompressionPolicy::kBypassBlocks, 0, 0, 0}));
}

TEST(PlainRun, ForcedModes) {
  CompressionPolicy policy(4096);
  int asked = 0;
  const auto plain_in = [&](CompressionMode mode) {
    return [&, mode](uint32_t) {
      ++asked;
      return !policy.ShouldCompress(mode, DataType::kBFloat16, kBlock, 1, kDevice, 7);
    };
  };
  const auto blocks = [](uint32_t) { return kBlock; };
  EXPECT_EQ(ExtendPlainRun(kBlock, 15, kMaxRunBytes, blocks, plain_in(CompressionMode::kOff)).blocks, 16u);
  EXPECT_EQ(asked, 15);
  asked = 0;
  EXPECT_EQ(ExtendPlainRun(kBlock, 15, kMaxRunBytes, blocks, plain_in(CompressionMode::kOn)).blocks, 1u);
  EXPECT_EQ(asked, 1);
}

TEST(PlainRun, StaysWithinItsBytesWithoutAskingAboutTheBlockThatWouldNotFit) {
  int asked = 0;
  const auto plain = [&](uint32_t) {
    ++asked;
    return true;
  };
  // Blocks of 16 MB but a last one of 5 bytes; a limit of 3.5 blocks.
  const auto bytes = [](uint32_t k) { return k == 9 ? uint64_t{5} : kBlock; };
  PlainRun run = ExtendPlainRun(kBlock, 9, 3 * kBlock + kBlock / 2, bytes, plain);
  EXPECT_EQ(run.blocks, 3u);
  EXPECT_EQ(run.bytes, 3 * kBlock);
  EXPECT_EQ(asked, 2);
  // A message's short last block and an empty first one.
  EXPECT_EQ(ExtendPlainRun(kBlock, 9, kMaxRunBytes, bytes, plain).bytes, 9 * kBlock + 5);
  EXPECT_EQ(ExtendPlainRun(0, 0, kMaxRunBytes, bytes, plain).blocks, 1u);
  // The first block goes whatever its size: a block larger than the limit is its own run.
  EXPECT_EQ(ExtendPlainRun(4 * kBlock, 9, kBlock, bytes, plain).blocks, 1u);
}

// A run is one send of its bytes: one sample of the plain rate, charged its time on the link,
// so that 256 MB runs at 100 GB/s measure 100 GB/s, and frames at 20 GB/s do not pay.
TEST(PlainRun, IsOneSampleOfThePlainRate) {
  CompressionPolicy policy(4096);
  absl::Time clock = absl::UnixEpoch();
  Feed(policy, false, 16 * kBlock, 100e9, 1, clock);
  EXPECT_FALSE(policy.plain_rate(1, kDevice).has_value());  // the first is no sample
  Feed(policy, false, 16 * kBlock, 100e9, 2, clock);
  ASSERT_TRUE(policy.plain_rate(1, kDevice).has_value());
  EXPECT_NEAR(*policy.plain_rate(1, kDevice), 100e9, 1e9);
  Feed(policy, true, kBlock, 20e9, 8, clock);
  int compressed = 0;
  for (int b = 0; b < 200; ++b) compressed += Decide(policy);
  EXPECT_EQ(compressed, 0);
}

}  // namespace
}  // namespace ucclzip::pipeline
