// Send/Recv between two real processes over UCX with host buffers (CPU codec): every dtype and
// size class bit-exact, unaligned buffers, large messages over shared memory and the staged
// path, many operations in flight in both directions, mixed modes, the automatic bypass of
// data that does not compress, and plain runs (a message's plain blocks as one transport
// message: counted, on every host path, within the transport's block limit, beside frames).
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "pipeline/envelope.h"
#include "pipeline/send_window.h"
#include "pipeline_test_util.h"
#include "ucclzip/codec.h"

namespace ucclzip::testing {
namespace {

struct Message {
  DataType dtype;
  uint64_t count;
  Distribution dist;
  CompressionMode mode = CompressionMode::kOn;
  size_t misalign = 0;  // bytes the buffer starts past an aligned address
  uint64_t tensor_id = 0;
};

std::vector<uint8_t> Payload(const Message& m, uint64_t index) {
  return GenerateTensor(m.dtype, m.count, m.dist, index * 7919 + m.count);
}

// `sender` sends every message to `receiver` (all in flight, or in one group), which checks
// every byte. Both directions may run at once (each rank passes its own role).
absl::Status Exchange(Communicator& comm, const std::vector<Message>& messages, int sender, int receiver, bool group) {
  std::vector<std::vector<uint8_t>> buffers(messages.size());
  std::vector<Operation> operations;
  const int rank = comm.rank();
  if (group) comm.GroupStart();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    const size_t bytes = m.count * ElementSize(m.dtype);
    buffers[i].assign(bytes + m.misalign, 0);
    uint8_t* data = buffers[i].data() + m.misalign;
    if (rank == sender) {
      std::vector<uint8_t> payload = Payload(m, i);
      std::copy(payload.begin(), payload.end(), data);
      operations.push_back(comm.Send(data, m.count, m.dtype, receiver, nullptr,
                                     SendOptions{.compression = m.mode, .tensor_id = m.tensor_id}));
    } else if (rank == receiver) {
      operations.push_back(comm.Recv(data, m.count, m.dtype, sender, nullptr));
    }
  }
  if (group) {
    if (absl::Status s = WaitOk(comm.GroupEnd(), "group"); !s.ok()) return s;
  }
  for (size_t i = 0; i < operations.size(); ++i) {
    if (absl::Status s = WaitOk(operations[i], absl::StrCat("rank ", rank, " message ", i)); !s.ok()) return s;
  }
  if (rank != receiver) return absl::OkStatus();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    std::vector<uint8_t> want = Payload(m, i);
    auto what = absl::StrCat("message ", i, ": ", m.count, " x ", DataTypeName(m.dtype), " ", m.dist.Name(), " +",
                             m.misalign);
    if (absl::Status s = ExpectSameBytes(buffers[i].data() + m.misalign, want.data(), want.size(), what); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// Each rank sends the messages to the other and receives the other's at the same time, from
// two threads.
absl::Status ExchangeBothWays(Communicator& comm, const std::vector<Message>& messages, bool group) {
  absl::Status other;
  std::thread second([&] { other = Exchange(comm, messages, 1, 0, group); });
  absl::Status first = Exchange(comm, messages, 0, 1, group);
  second.join();
  first.Update(other);
  return first;
}

const DataType kAllTypes[] = {DataType::kRaw,   DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32,
                              DataType::kFloat8E4M3, DataType::kFloat8E5M2, DataType::kInt8, DataType::kUint8,
                              DataType::kInt32, DataType::kUint32, DataType::kInt64, DataType::kUint64,
                              DataType::kFloat64};

TEST(PipelineSendRecv, EveryTypeAndSizeArrivesBitExact) {
  std::vector<Message> messages;
  for (DataType dtype : kAllTypes) {
    for (uint64_t count : {0ull, 1ull, 7ull, 4097ull, 131'073ull}) {
      messages.push_back({dtype, count, {DistKind::kGaussian, 0.02}});
    }
  }
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, PipelineOptions());
    if (!comm.ok()) return comm.status();
    if (absl::Status s = Exchange(**comm, messages, 0, 1, false); !s.ok()) return s;
    CommunicatorStats stats = (*comm)->stats();
    if (context.rank == 0 && (stats.blocks_compressed == 0 || stats.send_ratio() <= 1.0)) {
      return absl::InternalError(absl::StrCat("nothing compressed: ratio ", stats.send_ratio()));
    }
    return absl::OkStatus();
  }));
}

TEST(PipelineSendRecv, UnalignedBuffersAndSpecialValues) {
  std::vector<Message> messages;
  for (DataType dtype : {DataType::kBFloat16, DataType::kFloat32, DataType::kFloat16, DataType::kFloat8E4M3}) {
    for (size_t misalign : {1, 3}) {
      messages.push_back({dtype, 70'001, {DistKind::kGaussian, 1.0}, CompressionMode::kOn, misalign});
      messages.push_back({dtype, 5'003, {DistKind::kSpecialValues, 1.0}, CompressionMode::kOn, misalign});
    }
  }
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, PipelineOptions());
    if (!comm.ok()) return comm.status();
    return Exchange(**comm, messages, 1, 0, false);
  }));
}

TEST(PipelineSendRecv, LargeMessagesOverSharedMemoryAndStaged) {
  const std::vector<Message> messages = {
      {DataType::kBFloat16, 12'000'001, {DistKind::kGaussian, 0.02}, CompressionMode::kOn},
      {DataType::kFloat32, 4'000'003, {DistKind::kGaussian, 1.0}, CompressionMode::kAuto},
      {DataType::kBFloat16, 3'000'000, {DistKind::kRandomBytes, 1.0}, CompressionMode::kOff},
  };
  for (bool staged : {false, true}) {
    ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
      transport::TransportOptions options = PipelineOptions("posix,sysv");
      options.stage_host_memory = staged;
      options.pipeline_block_bytes = size_t{8} << 20;
      options.block_bytes = size_t{1} << 20;
      options.staging_pool_bytes = size_t{8} << 20;
      auto comm = CreateCommunicator(context, options);
      if (!comm.ok()) return comm.status();
      return Exchange(**comm, messages, 0, 1, false);
    }));
  }
}

TEST(PipelineSendRecv, ManyMixedOperationsInFlightBothWaysInGroups) {
  std::vector<Message> messages;
  const CompressionMode modes[] = {CompressionMode::kOn, CompressionMode::kOff, CompressionMode::kAuto};
  const Distribution dists[] = {{DistKind::kGaussian, 0.02}, {DistKind::kRandomBytes, 1}, {DistKind::kLaplace, 0.5}};
  for (uint64_t i = 0; i < 60; ++i) {
    messages.push_back({i % 5 == 4 ? DataType::kInt32 : (i % 2 ? DataType::kBFloat16 : DataType::kFloat32),
                        (i * 37'813) % 400'000, dists[i % 3], modes[(i / 3) % 3]});
  }
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, PipelineOptions());
    if (!comm.ok()) return comm.status();
    return ExchangeBothWays(**comm, messages, true);
  }));
}

// Blocks of 2 MB, whose encodes and decodes run on each rank's host codec thread
// (host_codec_jobs.h) while the other direction's run beside them.
TEST(PipelineSendRecv, HostCodecJobsBothWaysAtOnce) {
  const std::vector<Message> messages = {
      {DataType::kBFloat16, 3'000'001, {DistKind::kGaussian, 0.02}},
      {DataType::kFloat32, 1'300'000, {DistKind::kLaplace, 0.01}, CompressionMode::kAuto},
      {DataType::kFloat16, 2'100'000, {DistKind::kSpecialValues, 1}},
  };
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = PipelineOptions();
    options.pipeline_block_bytes = size_t{2} << 20;
    options.block_bytes = size_t{512} << 10;
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    if (absl::Status s = ExchangeBothWays(**comm, messages, false); !s.ok()) return s;
    if ((*comm)->stats().blocks_compressed < 4) return absl::InternalError("too few blocks compressed");
    return absl::OkStatus();
  }));
}

// A message of less than four largest blocks is cut into four where each keeps the smallest
// block size (schedule.h, PipelineBlockElements), so that its first encode and last decode
// overlap the wire; with the smallest size at the largest it goes as one block, as before.
// Both ends cut alike, bit-exact, every block a frame.
TEST(PipelineSendRecv, AMessageOfLessThanFourLargestBlocksIsCutIntoFour) {
  const std::vector<Message> messages = {
      {DataType::kBFloat16, 300'000, {DistKind::kGaussian, 0.02}},  // 600 KB: 3 of 192 KiB and the rest
      {DataType::kFloat32, 262'144, {DistKind::kGaussian, 1.0}},   // 1 MiB: 4 of 256 KiB
      {DataType::kFloat16, 40'000, {DistKind::kLaplace, 0.01}},    // 80 KB: 64 KiB (the smallest) and the rest
  };
  for (const uint64_t smallest : {uint64_t{64} << 10, uint64_t{1} << 20}) {
    ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
      transport::TransportOptions options = PipelineOptions();
      options.pipeline_block_bytes = size_t{1} << 20;
      options.min_pipeline_block_bytes = smallest;
      auto comm = CreateCommunicator(context, options);
      if (!comm.ok()) return comm.status();
      if (absl::Status s = Exchange(**comm, messages, 0, 1, false); !s.ok()) return s;
      const uint64_t want = smallest < (uint64_t{1} << 20) ? 4 + 4 + 2 : 3;
      if (context.rank == 0 && (*comm)->stats().blocks_compressed != want) {
        return absl::InternalError(absl::StrCat((*comm)->stats().blocks_compressed, " frames sent, want ", want,
                                                " with a smallest block of ", smallest, " bytes"));
      }
      return absl::OkStatus();
    }));
  }
}

// A frame the CPU codes takes 1024-symbol lanes whatever its size (the GPU's default lanes are
// shorter on small frames): what the sender puts on the wire is the envelope and exactly the
// frame CompressHost writes with those lanes, and the receiver plans the frame by the lanes its
// envelope names. Bit-exact.
TEST(PipelineSendRecv, HostFramesTakeLongLanes) {
  const Message m{DataType::kBFloat16, 500'000, {DistKind::kGaussian, 0.02}};  // 1 MB, one block
  const std::vector<uint8_t> payload = Payload(m, 0);
  std::vector<uint8_t> frame(MaxFrameBytes(m.dtype, m.count));
  absl::StatusOr<uint64_t> want = CompressHost(payload.data(), m.count, m.dtype, frame.data(), frame.size(),
                                               CodecOptions{.lane_symbols = 1024});
  ASSERT_TRUE(want.ok()) << want.status();
  absl::StatusOr<uint64_t> default_lanes = CompressHost(payload.data(), m.count, m.dtype, frame.data(), frame.size());
  ASSERT_TRUE(default_lanes.ok()) << default_lanes.status();
  ASSERT_LT(*want, *default_lanes);  // what the test tells apart
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = PipelineOptions();
    options.pipeline_block_bytes = size_t{1} << 20;
    options.min_pipeline_block_bytes = options.pipeline_block_bytes;
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    if (absl::Status s = Exchange(**comm, {m}, 0, 1, false); !s.ok()) return s;
    const uint64_t sent = (*comm)->stats().wire_bytes_sent;
    if (context.rank == 0 && sent != *want + pipeline::kEnvelopeBytes) {
      return absl::InternalError(absl::StrCat(sent, " bytes sent, want a ", *want, "-byte frame (1024-symbol lanes; ",
                                              *default_lanes, " with the default ones) and its envelope"));
    }
    return absl::OkStatus();
  }));
}

// Whether kAuto compresses a tensor that does compress depends on the measured rates
// (compression_policy_test.cc injects them); a tensor that does not is bypassed whatever the
// rates: at most its first block is ever tried in 32.
TEST(PipelineSendRecv, AutoBypassesIncompressibleTensors) {
  std::vector<Message> random, gaussian;
  for (int i = 0; i < 8; ++i) {
    random.push_back({DataType::kBFloat16, 512 << 10, {DistKind::kRandomBytes, 1}, CompressionMode::kAuto, 0, 1});
    gaussian.push_back({DataType::kBFloat16, 512 << 10, {DistKind::kGaussian, 0.02}, CompressionMode::kAuto, 0, 2});
  }
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, PipelineOptions());
    if (!comm.ok()) return comm.status();
    if (absl::Status s = Exchange(**comm, random, 0, 1, false); !s.ok()) return s;
    // 8 messages of 4 blocks of the random tensor. The blocks that start before the first
    // frame's encode is done (device_slots in the send window, kEncodeAheadBlocks ahead of it)
    // are compressed before auto knows the tensor does not shrink; every later one goes plainly.
    CommunicatorStats stats = (*comm)->stats();
    const uint64_t window = PipelineOptions().device_slots + pipeline::kEncodeAheadBlocks;
    if (context.rank == 0 && (stats.blocks_compressed > window || stats.blocks_bypassed < 32 - window)) {
      return absl::InternalError(absl::StrCat("compressed ", stats.blocks_compressed, " bypassed ", stats.blocks_bypassed,
                                              ", want at most ", window, " and at least ", 32 - window));
    }
    return Exchange(**comm, gaussian, 0, 1, false);
  }));
}

// Host buffers' blocks coded on several CPU codec threads, a different number on each side:
// frames do not depend on the thread count, so every byte arrives as with one thread.
TEST(PipelineSendRecv, CpuCodecThreadsOnBothSides) {
  const std::vector<Message> messages = {
      {DataType::kBFloat16, 1'000'003, {DistKind::kGaussian, 0.02}},
      {DataType::kFloat32, 300'001, {DistKind::kLaplace, 0.01}},
      {DataType::kFloat8E4M3, 700'000, {DistKind::kGaussian, 1.0}},
  };
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = PipelineOptions();
    options.cpu_codec_threads = context.rank == 0 ? 3 : 2;
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    if (absl::Status s = Exchange(**comm, messages, 0, 1, false); !s.ok()) return s;
    if (context.rank == 0 && (*comm)->stats().blocks_compressed == 0) return absl::InternalError("nothing compressed");
    return absl::OkStatus();
  }));
}

// Blocks of a message of `m`'s count under PipelineOptions-like blocks of `block_bytes`.
uint64_t BlocksOf(const Message& m, uint64_t block_bytes) {
  const uint64_t per_block = block_bytes / ElementSize(m.dtype);
  return std::max<uint64_t>((m.count + per_block - 1) / per_block, 1);
}

// Messages whose blocks all go plainly: compression off, integer types (whatever the mode),
// 0 bytes, one element, a block's worth and one more, odd sizes and many blocks.
std::vector<Message> PlainMessages() {
  const Distribution gaussian{DistKind::kGaussian, 0.02};
  std::vector<Message> messages;
  for (uint64_t count : {0ull, 1ull, 131'072ull, 131'073ull, 1'000'003ull, 2'621'440ull}) {
    messages.push_back({DataType::kBFloat16, count, gaussian, CompressionMode::kOff});
  }
  messages.push_back({DataType::kInt32, 900'001, {DistKind::kRandomBytes, 1}, CompressionMode::kOn, 3});
  messages.push_back({DataType::kUint8, 777'777, {DistKind::kRandomBytes, 1}, CompressionMode::kAuto, 1});
  messages.push_back({DataType::kFloat32, 65'537, gaussian, CompressionMode::kOff, 2});
  return messages;
}

struct HostPath {
  std::string name;
  std::string tls;
  bool staged = false;
};

void PrintTo(const HostPath& path, std::ostream* out) { *out << path.name; }

class PlainRuns : public ::testing::TestWithParam<HostPath> {};

// The plain blocks of each Send travel as one transport message (a plain run) from the sender's
// buffer into the receiver's: per message one envelope and one part, where block by block it
// would take two per block, as it still does staged (no runs there). Bit-exact, in order, all in
// flight and in one group.
TEST_P(PlainRuns, EachMessageTakesOneEnvelopeAndOnePart) {
  const HostPath path = GetParam();
  const std::vector<Message> messages = PlainMessages();
  const transport::TransportOptions options = [&] {
    transport::TransportOptions o = PipelineOptions(path.tls);
    o.stage_host_memory = path.staged;
    return o;
  }();
  uint64_t blocks = 0;
  for (const Message& m : messages) blocks += BlocksOf(m, options.pipeline_block_bytes);
  const uint64_t want = path.staged ? 2 * blocks : 2 * messages.size();
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    for (bool group : {false, true}) {
      const CommunicatorStats before = (*comm)->stats();
      if (absl::Status s = Exchange(**comm, messages, 0, 1, group); !s.ok()) return s;
      const CommunicatorStats after = (*comm)->stats();
      const uint64_t sent = after.transport_messages_sent - before.transport_messages_sent;
      const uint64_t received = after.transport_messages_received - before.transport_messages_received;
      const uint64_t plain = after.blocks_bypassed - before.blocks_bypassed;
      if (context.rank == 0 && (sent != want || plain != blocks || after.blocks_compressed != 0)) {
        return absl::InternalError(absl::StrCat("group ", group, ": sent ", sent, " transport messages for ", blocks,
                                                " plain blocks (", plain, " counted) of ", messages.size(),
                                                " messages, want ", want));
      }
      if (context.rank == 1 && received != want) {
        return absl::InternalError(absl::StrCat("group ", group, ": received ", received, " transport messages, want ", want));
      }
    }
    return absl::OkStatus();
  }));
}

INSTANTIATE_TEST_SUITE_P(, PlainRuns,
                         ::testing::Values(HostPath{"tcp", "tcp"}, HostPath{"shm", "posix,sysv"},
                                           HostPath{"staged", "posix,sysv", true}),
                         [](const auto& info) { return info.param.name; });

// A run is one transport message, which the transport cuts into at most kMaxBlocks blocks: with
// 64-byte transport blocks a run holds at most 65535 * 64 bytes, 15 pipeline blocks of 256 KB,
// so that 40 blocks go as runs of 15, 15 and 10: three envelopes and three parts.
TEST(PipelineSendRecv, PlainRunsStayWithinTheTransportsBlockLimit) {
  const std::vector<Message> messages = {
      {DataType::kUint8, 40 * (256 << 10), {DistKind::kRandomBytes, 1}, CompressionMode::kOff}};
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options = PipelineOptions("posix,sysv");
    options.block_bytes = 64;
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    if (absl::Status s = Exchange(**comm, messages, 0, 1, false); !s.ok()) return s;
    const uint64_t sent = (*comm)->stats().transport_messages_sent;
    if (context.rank == 0 && sent != 3 + 3) return absl::InternalError(absl::StrCat("sent ", sent, ", want 6"));
    return absl::OkStatus();
  }));
}

// Plain runs beside frames: auto (which learns and probes), on and off taking turns on one link,
// message after message, every one bit-exact. Per message the sender's counts show its shape:
// every block is plain or a frame, a frame takes four transport messages, a plain run two (its
// envelope and its part), and the runs lie between the frames (all plain: one run; a block too
// small to code goes plainly, so it joins the run beside it).
TEST(PipelineSendRecv, PlainRunsBesideFramesOfAutoAndOn) {
  const CompressionMode modes[] = {CompressionMode::kAuto, CompressionMode::kOn, CompressionMode::kAuto,
                                   CompressionMode::kOff};
  std::vector<Message> messages;
  for (uint64_t i = 0; i < 24; ++i) {
    messages.push_back({i % 3 == 2 ? DataType::kFloat32 : DataType::kBFloat16, 600'000 + i * 77'777,
                        {DistKind::kGaussian, 0.02}, modes[i % 4]});
  }
  const transport::TransportOptions options = PipelineOptions();
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    uint64_t frames_total = 0, runs_total = 0;
    for (size_t i = 0; i < messages.size(); ++i) {
      const CommunicatorStats before = (*comm)->stats();
      if (absl::Status s = Exchange(**comm, {messages[i]}, 0, 1, false); !s.ok()) return absl::Status(s.code(), absl::StrCat("message ", i, ": ", s.message()));
      if (context.rank != 0) continue;
      const CommunicatorStats after = (*comm)->stats();
      const uint64_t blocks = BlocksOf(messages[i], options.pipeline_block_bytes);
      const uint64_t frames = after.blocks_compressed - before.blocks_compressed;
      const uint64_t plain = after.blocks_bypassed - before.blocks_bypassed;
      const int64_t run_messages =
          static_cast<int64_t>(after.transport_messages_sent - before.transport_messages_sent) -
          static_cast<int64_t>(4 * frames);
      const int64_t runs = run_messages / 2;
      const bool shaped = frames + plain == blocks && run_messages % 2 == 0 && runs >= (plain > 0 ? 1 : 0) &&
                          runs <= static_cast<int64_t>(std::min(plain, frames + 1));
      if (!shaped || (frames == 0 && runs != 1) || (messages[i].mode == CompressionMode::kOff && frames != 0)) {
        return absl::InternalError(absl::StrCat("message ", i, " (mode ", static_cast<int>(messages[i].mode), "): ", blocks,
                                                " blocks went as ", frames, " frames and ", plain, " plain blocks in ",
                                                runs, " runs"));
      }
      frames_total += frames;
      runs_total += runs;
    }
    if (context.rank == 0 && (frames_total == 0 || runs_total == 0)) {
      return absl::InternalError(absl::StrCat(frames_total, " frames, ", runs_total, " runs"));
    }
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace ucclzip::testing
