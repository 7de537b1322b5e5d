// Send/Recv between two real processes over UCX with host buffers (CPU codec): every dtype and
// size class bit-exact, unaligned buffers, large messages over shared memory and the staged
// path, many operations in flight in both directions, mixed modes, and the automatic bypass of
// data that does not compress.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "pipeline_test_util.h"

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
    // Each rank sends to the other and receives at the same time, from two threads.
    absl::Status other;
    std::thread second([&] { other = Exchange(**comm, messages, 1, 0, true); });
    absl::Status first = Exchange(**comm, messages, 0, 1, true);
    second.join();
    first.Update(other);
    return first;
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
    // 8 messages of 4 blocks of the random tensor.
    CommunicatorStats stats = (*comm)->stats();
    if (context.rank == 0 && (stats.blocks_compressed > 1 || stats.blocks_bypassed < 31)) {
      return absl::InternalError(absl::StrCat("compressed ", stats.blocks_compressed, " bypassed ", stats.blocks_bypassed,
                                              ", want at most 1 and at least 31"));
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

}  // namespace
}  // namespace ucclzip::testing
