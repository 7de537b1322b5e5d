// Send/Recv of device buffers, both ranks on GPU 0 (staged through pinned memory unless UCX
// takes CUDA memory), with stream semantics: the sender fills its buffer on its stream, the
// receiver copies the result back on its own stream right after the Recv. Every dtype up to
// 1 GB, compressed, uncompressed and auto; plain runs. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gpu_test.h"
#include "pipeline/held_streams.h"
#include "pipeline_test_util.h"

namespace ucclzip::testing {
namespace {

struct DeviceMessage {
  DataType dtype;
  uint64_t count;
  Distribution dist;
  CompressionMode mode;
};

absl::Status Cuda(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

// What DeviceRoundTrip checks besides the data: a sender that starts late, whether the
// receiver's Recv returned done, and the stream both calls are on (a created non-blocking one,
// or the legacy default stream).
struct RoundTripTiming {
  absl::Duration sender_delay = absl::ZeroDuration();
  std::optional<bool> recv_done_at_return;
  bool legacy_stream = false;
};

// One message from rank 0 to rank 1 through device memory, checked on the host.
absl::Status DeviceRoundTrip(Communicator& comm, const DeviceMessage& m, uint64_t seed, RoundTripTiming timing = {}) {
  const size_t bytes = m.count * ElementSize(m.dtype);
  std::vector<uint8_t> host = GenerateTensor(m.dtype, m.count, m.dist, seed);
  cudaStream_t stream = nullptr;
  if (!timing.legacy_stream) {
    if (absl::Status s = Cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream"); !s.ok()) return s;
  }
  void* device = nullptr;
  absl::Status status = Cuda(cudaMalloc(&device, std::max<size_t>(bytes, 1)), "cudaMalloc");
  const std::string what = absl::StrCat("rank ", comm.rank(), ": ", m.count, " x ", DataTypeName(m.dtype), " ", m.dist.Name());
  if (status.ok() && comm.rank() == 0) {
    // Queued, not waited for: the Send must order itself after the copy.
    status = Cuda(cudaMemcpyAsync(device, host.data(), bytes, cudaMemcpyHostToDevice, stream), "fill");
    absl::SleepFor(timing.sender_delay);
    Operation op = comm.Send(device, m.count, m.dtype, 1, stream, SendOptions{.compression = m.mode});
    if (status.ok()) status = WaitOk(op, what);
    if (status.ok()) status = Cuda(cudaStreamSynchronize(stream), "sync");
  } else if (status.ok()) {
    // Pinned, allocated before the Recv: a copy into pageable memory would block this thread,
    // and a page-locked allocation may wait for the stream wait the Recv queues.
    uint8_t* back = nullptr;
    status = Cuda(cudaMallocHost(reinterpret_cast<void**>(&back), std::max<size_t>(bytes, 1)), "cudaMallocHost");
    if (status.ok()) status = Cuda(cudaMemsetAsync(device, 0, bytes, stream), "clear");
    if (status.ok()) {
      Operation op = comm.Recv(device, m.count, m.dtype, 0, stream);
      if (timing.recv_done_at_return && op.Test() != *timing.recv_done_at_return) {
        status = absl::InternalError(absl::StrCat(what, ": the Recv returned ", op.Test() ? "done" : "before it was done",
                                                  ", want ", *timing.recv_done_at_return ? "done" : "at once"));
      }
      // Queued right after the Recv: it must see the received data.
      if (status.ok()) status = Cuda(cudaMemcpyAsync(back, device, bytes, cudaMemcpyDeviceToHost, stream), "copy back");
      if (status.ok()) status = Cuda(cudaStreamSynchronize(stream), "sync");
      status.Update(WaitOk(op, what));
      if (status.ok()) status = ExpectSameBytes(back, host.data(), bytes, what);
    }
    cudaFreeHost(back);
  }
  cudaFree(device);
  if (stream != nullptr) cudaStreamDestroy(stream);
  return status;
}

TEST(PipelineDevice, EveryTypeAndSizeUpTo1GBArrivesBitExact) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  std::vector<DeviceMessage> messages;
  for (DataType dtype : {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32, DataType::kFloat8E4M3,
                         DataType::kFloat8E5M2, DataType::kInt32, DataType::kUint8}) {
    for (uint64_t count : {0ull, 1ull, 4097ull, 3'000'001ull}) {
      messages.push_back({dtype, count, {DistKind::kGaussian, 0.02}, CompressionMode::kOn});
    }
  }
  messages.push_back({DataType::kBFloat16, 128ull << 20, {DistKind::kGaussian, 0.02}, CompressionMode::kOn});   // 256 MB
  messages.push_back({DataType::kBFloat16, 128ull << 20, {DistKind::kRandomBytes, 1}, CompressionMode::kAuto});
  messages.push_back({DataType::kFloat32, 64ull << 20, {DistKind::kGaussian, 1.0}, CompressionMode::kOff});
  messages.push_back({DataType::kBFloat16, 512ull << 20, {DistKind::kGaussian, 0.02}, CompressionMode::kAuto});  // 1 GB
  // With 16 MB blocks, a last block of 5238784 elements has a longer frame head (its default
  // lanes are shorter) than a full block: it once overran the pinned head buffer.
  messages.push_back({DataType::kBFloat16, (8ull << 20) + 5'238'784, {DistKind::kGaussian, 0.02}, CompressionMode::kOn});
  for (const char* tls : {"tcp", "posix,sysv"}) {
    ExpectRanksSucceeded(RunRanks({.world_size = 2, .kill_after = absl::Minutes(3)}, [&](const RankContext& context) -> absl::Status {
      if (absl::Status s = Cuda(cudaSetDevice(0), "cudaSetDevice"); !s.ok()) return s;
      transport::TransportOptions options;
      options.ucx_transports = tls;
      options.op_timeout = absl::Seconds(120);
      options.pipeline_block_bytes = size_t{16} << 20;  // the case above needs this size, fixed
      options.min_pipeline_block_bytes = options.pipeline_block_bytes;
      auto comm = CreateCommunicator(context, options);
      if (!comm.ok()) return comm.status();
      for (size_t i = 0; i < messages.size(); ++i) {
        if (absl::Status s = DeviceRoundTrip(**comm, messages[i], i + 1); !s.ok()) return s;
      }
      return absl::OkStatus();
    }));
  }
}

// Device memory's plain blocks go as one plain run per message too where UCX takes CUDA memory:
// one envelope and one part, bit-exact, after the sender's fill and the receiver's clear on
// their streams. Staged, each block goes on its own (docs/PIPELINE.md, "Plain runs").
TEST(PipelineDevice, PlainBlocksGoAsOneRun) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  const std::vector<DeviceMessage> messages = {
      {DataType::kBFloat16, (40ull << 20) + 3, {DistKind::kGaussian, 0.02}, CompressionMode::kOff},  // 6 blocks
      {DataType::kInt32, (8ull << 20) + 1, {DistKind::kRandomBytes, 1}, CompressionMode::kOn},       // 3 blocks
  };
  for (const char* tls : {"tcp", "posix,sysv"}) {
    ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
      if (absl::Status s = Cuda(cudaSetDevice(0), "cudaSetDevice"); !s.ok()) return s;
      transport::TransportOptions options;
      options.ucx_transports = WithCudaTransports(tls);
      options.pipeline_block_bytes = size_t{16} << 20;  // fixed: the block counts above
      options.min_pipeline_block_bytes = options.pipeline_block_bytes;
      auto comm = CreateCommunicator(context, options);
      if (!comm.ok()) return comm.status();
      for (size_t i = 0; i < messages.size(); ++i) {
        if (absl::Status s = DeviceRoundTrip(**comm, messages[i], i + 1); !s.ok()) return s;
      }
      const CommunicatorStats stats = (*comm)->stats();
      const uint64_t messages_moved = context.rank == 0 ? stats.transport_messages_sent : stats.transport_messages_received;
      const uint64_t want = (*comm)->device_memory_direct() ? 2 * 2 : 2 * (6 + 3);
      if (messages_moved != want) {
        return absl::InternalError(absl::StrCat("rank ", context.rank, ": ", messages_moved, " transport messages, want ",
                                                want, (*comm)->device_memory_direct() ? " (direct)" : " (staged)"));
      }
      return absl::OkStatus();
    }));
  }
}

// One Recv from a sender that starts 300 ms late, so that a Recv that returned at once cannot be
// done yet, on a created stream or the legacy one: whether it returned done is checked, and
// either way the receiver's stream sees the data right after.
void ExpectStreamOrder(bool legacy_stream, CompressionMode mode) {
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    if (absl::Status s = Cuda(cudaSetDevice(0), "cudaSetDevice"); !s.ok()) return s;
    transport::TransportOptions options;
    options.ucx_transports = WithCudaTransports("tcp");
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    // Where no stream can be held (MPS, fewer than 4 hardware queues) every device call returns
    // once done too.
    const bool done_at_return = legacy_stream || (*comm)->device_memory_direct() ||
                                pipeline::HeldStreams::ForDevice(0).capacity() == 0;
    return DeviceRoundTrip(**comm, {DataType::kBFloat16, 1 << 20, {DistKind::kGaussian, 0.02}, mode}, 7,
                           {.sender_delay = absl::Milliseconds(300), .recv_done_at_return = done_at_return,
                            .legacy_stream = legacy_stream});
  }));
}

// A call on a stream holds that stream where device memory is staged, and returns only once
// done where UCX takes CUDA memory (stream_order.h): UCX's own CUDA calls while it moves the
// message could wait for a held stream.
TEST(PipelineDevice, ACallOnAStreamReturnsOnceDoneOnlyOnTheDirectPath) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  ExpectStreamOrder(/*legacy_stream=*/false, CompressionMode::kOff);
}

// On the legacy default stream a call on device memory returns once done on both paths: with 8
// ranks on one H100 the held legacy stream stopped the pipeline's own copies (stream_order.h).
TEST(PipelineDevice, ACallOnTheLegacyStreamReturnsOnceDone) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  ExpectStreamOrder(/*legacy_stream=*/true, CompressionMode::kOn);
}

// Every round frees its buffers and allocates new ones, which the driver places at the same
// addresses: where UCX takes CUDA memory, a peer's cached mapping of the old buffer is then
// stale, and closing it once hung both ranks behind their held streams (docs/TRANSPORT.md,
// "Known gaps"). Sizes that grow and shrink recycle addresses partly too.
TEST(PipelineDevice, BuffersAtRecycledAddressesArriveWithoutHanging) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  std::vector<DeviceMessage> messages;
  for (int round = 0; round < 4; ++round) {
    for (uint64_t count : {3'000'001ull, 3'000'001ull, 5'000'011ull, 1'000'003ull}) {
      const CompressionMode mode = round % 2 ? CompressionMode::kOff : CompressionMode::kOn;
      messages.push_back({DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, mode});
    }
  }
  ExpectRanksSucceeded(RunRanks({.world_size = 2, .kill_after = absl::Minutes(2)}, [&](const RankContext& context) -> absl::Status {
    if (absl::Status s = Cuda(cudaSetDevice(0), "cudaSetDevice"); !s.ok()) return s;
    transport::TransportOptions options;
    options.ucx_transports = WithCudaTransports("tcp");
    options.op_timeout = absl::Seconds(60);
    options.pipeline_block_bytes = size_t{4} << 20;
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    for (size_t i = 0; i < messages.size(); ++i) {
      if (absl::Status s = DeviceRoundTrip(**comm, messages[i], i + 1); !s.ok()) return s;
    }
    // The rounds' same-sized buffers land where the last ones were (the driver hands freed
    // addresses out again: DeviceAllocations.*), so where they would go directly, some went
    // staged; staged anyway, none counts.
    const uint64_t staged = (*comm)->stats().recycled_device_bytes_staged;
    if ((*comm)->device_memory_direct() != (staged > 0)) {
      return absl::InternalError(absl::StrCat("rank ", context.rank, ": ", staged, " device bytes staged at recycled addresses, ",
                                              (*comm)->device_memory_direct() ? "direct path" : "staged path"));
    }
    return absl::OkStatus();
  }));
}

TEST(PipelineDevice, GroupedSendAndRecvOnOneStreamDoNotDeadlock) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    if (absl::Status s = Cuda(cudaSetDevice(0), "cudaSetDevice"); !s.ok()) return s;
    auto comm = CreateCommunicator(context, PipelineOptions());
    if (!comm.ok()) return comm.status();
    const uint64_t count = 1'000'003;
    std::vector<uint8_t> mine = GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, context.rank + 1);
    std::vector<uint8_t> theirs = GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, 2 - context.rank);
    cudaStream_t stream;
    void *out = nullptr, *in = nullptr;
    absl::Status status = Cuda(cudaStreamCreate(&stream), "stream");
    status.Update(Cuda(cudaMalloc(&out, count * 2), "malloc"));
    status.Update(Cuda(cudaMalloc(&in, count * 2), "malloc"));
    uint8_t* back = nullptr;  // pinned, before anything is queued (see DeviceRoundTrip)
    status.Update(Cuda(cudaMallocHost(reinterpret_cast<void**>(&back), count * 2), "cudaMallocHost"));
    status.Update(Cuda(cudaMemcpyAsync(out, mine.data(), count * 2, cudaMemcpyHostToDevice, stream), "fill"));
    const int peer = 1 - context.rank;
    (*comm)->GroupStart();
    (*comm)->Recv(in, count, DataType::kBFloat16, peer, stream);
    (*comm)->Send(out, count, DataType::kBFloat16, peer, stream);
    Operation group = (*comm)->GroupEnd();
    status.Update(Cuda(cudaMemcpyAsync(back, in, count * 2, cudaMemcpyDeviceToHost, stream), "copy back"));
    status.Update(Cuda(cudaStreamSynchronize(stream), "sync"));
    status.Update(WaitOk(group, "group"));
    if (status.ok()) status = ExpectSameBytes(back, theirs.data(), count * 2, "exchanged tensor");
    cudaFreeHost(back);
    cudaFree(out);
    cudaFree(in);
    cudaStreamDestroy(stream);
    return status;
  }));
}

// An all-to-all of device buffers on one stream, each rank's own share included: the send to
// the rank itself and its receive become a copy at their place on the stream (self_transfers.h),
// which the stream's later copy back sees.
TEST(PipelineDevice, AnAllToAllWithItsOwnShareOnOneStream) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  ExpectRanksSucceeded(RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    if (absl::Status s = Cuda(cudaSetDevice(0), "cudaSetDevice"); !s.ok()) return s;
    auto comm = CreateCommunicator(context, PipelineOptions());
    if (!comm.ok()) return comm.status();
    const uint64_t share = 300'007;
    const size_t bytes = share * 2;
    std::vector<std::vector<uint8_t>> mine(2);
    for (int to = 0; to < 2; ++to) {
      mine[to] = GenerateTensor(DataType::kBFloat16, share, {DistKind::kGaussian, 0.02}, 10 * context.rank + to);
    }
    cudaStream_t stream;
    uint8_t *out = nullptr, *in = nullptr, *back = nullptr;
    absl::Status status = Cuda(cudaStreamCreate(&stream), "stream");
    status.Update(Cuda(cudaMalloc(reinterpret_cast<void**>(&out), 2 * bytes), "malloc"));
    status.Update(Cuda(cudaMalloc(reinterpret_cast<void**>(&in), 2 * bytes), "malloc"));
    status.Update(Cuda(cudaMallocHost(reinterpret_cast<void**>(&back), 2 * bytes), "cudaMallocHost"));
    for (int to = 0; to < 2; ++to) {
      status.Update(Cuda(cudaMemcpyAsync(out + to * bytes, mine[to].data(), bytes, cudaMemcpyHostToDevice, stream), "fill"));
    }
    status.Update(Cuda(cudaMemsetAsync(in, 0xA5, 2 * bytes, stream), "clear"));
    (*comm)->GroupStart();
    for (int peer = 0; peer < 2; ++peer) {
      (*comm)->Send(out + peer * bytes, share, DataType::kBFloat16, peer, stream);
      (*comm)->Recv(in + peer * bytes, share, DataType::kBFloat16, peer, stream);
    }
    Operation group = (*comm)->GroupEnd();
    status.Update(Cuda(cudaMemcpyAsync(back, in, 2 * bytes, cudaMemcpyDeviceToHost, stream), "copy back"));
    status.Update(Cuda(cudaStreamSynchronize(stream), "sync"));
    status.Update(WaitOk(group, "group"));
    for (int from = 0; from < 2 && status.ok(); ++from) {
      const std::vector<uint8_t> want =
          GenerateTensor(DataType::kBFloat16, share, {DistKind::kGaussian, 0.02}, 10 * from + context.rank);
      status = ExpectSameBytes(back + from * bytes, want.data(), bytes, absl::StrCat("the share from rank ", from));
    }
    cudaFreeHost(back);
    cudaFree(out);
    cudaFree(in);
    cudaStreamDestroy(stream);
    return status;
  }));
}

// More calls in flight, each on its own stream, than the process has hardware queues: each held
// stream takes a queue, and with more than half of them held some of the pipeline's own copies
// and kernels never ran (H200 runs s15-3 to s15-5; with three of four queues held this test
// hung). The pipeline holds at most half as many streams as there are queues, and a call that
// finds no room waits in Send or Recv until an earlier call lets its stream go
// (held_streams.h). CUDA's default of eight queues here, so four held streams at most, and
// twelve calls a rank.
TEST(PipelineDevice, MoreCallsOnTheirOwnStreamsThanHardwareQueuesFinish) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  constexpr int kCalls = 12;
  constexpr uint64_t kCount = 1'000'003;
  constexpr size_t kBytes = kCount * 2;
  ExpectRanksSucceeded(RunRanks({.world_size = 2, .kill_after = absl::Minutes(2)}, [&](const RankContext& context) -> absl::Status {
    // Read by CUDA when it starts, which is below, in this rank's own process.
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8", 1);
    if (absl::Status s = Cuda(cudaSetDevice(0), "cudaSetDevice"); !s.ok()) return s;
    transport::TransportOptions options = PipelineOptions();
    options.ucx_transports = WithCudaTransports("tcp");
    options.op_timeout = absl::Seconds(60);
    auto comm = CreateCommunicator(context, options);
    if (!comm.ok()) return comm.status();
    std::vector<std::vector<uint8_t>> tensors;
    for (int i = 0; i < kCalls; ++i) {
      tensors.push_back(GenerateTensor(DataType::kBFloat16, kCount, {DistKind::kGaussian, 0.02}, i + 1));
    }
    cudaStream_t streams[kCalls] = {};
    void* buffers[kCalls] = {};
    uint8_t* back = nullptr;  // pinned, before anything is queued (see DeviceRoundTrip)
    absl::Status status = Cuda(cudaMallocHost(reinterpret_cast<void**>(&back), kBytes * kCalls), "cudaMallocHost");
    for (int i = 0; i < kCalls; ++i) {
      status.Update(Cuda(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking), "stream"));
      status.Update(Cuda(cudaMalloc(&buffers[i], kBytes), "cudaMalloc"));
    }
    std::vector<Operation> calls;
    for (int i = 0; status.ok() && i < kCalls; ++i) {
      const CompressionMode mode = i % 2 ? CompressionMode::kOff : CompressionMode::kOn;
      if (context.rank == 0) {
        status.Update(Cuda(cudaMemcpyAsync(buffers[i], tensors[i].data(), kBytes, cudaMemcpyHostToDevice, streams[i]), "fill"));
        calls.push_back((*comm)->Send(buffers[i], kCount, DataType::kBFloat16, 1, streams[i], SendOptions{.compression = mode}));
      } else {
        status.Update(Cuda(cudaMemsetAsync(buffers[i], 0, kBytes, streams[i]), "clear"));
        calls.push_back((*comm)->Recv(buffers[i], kCount, DataType::kBFloat16, 0, streams[i]));
        status.Update(Cuda(cudaMemcpyAsync(back + i * kBytes, buffers[i], kBytes, cudaMemcpyDeviceToHost, streams[i]), "copy back"));
      }
    }
    for (int i = 0; i < kCalls; ++i) {
      if (streams[i] != nullptr) status.Update(Cuda(cudaStreamSynchronize(streams[i]), "sync"));
    }
    for (size_t i = 0; i < calls.size(); ++i) status.Update(WaitOk(calls[i], absl::StrCat("call ", i)));
    for (int i = 0; status.ok() && context.rank == 1 && i < kCalls; ++i) {
      status = ExpectSameBytes(back + i * kBytes, tensors[i].data(), kBytes, absl::StrCat("message ", i));
    }
    for (int i = 0; i < kCalls; ++i) {
      cudaFree(buffers[i]);
      if (streams[i] != nullptr) cudaStreamDestroy(streams[i]);
    }
    cudaFreeHost(back);
    return status;
  }));
}

}  // namespace
}  // namespace ucclzip::testing
