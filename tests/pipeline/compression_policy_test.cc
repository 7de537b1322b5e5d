// The compress-or-not decision with the rates injected (never timed): forced modes and types,
// the comparison of what each choice delivered (off where the codec is the bottleneck, on where
// the link is, rare probes, a change of speed noticed), and the memory of tensors that did not
// compress.
#include "pipeline/compression_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ucclzip::pipeline {
namespace {

using transport::MemoryType;

constexpr uint64_t kBig = 1 << 20;
// A frame of kBig payload at the ratio of bf16 weights, 1.5.
constexpr uint64_t kFrame = kBig * 2 / 3;
constexpr MemoryType kHost = MemoryType::kHost;

// The tests' clock: every block of every test starts after the last one ended.
absl::Time clock = absl::UnixEpoch();

// Feeds `blocks` plain blocks to `peer` delivered at `plain` bytes/s and as many compressed ones
// at `compressed` bytes/s (0: none), one block after the other. Where the codec is the
// bottleneck a compressed pipeline delivers the codec's rate; where the link is, the link's
// rate times the ratio.

void Observe(CompressionPolicy& policy, int peer, MemoryType memory, double plain, double compressed, int blocks = 32) {
  for (int i = 0; i < blocks; ++i) {
    if (plain > 0) {
      const uint64_t ticket = policy.PlainSendStarted(peer, memory, kBig, clock);
      clock += absl::Seconds(kBig / plain);
      policy.PlainSendDone(peer, memory, kBig, ticket, true, clock);
    }
    if (compressed > 0) {
      const uint64_t ticket = policy.CompressedSendStarted(peer, memory, kBig, kFrame, clock, clock);
      clock += absl::Seconds(kBig / compressed);
      policy.CompressedSendDone(peer, memory, kBig, ticket, true, clock);
    }
  }
}

// Of `blocks` auto decisions for tensor 7 of `peer`, how many compress.
int Compressed(CompressionPolicy& policy, int peer, MemoryType memory, int blocks) {
  int compressed = 0;
  for (int i = 0; i < blocks; ++i) compressed += policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, peer, memory, 7);
  return compressed;
}

TEST(CompressionPolicy, ForcedModesAndTypes) {
  CompressionPolicy policy(4096);
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kOn, DataType::kBFloat16, 100, 1, kHost, 7));
  EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kOff, DataType::kBFloat16, kBig, 1, kHost, 7));
  EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kOn, DataType::kInt32, kBig, 1, kHost, 7));
  EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kFloat32, 100, 1, kHost, 7));
  // Auto learns the link first (plain blocks cost no codec time), then the codec.
  EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kFloat32, kBig, 1, kHost, 7));
  Observe(policy, 1, kHost, 1e9, 0);
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kFloat32, kBig, 1, kHost, 7));
}

TEST(CompressionPolicy, AutoIsOffWhereTheCodecIsTheBottleneckAndOnWhereTheLinkIs) {
  CompressionPolicy policy(4096);
  // The 2-core CPU machine: a 0.3 GB/s CPU codec against 2.7 GB/s of shared memory.
  Observe(policy, 1, kHost, 2.7e9, 0.3e9);
  EXPECT_NEAR(*policy.plain_rate(1, kHost), 2.7e9, 1e7);
  EXPECT_NEAR(*policy.compressed_rate(1, kHost), 0.3e9, 1e6);
  EXPECT_LE(Compressed(policy, 1, kHost, 4000), 10);  // probes only
  // A 1 Gbit/s link to another peer, the same codec: a ratio of 1.5 delivers 0.19 GB/s.
  Observe(policy, 2, kHost, 0.125e9, 0.1875e9);
  EXPECT_GE(Compressed(policy, 2, kHost, 4000), 3990);
  // Device memory keeps its own estimates: a GPU codec at 20 GB/s against a 135 GB/s direct
  // path does not pay; against 4 GB/s of staged tcp it does.
  Observe(policy, 1, MemoryType::kDevice, 135e9, 20e9);
  EXPECT_LE(Compressed(policy, 1, MemoryType::kDevice, 4000), 10);
  Observe(policy, 3, MemoryType::kDevice, 4e9, 6e9);
  EXPECT_GE(Compressed(policy, 3, MemoryType::kDevice, 4000), 3990);
  // A near tie stays uncompressed: 1.03 times the plain rate is within the margin.
  CompressionPolicy tie(4096);
  Observe(tie, 1, kHost, 1e9, 1.03e9);
  EXPECT_LE(Compressed(tie, 1, kHost, 1000), 10);
}

// `blocks` compressed host blocks to `peer`, each encoded at `encode` bytes/s and, where
// `decode` > 0, followed by the decode of a received frame as large at `decode` bytes/s (a rank
// of a ring); the sends complete at once (the link's pace does not matter here).
void CodeOnHost(CompressionPolicy& policy, int peer, double encode, double decode, int blocks = 32) {
  for (int i = 0; i < blocks; ++i) {
    policy.HostEncoded(kBig, absl::Seconds(kBig / encode));
    const uint64_t ticket = policy.CompressedSendStarted(peer, kHost, kBig, kFrame, clock, clock);
    policy.CompressedSendDone(peer, kHost, kBig, ticket, true, clock);
    if (decode > 0) policy.HostDecoded(absl::Seconds(kBig / decode));
  }
}

TEST(CompressionPolicy, OnHostMemoryTheEncoderBoundsWhatFramesDeliver) {
  // The sender's frames complete at the link's pace (2 GB/s of payload over 1.3 GB/s of
  // link), but the CPU codec encodes only 0.8 GB/s, and the receiver decodes as slowly: plain.
  CompressionPolicy policy(4096);
  Observe(policy, 1, kHost, 1.3e9, 2e9);
  EXPECT_GE(Compressed(policy, 1, kHost, 100), 90);  // before any encode was timed
  CodeOnHost(policy, 1, 0.8e9, 0);
  EXPECT_LE(Compressed(policy, 1, kHost, 4000), 10);
  // A 1 Gbit/s link: 0.8 GB/s of encoding is well above it, so frames pay there.
  Observe(policy, 2, kHost, 0.125e9, 0.1875e9);
  EXPECT_GE(Compressed(policy, 2, kHost, 4000), 3990);
  // The device path does not use the host codec's rate.
  Observe(policy, 3, MemoryType::kDevice, 1.3e9, 2e9);
  EXPECT_GE(Compressed(policy, 3, MemoryType::kDevice, 4000), 3990);
}

// A rank of a ring codes on one thread what it receives and what it sends: a 1.6 GB/s encoder
// alone would beat a 1.2 GB/s link, but with a 2.4 GB/s decode of every block it forwards it
// sends frames at 0.96 GB/s, which does not. A sender that only encodes still compresses, and
// decodes done while blocks went plainly are charged to no frame.
TEST(CompressionPolicy, OnHostMemoryTheDecodesOfARingCountAgainstItsFrames) {
  CompressionPolicy ring(4096);
  Observe(ring, 1, kHost, 1.2e9, 1.8e9);
  CodeOnHost(ring, 1, 1.6e9, 2.4e9);
  EXPECT_NEAR(*ring.compressed_rate(1, kHost), 1.8e9, 1e7);
  EXPECT_LE(Compressed(ring, 1, kHost, 4000), 10);

  CompressionPolicy sender(4096);
  Observe(sender, 1, kHost, 1.2e9, 1.8e9);
  CodeOnHost(sender, 1, 1.6e9, 0);
  EXPECT_GE(Compressed(sender, 1, kHost, 4000), 3990);
  // Decodes of another peer's frames while this rank sends plainly, then frames again.
  for (int i = 0; i < 64; ++i) {
    const uint64_t ticket = sender.PlainSendStarted(1, kHost, kBig, clock);
    sender.HostDecoded(absl::Seconds(kBig / 2.4e9));
    clock += absl::Seconds(kBig / 1.2e9);
    sender.PlainSendDone(1, kHost, kBig, ticket, true, clock);
  }
  CodeOnHost(sender, 1, 1.6e9, 0);
  EXPECT_GE(Compressed(sender, 1, kHost, 4000), 3990);
}

// A rank that only received for a while (the tail of a broadcast chain) decoded many frames with
// no send to charge them to; its next frames are charged a ring's share of them, at most two
// decodes a frame, not all of them at once: that sample alone pulled the host codec's rate far
// enough down that auto sent plainly for thousands of blocks where frames paid.
TEST(CompressionPolicy, OnHostMemoryAStretchOfDecodesWithoutSendsIsNotChargedToOneFrame) {
  CompressionPolicy policy(4096);
  Observe(policy, 1, kHost, 1.2e9, 1.8e9);
  for (int i = 0; i < 500; ++i) policy.HostDecoded(absl::Seconds(kBig / 2.4e9));
  CodeOnHost(policy, 1, 1.6e9, 0);
  EXPECT_GE(Compressed(policy, 1, kHost, 4000), 3990);
}

// Frames between plain blocks (tensors that do not compress, sent plainly) still measure the
// encoder: a 0.8 GB/s encoder against a 1.3 GB/s link, every other block plain.
TEST(CompressionPolicy, OnHostMemoryFramesBetweenPlainBlocksStillMeasureTheEncoder) {
  CompressionPolicy policy(4096);
  Observe(policy, 1, kHost, 1.3e9, 2e9);
  for (int i = 0; i < 32; ++i) {
    const uint64_t ticket = policy.PlainSendStarted(1, kHost, kBig, clock);
    clock += absl::Seconds(kBig / 1.3e9);
    policy.PlainSendDone(1, kHost, kBig, ticket, true, clock);
    CodeOnHost(policy, 1, 0.8e9, 0, 1);
  }
  EXPECT_LE(Compressed(policy, 1, kHost, 4000), 10);
}

// Starts a block of kBig payload to peer 1 at `clock`, plain or as a frame of kFrame bytes.
uint64_t Start(CompressionPolicy& policy, MemoryType memory, bool compressed) {
  return compressed ? policy.CompressedSendStarted(1, memory, kBig, kFrame, clock, clock)
                    : policy.PlainSendStarted(1, memory, kBig, clock);
}
void Done(CompressionPolicy& policy, MemoryType memory, bool compressed, uint64_t ticket) {
  compressed ? policy.CompressedSendDone(1, memory, kBig, ticket, true, clock)
             : policy.PlainSendDone(1, memory, kBig, ticket, true, clock);
}

// Rounds of a pipeline of one choice: `queued` blocks posted at once, which the link takes one
// after the other at `queued_rate` bytes/s, and behind them a probe of the other choice posted
// (or its encode started) with them, which takes the link at `probe_rate`.
void ProbeBehindAQueue(CompressionPolicy& policy, bool probe_compressed, double queued_rate, double probe_rate,
                       int queued = 15, int rounds = 8) {
  const MemoryType memory = MemoryType::kDevice;
  for (int round = 0; round < rounds; ++round) {
    std::vector<uint64_t> tickets;
    for (int i = 0; i < queued; ++i) tickets.push_back(Start(policy, memory, !probe_compressed));
    const uint64_t probe = Start(policy, memory, probe_compressed);
    for (int i = 0; i < queued; ++i) {
      clock += absl::Seconds(kBig / queued_rate);
      Done(policy, memory, !probe_compressed, tickets[i]);
    }
    clock += absl::Seconds(kBig / probe_rate);
    Done(policy, memory, probe_compressed, probe);
  }
}

// A probe inside a pipeline of the other choice waits for the blocks ahead of it on the link,
// and is charged only for its own turn there. Charged from its post, a frame behind 15 plain
// blocks would seem to deliver a sixteenth of its rate, and auto would never leave the choice
// it probed against (H200, staged tcp, 256 MB: auto 0.72x of on).
TEST(CompressionPolicy, AProbeIsChargedForItsOwnTurnOnTheLinkNotForTheQueueAheadOfIt) {
  // Plain blocks at 1 GB/s, frames that deliver 1.5 GB/s: compressing pays.
  CompressionPolicy link_bound(4096);
  ProbeBehindAQueue(link_bound, /*probe_compressed=*/true, 1e9, 1.5e9);
  EXPECT_NEAR(*link_bound.plain_rate(1, MemoryType::kDevice), 1e9, 1e7);
  EXPECT_NEAR(*link_bound.compressed_rate(1, MemoryType::kDevice), 1.5e9, 1.5e7);
  EXPECT_GE(Compressed(link_bound, 1, MemoryType::kDevice, 1000), 980);
  // Frames at 1.2 GB/s (the codec bound) on a 2 GB/s link, a plain probe behind them: plain pays.
  CompressionPolicy codec_bound(4096);
  ProbeBehindAQueue(codec_bound, /*probe_compressed=*/false, 1.2e9, 2e9);
  EXPECT_NEAR(*codec_bound.plain_rate(1, MemoryType::kDevice), 2e9, 2e7);
  EXPECT_LE(Compressed(codec_bound, 1, MemoryType::kDevice, 1000), 10);
}

// How the link takes two blocks on it together: one after the other (the first finishes after
// its own time, the second after its own more), or both at once (both finish after the time of
// the two, 36 us apart), as the CPU machine's shaped tcp link did both (LinkShare).
enum class Sharing { kInTurn, kTogether };

// `pairs` rounds of auto's pipeline to peer 1, the send window's two blocks posted at once: each
// block as auto decides, a plain one taking the link `plain` of time, a frame `frame`. Returns
// how many blocks went compressed.
int PipelineOfPairs(CompressionPolicy& policy, MemoryType memory, Sharing sharing, absl::Duration plain,
                    absl::Duration frame, int pairs) {
  int compressed = 0;
  for (int i = 0; i < pairs; ++i) {
    const bool first = policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, memory, 7);
    const bool second = policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, memory, 7);
    compressed += first + second;
    const uint64_t first_ticket = Start(policy, memory, first);
    const uint64_t second_ticket = Start(policy, memory, second);
    const absl::Duration first_time = first ? frame : plain;
    const absl::Duration second_time = second ? frame : plain;
    clock += sharing == Sharing::kInTurn ? first_time : first_time + second_time;
    Done(policy, memory, first, first_ticket);
    clock += sharing == Sharing::kInTurn ? second_time : absl::Microseconds(36);
    Done(policy, memory, second, second_ticket);
  }
  return compressed;
}

class CompressionPolicySharing : public testing::TestWithParam<Sharing> {};

// A 1 Gbit/s link (a 1 MB block 8 ms, its frame 5.3 ms) with the codec far faster: auto
// compresses all but its probes, however the link takes the probe and the frame ahead of it.
// Charged the time since the link's previous completion, a plain probe that finished 36 us after
// the frame it moved with seemed to take 36 us (28 GB/s) and the frame the time of both (CPU
// machine, 4-rank allreduce on a shaped 1 Gbit/s link): auto turned plain after such probes.
TEST_P(CompressionPolicySharing, WhereTheLinkIsTheBottleneckAPlainProbeIsChargedWhatItsBytesTook) {
  CompressionPolicy policy(4096);
  const int compressed = PipelineOfPairs(policy, kHost, GetParam(), absl::Milliseconds(8),
                                         absl::Microseconds(5333), 2000);
  EXPECT_NEAR(*policy.plain_rate(1, kHost), kBig / 8e-3, kBig / 8e-3 * 0.02);
  EXPECT_NEAR(*policy.compressed_rate(1, kHost), kBig / 5.333e-3, kBig / 5.333e-3 * 0.02);
  EXPECT_GE(compressed, 3950);
}

// Frames that move slower than plain blocks (a receiver decoding them holds the link back: 1 ms
// for a frame, 0.5 ms for a plain block): auto stays plain but for its probes, however the link
// takes a probe and the plain block ahead of it. Charged the time since the link's previous
// completion, a frame probe that finished 36 us after the plain block it moved with would seem to
// take 36 us, and auto would compress.
TEST_P(CompressionPolicySharing, WhereFramesAreSlowerAFrameProbeIsChargedWhatItsBytesTook) {
  CompressionPolicy policy(4096);
  const int compressed = PipelineOfPairs(policy, MemoryType::kDevice, GetParam(), absl::Microseconds(500),
                                         absl::Milliseconds(1), 4000);
  // Moved together, two plain blocks take 1.036 ms.
  const double plain = GetParam() == Sharing::kInTurn ? kBig / 0.5e-3 : 2 * kBig / 1.036e-3;
  EXPECT_NEAR(*policy.plain_rate(1, MemoryType::kDevice), plain, plain * 0.01);
  EXPECT_NEAR(*policy.compressed_rate(1, MemoryType::kDevice), kBig / 1e-3, kBig / 1e-3 * 0.02);
  EXPECT_LE(compressed, 40);
}

INSTANTIATE_TEST_SUITE_P(Link, CompressionPolicySharing, testing::Values(Sharing::kInTurn, Sharing::kTogether),
                         [](const testing::TestParamInfo<Sharing>& info) {
                           return info.param == Sharing::kInTurn ? "InTurn" : "Together";
                         });

// `blocks` device frames to `peer`, each encoded at `encode` bytes/s while the link was still
// busy with earlier blocks, so that each send is charged only its wire time at `wire` bytes/s
// of payload (its encode left the link no idle time: it joins with no time of its own before):
// frames encoded ahead of the send window.
void EncodeAheadOnDevice(CompressionPolicy& policy, int peer, double encode, double wire, int blocks = 32) {
  for (int i = 0; i < blocks; ++i) {
    const absl::Time encode_start = clock;
    clock += absl::Seconds(kBig / encode);
    policy.DeviceEncoded(kBig, encode_start, clock);
    const uint64_t ticket = policy.CompressedSendStarted(peer, MemoryType::kDevice, kBig, kFrame, clock, clock);
    clock += absl::Seconds(kBig / wire);
    policy.CompressedSendDone(peer, MemoryType::kDevice, kBig, ticket, true, clock);
  }
}

// On a link faster than the GPU codec (GPU-direct: 300 GB/s plain, a codec in the pipeline at
// 22 GB/s), frames whose encodes overlapped the link's earlier blocks are charged their wire
// time only and seem to deliver 600 GB/s; the codec's own rate bounds them (H200 run s7-2: auto
// compressed and delivered 0.08x of off). Where the link is the bottleneck the codec's rate
// changes nothing.
TEST(CompressionPolicy, OnDeviceMemoryTheCodecsRateBoundsWhatFramesDeliver) {
  CompressionPolicy direct(4096);
  Observe(direct, 1, MemoryType::kDevice, 300e9, 0);
  EncodeAheadOnDevice(direct, 1, 22e9, 600e9);
  EXPECT_NEAR(*direct.compressed_rate(1, MemoryType::kDevice), 600e9, 6e9);
  EXPECT_NEAR(*direct.device_codec_rate(), 22e9, 2e8);
  EXPECT_LE(Compressed(direct, 1, MemoryType::kDevice, 4000), 10);  // probes only
  CompressionPolicy staged(4096);
  Observe(staged, 1, MemoryType::kDevice, 4e9, 0);
  EncodeAheadOnDevice(staged, 1, 100e9, 6e9);
  EXPECT_GE(Compressed(staged, 1, MemoryType::kDevice, 4000), 3990);
}

// Encodes that overlap on several slots' streams count their time once: four at once that take
// 4 ms together code four blocks per 4 ms, not one.
TEST(CompressionPolicy, OverlappingDeviceEncodesCountTheirTimeOnce) {
  CompressionPolicy policy(4096);
  for (int round = 0; round < 16; ++round) {
    const absl::Time start = clock;
    for (int slot = 1; slot <= 4; ++slot) policy.DeviceEncoded(kBig, start, start + absl::Milliseconds(slot));
    clock = start + absl::Milliseconds(4);
  }
  EXPECT_NEAR(*policy.device_codec_rate(), 4 * kBig / 4e-3, 1e7);
}

// The first block on a path pays what happens once (endpoints wired up, memory mapped for
// IPC): 50 ms for a block that then takes 0.1 ms. Were it a sample, one more plain block would
// leave plain at 3 GB/s, below frames at 5 GB/s, and auto would compress on a 10 GB/s link.
TEST(CompressionPolicy, TheFirstBlockOnAPathIsNoSample) {
  CompressionPolicy policy(4096);
  const MemoryType memory = MemoryType::kDevice;
  const uint64_t ticket = policy.PlainSendStarted(1, memory, kBig, clock);
  clock += absl::Milliseconds(50);
  policy.PlainSendDone(1, memory, kBig, ticket, true, clock);
  EXPECT_FALSE(policy.plain_rate(1, memory).has_value());
  Observe(policy, 1, memory, 10e9, 0, 1);
  Observe(policy, 1, memory, 0, 5e9, 8);
  EXPECT_NEAR(*policy.plain_rate(1, memory), 10e9, 1e8);
  EXPECT_LE(Compressed(policy, 1, memory, 1000), 10);
}

// Frames at 0.65 of the plain rate: a clear loss whose probes' price (about 216 blocks) is below
// the schedule's, so that the schedule shows: 256 blocks, then twice as many up to 8192.
TEST(CompressionPolicy, ProbesGetRarerAndAChangeOfSpeedIsNoticed) {
  CompressionPolicy policy(4096);
  Observe(policy, 1, kHost, 1e9, 0.65e9);
  std::vector<int> probes;
  for (int i = 0; i < 20000; ++i) {
    if (policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, kHost, 7)) probes.push_back(i);
  }
  ASSERT_GE(probes.size(), 6u);
  EXPECT_EQ(probes.front(), int(CompressionPolicy::kFirstCompressedProbe) - 1);
  for (size_t i = 1; i < probes.size(); ++i) {
    EXPECT_EQ(probes[i] - probes[i - 1],
              int(std::min(CompressionPolicy::kFirstCompressedProbe << i, CompressionPolicy::kMaxCompressedProbe)))
        << i;
  }
  // The link slows to 0.1 GB/s (congestion): the plain blocks' samples move the estimate, and
  // compression pays from then on.
  Observe(policy, 1, kHost, 0.1e9, 0, 16);
  EXPECT_GE(Compressed(policy, 1, kHost, 1000), 990);
}

// GPU-direct on the H100 (run s34-2): frames of 16 MB delivered 22.9 GB/s, plain blocks 285, so
// a compressed probe took 12.5 plain blocks' time, and probes 256 and 512 blocks apart cost a
// run of 300 messages 4-6 % (auto 0.94x of off in the mean). Probes now keep their extra time
// within kProbeCostShare of the plain time between them, even past kMaxCompressedProbe.
TEST(CompressionPolicy, CompressedProbesCostAtMostTheirShareOfThePlainTimeBetweenThem) {
  for (const double slower : {12.5, 100.0}) {
    SCOPED_TRACE(slower);
    CompressionPolicy policy(4096);
    const MemoryType memory = MemoryType::kDevice;
    Observe(policy, 1, memory, 285e9, 285e9 / slower);
    const double gain = *policy.compressed_rate(1, memory) / *policy.plain_rate(1, memory);
    const double extra = 1 / gain - 1;  // plain blocks' time a probe adds, by the rates
    std::vector<int> probes;
    for (int i = 0; i < 3 * extra / CompressionPolicy::kProbeCostShare + 1000; ++i) {
      if (policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, memory, 7)) probes.push_back(i);
    }
    ASSERT_GE(probes.size(), 2u);
    // The first probe comes after its share's worth of plain blocks, and so does each next one
    // (the probe's own turn counted as the plain block it replaced), and no later: the interval
    // is the price rounded up, the schedule being shorter.
    const int price = static_cast<int>(std::ceil(extra / CompressionPolicy::kProbeCostShare));
    EXPECT_EQ(probes.front(), price - 1);
    for (size_t i = 1; i < probes.size(); ++i) EXPECT_EQ(probes[i] - probes[i - 1], price) << i;
  }
}

// Only probes show a codec that got faster, each moving the compressed estimate 0.3 of the way:
// from frames 12.5 times slower than plain blocks (a price of 4 600 blocks) to twice as fast
// takes nine probes. As the estimate improves the price falls below the schedule's interval,
// so auto notices no later than the schedule alone would (probes 256, 512, ... 8192 apart: the
// ninth after 40 704 blocks).
TEST(CompressionPolicy, ACodecThatGotFasterIsNoticedNoLaterThanTheScheduleAloneWould) {
  CompressionPolicy policy(4096);
  const MemoryType memory = MemoryType::kDevice;
  constexpr double kPlain = 285e9;
  Observe(policy, 1, memory, kPlain, kPlain / 12.5);
  int blocks = 0, compressed_in_a_row = 0;
  while (compressed_in_a_row < 16 && blocks < 1'000'000) {
    const bool compress = policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, memory, 7);
    compressed_in_a_row = compress ? compressed_in_a_row + 1 : 0;
    Observe(policy, 1, memory, compress ? 0 : kPlain, compress ? 2 * kPlain : 0, 1);
    ++blocks;
  }
  EXPECT_LE(blocks, 40704 + 16);
}

// Where frames seemed vastly slower (here 5 000 times: a bad sample), the price is capped, so
// that probes still come every kMaxAffordableProbe blocks.
TEST(CompressionPolicy, ThePricedProbeIntervalIsCapped) {
  CompressionPolicy policy(4096);
  Observe(policy, 1, MemoryType::kDevice, 285e9, 285e9 / 5000);
  std::vector<int> probes;
  for (int i = 0; i < 3 * int(CompressionPolicy::kMaxAffordableProbe); ++i) {
    if (policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, MemoryType::kDevice, 7)) {
      probes.push_back(i);
    }
  }
  ASSERT_GE(probes.size(), 2u);
  EXPECT_EQ(probes.front(), int(CompressionPolicy::kMaxAffordableProbe) - 1);
  EXPECT_EQ(probes[1] - probes[0], int(CompressionPolicy::kMaxAffordableProbe));
}

// A weight sync over staged shared memory on the H200 (run s17-3): 16 MB frames delivered 7.9
// GB/s against 5.2 plain, but the last frames of each sync drained at half that or less, which
// left the compressed estimate a hair above plain, within the margin: auto turned plain, and
// with compressed probes 256 blocks apart the next syncs went plain (auto 0.69x of on). A
// narrow loss is now probed as soon as a plain probe would be, and the probe turns auto back.
TEST(CompressionPolicy, ANarrowLossIsProbedSoonSoThatAFewSlowFramesDoNotHoldAutoPlain) {
  CompressionPolicy policy(4096);
  constexpr uint64_t kBlock = uint64_t{16} << 20;
  const MemoryType memory = MemoryType::kDevice;
  constexpr double kPlainRate = 5.2e9, kFrameRate = 7.9e9;
  auto send = [&](bool compressed, double rate) {
    const uint64_t ticket = compressed ? policy.CompressedSendStarted(1, memory, kBlock, kBlock * 2 / 3, clock, clock)
                                       : policy.PlainSendStarted(1, memory, kBlock, clock);
    clock += absl::Seconds(kBlock / rate);
    if (compressed) {
      policy.CompressedSendDone(1, memory, kBlock, ticket, true, clock);
    } else {
      policy.PlainSendDone(1, memory, kBlock, ticket, true, clock);
    }
  };
  auto decide = [&] { return policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBlock, 1, memory, 7); };
  for (int i = 0; i < 16; ++i) send(false, kPlainRate), send(true, kFrameRate);
  ASSERT_TRUE(decide());
  for (int i = 0; i < 2; ++i) send(true, kFrameRate / 2);  // the drain
  ASSERT_FALSE(decide()) << "the drain should leave compressed within the margin of plain";
  const double gain = *policy.compressed_rate(1, memory) / *policy.plain_rate(1, memory);
  ASSERT_LT(gain, CompressionPolicy::kMinGain);
  ASSERT_GE(gain * CompressionPolicy::kNearTie, 1.0);
  int plain = 0;
  for (int i = 0; i < 100; ++i) {
    const bool compressed = decide();
    plain += compressed ? 0 : 1;
    send(compressed, compressed ? kFrameRate : kPlainRate);
  }
  EXPECT_LE(plain, int(CompressionPolicy::kFirstPlainProbe) + 4);
  // A clear loss still waits the long interval: frames at half the plain rate.
  CompressionPolicy slow(4096);
  Observe(slow, 1, memory, 2e9, 1e9);
  std::vector<int> probes;
  for (int i = 0; i < 600; ++i) {
    if (slow.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, memory, 7)) probes.push_back(i);
  }
  ASSERT_FALSE(probes.empty());
  EXPECT_GE(probes.front(), int(CompressionPolicy::kFirstCompressedProbe) - 1);
}

// A clear loss that later becomes a near tie, without the choice changing (the compressed
// estimate rose by frames of other calls on the path): the probes then come on the plain
// probes' schedule, not on the long one the clear loss had started.
TEST(CompressionPolicy, ANearTieReachedWhileSendingPlainlyIsProbedSoon) {
  CompressionPolicy policy(4096);
  Observe(policy, 1, kHost, 1e9, 0.5e9);
  ASSERT_LE(Compressed(policy, 1, kHost, 100), 1);  // a clear loss: plain, probes far apart
  Observe(policy, 1, kHost, 0, 0.9e9);  // frames at 0.9 of the plain rate: a near tie now
  const double gain = *policy.compressed_rate(1, kHost) / *policy.plain_rate(1, kHost);
  ASSERT_LT(gain, CompressionPolicy::kMinGain);
  ASSERT_GE(gain * CompressionPolicy::kNearTie, 1.0);
  int plain = 0;
  while (!policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, kHost, 7) && plain < 1000) ++plain;
  EXPECT_LE(plain, int(CompressionPolicy::kFirstPlainProbe));
}

TEST(CompressionPolicy, AutoBypassesATensorThatDidNotCompressThenRetries) {
  CompressionPolicy policy(4096);
  Observe(policy, 1, kHost, 0.1e9, 0.15e9);
  Observe(policy, 2, kHost, 0.1e9, 0);
  Observe(policy, 3, kHost, 0.1e9, 0);
  policy.Record(1, 7, kBig, kBig - 10);  // ratio ~1.0
  for (uint32_t i = 0; i < CompressionPolicy::kBypassBlocks; ++i) {
    EXPECT_FALSE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, kHost, 7)) << i;
  }
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, kHost, 7));
  // Other tensors and peers are unaffected; forcing on still compresses.
  policy.Record(1, 7, kBig, kBig);
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 2, kHost, 7));
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, kHost, 8));
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kOn, DataType::kBFloat16, kBig, 1, kHost, 7));
  // A tensor that compresses keeps compressing.
  policy.Record(3, 9, kBig, kBig / 2);
  EXPECT_TRUE(policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 3, kHost, 9));
}

// Counts the plain blocks kAuto sends before it tries tensor 7 of peer 1 again.
uint32_t PlainBlocksBeforeTheNextTry(CompressionPolicy& policy) {
  uint32_t plain = 0;
  while (!policy.ShouldCompress(CompressionMode::kAuto, DataType::kBFloat16, kBig, 1, kHost, 7) && plain < 100'000) ++plain;
  return plain;
}

TEST(CompressionPolicy, EachFailedTryDoublesTheWaitUpToTheLimitAndSuccessResetsIt) {
  CompressionPolicy policy(4096);
  Observe(policy, 1, kHost, 0.1e9, 0.15e9);
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
