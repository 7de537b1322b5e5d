// The compress-or-not decision for each block a rank sends (docs/PIPELINE.md, "Compress or
// not"): kAuto compresses a block only where the compressed pipeline has been seen to deliver
// more than the plain one, judged from what each choice delivered inside the pipeline on the
// same peer and memory path, probing the other choice now and then; and it remembers which
// tensors did not compress. Only the pipeline thread uses it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/time/time.h"
#include "pipeline/link_share.h"
#include "pipeline/rate_meter.h"
#include "transport/memory_type.h"
#include "ucclzip/communicator.h"

namespace ucclzip::pipeline {

class CompressionPolicy {
 public:
  // Blocks of a tensor below this ratio (payload / frame bytes) are not worth their codec time.
  static constexpr double kMinRatio = 1.05;
  // After a block that did not compress, kAuto sends this many blocks of the tensor plainly
  // before it tries again (data changes: a tensor may start to compress). Each further failed
  // try doubles the wait, up to kMaxBypassBlocks: a tensor that never compresses then costs
  // one wasted encode in about a thousand blocks instead of one in 33.
  static constexpr uint32_t kBypassBlocks = 32;
  static constexpr uint32_t kMaxBypassBlocks = 1024;

  // Compressing must have delivered this much more than not: a margin for the estimates' noise,
  // so that a near tie stays uncompressed (which costs no codec time).
  static constexpr double kMinGain = 1.05;
  // After the decision for a (peer, path) changes, the other choice is tried again after a
  // first interval of blocks, then after twice as many each time, up to a limit, so that a link
  // or GPU whose speed changes is noticed. A plain probe while compressing costs little (one
  // block's gain); a compressed probe while not compressing may cost ten plain blocks' time
  // where the codec is slow, and the codec's speed changes rarely, so those probes start later
  // and stay rarer.
  // Where the compressed estimate lost only narrowly (it delivers at least 1 / kNearTie of the
  // plain rate), a compressed probe costs at most a quarter of a block: such probes then come
  // as often as plain ones, so that an estimate pulled down by a few slow frames (the drain at
  // an operation's end, a GPU time slice) is corrected within a few blocks, not a few hundred
  // (H200 run s17-3: a weight sync over staged shm went plain for whole syncs, 0.69x of on).
  static constexpr uint32_t kFirstPlainProbe = 16;
  static constexpr uint32_t kMaxPlainProbe = 1024;
  static constexpr uint32_t kFirstCompressedProbe = 256;
  static constexpr uint32_t kMaxCompressedProbe = 8192;
  static constexpr double kNearTie = 1.25;
  // Outside a near tie, a compressed probe while not compressing costs about (1 / gain - 1)
  // plain blocks' time more than the plain block it replaces, by the rates. Where the codec is
  // far slower than the link (GPU-direct: frames 12 times slower than plain blocks, H100 run
  // s34-2) the schedule above spent 4-6 % of a run of 16 MB messages on probes, so such probes
  // come at least ceil((1 / gain - 1) / kProbeCostShare) blocks apart, even beyond
  // kMaxCompressedProbe: their extra time is then at most kProbeCostShare of the plain time
  // between them. There a probe may cost several times the rates' figure: its encode and
  // decode hold the message they belong to, a latency the rates do not see (run s34-3 at 1 %:
  // five probes among 800 messages of 256 MB, and auto's mean 15 us a message above off's, up
  // to 2.4 ms a probe against 0.6 ms by the rates; without probes the means differed by up to
  // 6 us), hence a quarter of the 1 % that is meant (one run's evidence).
  static constexpr double kProbeCostShare = 0.0025;
  // Only probes show a codec that got faster, each moving the compressed estimate by the
  // average's weight (0.3); as it improves the price falls and the schedule sets the pace
  // again (frames 12.5 times slower, then twice as fast: noticed as soon as the schedule alone
  // would have, after nine probes). No real path needs more than this cap (8 x
  // kMaxCompressedProbe: frames 165 times slower than plain blocks); it bounds how long one bad
  // first sample of the compressed rate (an average's first is not bounded by an earlier one)
  // keeps auto plain.
  static constexpr uint32_t kMaxAffordableProbe = 1 << 16;

  explicit CompressionPolicy(size_t min_compress_bytes) : min_compress_bytes_(min_compress_bytes) {}

  // True to send the block as a frame.
  bool ShouldCompress(CompressionMode mode, DataType dtype, uint64_t block_bytes, int peer, transport::MemoryType memory,
                      uint64_t tensor);
  // What a compressed block came to.
  void Record(int peer, uint64_t tensor, uint64_t payload_bytes, uint64_t frame_bytes);

  // What the pipeline observed, per block of `bytes` of payload to `peer`: each block is
  // charged its share of the link to `peer` (LinkShare, link_share.h) from the moment it joins
  // the link (`now` of its Started: a plain block's post, a frame's once it is encoded and sent)
  // to its send's completion, and a frame also the idle time its encode caused the link, from
  // `started`. Each measures the whole pipeline such a block passes (for a frame: the encode,
  // the link with fewer bytes, and, through the receiver's late receives, its decode). Shared
  // by wire bytes, a probe of one choice inside a pipeline of the other is charged its own bytes'
  // time whether the link took the blocks in turn or moved them together: charged the time since
  // the link's previous completion, a probe queued behind blocks of the other choice looked 16
  // times slower (H200 run s4-4: auto 0.72x of on), and a plain probe that finished together with
  // the frame ahead of it got 36 us for 4 MB (CPU machine, shaped 1 Gbit/s ring). Each rate
  // leaves out its first sample (RateMeter). Started returns the block's ticket, which its Done
  // takes back; every Started has its Done, a failed block's with ok = false. Blocks below
  // min_compress_bytes are not counted (ticket 0): their time is mostly latency, and kAuto never
  // compresses them.
  uint64_t PlainSendStarted(int peer, transport::MemoryType memory, uint64_t bytes, absl::Time now);
  void PlainSendDone(int peer, transport::MemoryType memory, uint64_t bytes, uint64_t ticket, bool ok, absl::Time now);
  uint64_t CompressedSendStarted(int peer, transport::MemoryType memory, uint64_t bytes, uint64_t frame_bytes,
                                 absl::Time started, absl::Time now);
  void CompressedSendDone(int peer, transport::MemoryType memory, uint64_t bytes, uint64_t ticket, bool ok,
                          absl::Time now);

  // The CPU codec's work for host buffers, on the pipeline thread (and the codec's threads): a
  // block's encode (`bytes` of payload in `took`) and a received frame's decode. What bounds a
  // compressed host pipeline is this rank's CPU as much as its sends' completions: host frames
  // land in buffers of their own, so a sender's frames complete at the link's pace until its
  // receiver lags a peer's places behind (engine.cc, ReceiveBlocksPerPeer). Decoding is faster
  // than encoding on the CPU (RESULTS.md), so a sender that only encodes is bounded by its
  // encoder; a rank of a ring or chain also decodes what it receives on the same thread, and at
  // most as fast as it codes both can it send frames. So
  // the bound is the compressed bytes this rank sends on host memory (its own frames and the
  // frames it forwards) per second of its CPU codec work, encodes and decodes together. (On
  // the device path a slow decode keeps the receiver's slots, which holds back the sends'
  // completions, so the measured delivery already sees it.) A frame's encode is reported before
  // its CompressedSendStarted, which closes the frame's share of the codec work.
  void HostEncoded(uint64_t bytes, absl::Duration took);
  void HostDecoded(absl::Duration took);

  // A device frame of `bytes` of payload, from its encode's start (`started`) to the moment the
  // pipeline saw the encode done (`now`). A frame's send is charged only its share of the link
  // and the idle time its encode caused it (LinkShare), so a frame that encoded while earlier
  // blocks were on the link looks as fast as its wire: on a link faster than the codec (GPU-direct, H200 run s7-2:
  // frames seemed to deliver 504-676 GB/s, the compressed pipeline delivered 22) auto would
  // compress a lone probe's successors. So the device codec has its own rate, bytes over the
  // time any encode ran (overlapping encodes on several slots' streams counted once), which
  // bounds what frames on device memory can deliver, as the CPU codec's bounds host frames.
  void DeviceEncoded(uint64_t bytes, absl::Time started, absl::Time now);

  // Payload bytes per second that each choice delivered to `peer` on `memory`, where known.
  std::optional<double> plain_rate(int peer, transport::MemoryType memory) const;
  std::optional<double> compressed_rate(int peer, transport::MemoryType memory) const;
  // Payload bytes per second the device codec encoded, where known.
  std::optional<double> device_codec_rate() const { return device_codec_.rate(); }

 private:
  static size_t Index(transport::MemoryType memory) { return memory == transport::MemoryType::kHost ? 0 : 1; }
  // What compressing is expected to deliver to `peer` on `memory`, as a multiple of what not
  // compressing delivers; nullopt before the plain rate is known (plain blocks go first: they
  // cost no codec time), infinity before the compressed one is (then frames, to learn it).
  std::optional<double> ExpectedGain(int peer, transport::MemoryType memory) const;
  // Whether compressing, expected to deliver `gain` times what not compressing does, lost only
  // narrowly (kNearTie): its probes then follow the plain probes' schedule.
  static bool NearTie(std::optional<double> gain) { return gain && *gain * kNearTie >= 1; }
  // The fewest blocks between compressed probes that keep their extra time within
  // kProbeCostShare of the plain blocks' (kProbeCostShare above); 0 where no estimate says.
  static uint32_t AffordableProbeInterval(std::optional<double> gain);
  struct PathState {
    RateMeter plain;
    RateMeter compressed;
    bool last_choice = false;
    bool near_tie = false;  // plain, with compressing within kNearTie of it, at the last decision
    uint32_t since_probe = 0;
    uint32_t probe_interval = kFirstCompressedProbe;  // last_choice starts at plain
  };
  PathState& Path(int peer, transport::MemoryType memory);
  // Per peer, the link's time shared among the blocks on it (of either choice, from either
  // memory: each pair of them a kind of its own).
  LinkShare& Link(int peer);
  static int LinkKind(transport::MemoryType memory, bool compressed) {
    return static_cast<int>(2 * Index(memory)) + (compressed ? 1 : 0);
  }
  std::vector<LinkShare> links_;

  static uint64_t Key(int peer, uint64_t tensor) { return tensor * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(peer); }
  const size_t min_compress_bytes_;
  struct Bypass {
    uint32_t remaining = 0;  // plain blocks still to send before the next try
    uint32_t length = 0;     // the current wait, doubled by each failed try
  };
  // Tensors that did not compress, per (peer, tensor); bounded (cleared when it grows large).
  std::unordered_map<uint64_t, Bypass> bypass_;
  // Per peer, per memory path (host, device).
  std::vector<std::array<PathState, 2>> paths_;
  // Samples the host codec's rate once enough has been sent since the last sample.
  void SampleHostCodec();
  // Compressed bytes sent on host memory per second of CPU codec work, a moving average; what
  // the next sample covers; and the decodes since the last host send, which go with the next
  // frame, or are dropped if a plain block comes first (a rank that sends plainly has no frame
  // to charge them to). A frame is charged at most kDecodesPerFrame of them (their mean time
  // each): a rank of a ring decodes about one block per block it sends, and a rank that only
  // received for a while (a chain's tail) has a stretch of decodes that belong to no send.
  static constexpr int kDecodesPerFrame = 2;
  ByteTimeAverage host_codec_;
  // The device codec's rate, and when the last encode it has seen ended.
  RateMeter device_codec_;
  absl::Time device_codec_free_ = absl::InfinitePast();
  uint64_t host_frame_bytes_ = 0;
  absl::Duration host_codec_time_ = absl::ZeroDuration();
  absl::Duration host_decode_pending_ = absl::ZeroDuration();
  int host_decodes_pending_ = 0;
};

}  // namespace ucclzip::pipeline
