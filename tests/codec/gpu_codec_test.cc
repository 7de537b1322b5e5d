// GPU codec: frames byte-identical to the CPU reference's, cross-decoding both ways, awkward
// sizes and alignments, long sequences on one stream, and hostile frames. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "codec/frame_format.h"
#include "codec_test_util.h"
#include "gpu_codec_fixture.h"
#include "gpu_test.h"
#include "ucclzip/codec.h"

namespace ucclzip::testing {
namespace {

uint64_t FrameBytesOnDevice(uint8_t* frame) {
  uint64_t bytes = 0;
  EXPECT_EQ(cudaMemcpy(&bytes, frame + kFrameBytesFieldOffset, 8, cudaMemcpyDeviceToHost), cudaSuccess);
  return bytes;
}

class GpuCodecTest : public GpuCodecFixture<64ull << 20> {
 protected:
  // GPU compress == CPU compress byte for byte; GPU decodes the CPU frame; CPU decodes the GPU
  // frame. `in_misalign`/`out_misalign` shift the user buffers off alignment.
  void CheckAgainstCpu(DataType dtype, const std::vector<uint8_t>& tensor, const CodecOptions& options = {},
                       size_t in_misalign = 0, size_t out_misalign = 0) {
    const uint64_t count = tensor.size() / ElementSize(dtype);
    SCOPED_TRACE(::testing::Message() << DataTypeName(dtype) << " x" << count << " lane_symbols "
                                      << options.lane_symbols << " misalign " << in_misalign << "/" << out_misalign);
    const auto cpu_frame = CompressToVector(tensor, dtype, options);
    ASSERT_FALSE(cpu_frame.empty());
    const uint64_t capacity = MaxFrameBytes(dtype, count);
    DeviceBuffer input(tensor.size(), in_misalign), frame(capacity), output(tensor.size(), out_misalign);
    input.Upload(tensor);
    ASSERT_TRUE(codec_->Compress(input.get(), count, dtype, frame.get(), capacity, stream_, options).ok());
    ASSERT_TRUE(codec_->StreamStatus(stream_).ok());
    const uint64_t gpu_bytes = FrameBytesOnDevice(frame.get());
    ASSERT_EQ(gpu_bytes, cpu_frame.size());
    const auto gpu_frame = frame.Download(gpu_bytes);
    ASSERT_TRUE(gpu_frame == cpu_frame) << "GPU and CPU frames differ";
    EXPECT_TRUE(frame.GuardsIntact());

    // The GPU decodes the CPU's frame (identical bytes) ...
    DeviceBuffer cpu_frame_dev(cpu_frame.size());
    cpu_frame_dev.Upload(cpu_frame);
    ASSERT_TRUE(codec_->Decompress(cpu_frame_dev.get(), cpu_frame.size(), dtype, output.get(), count, stream_).ok());
    ASSERT_TRUE(codec_->StreamStatus(stream_).ok());
    EXPECT_TRUE(output.Download(tensor.size()) == tensor) << "GPU decode differs from the input";
    EXPECT_TRUE(output.GuardsIntact());
    // ... and the CPU decodes the GPU's.
    std::vector<uint8_t> host_out(tensor.size());
    ASSERT_TRUE(DecompressHost(gpu_frame.data(), gpu_frame.size(), dtype, host_out.data(), count).ok());
    EXPECT_TRUE(host_out == tensor);
  }
};

TEST_F(GpuCodecTest, MatchesCpuOnEveryTypeDistributionAndSize) {
  for (DataType dtype : CompressibleTypes()) {
    for (const Distribution& dist : TestDistributions()) {
      for (uint64_t count : {0ull, 1ull, 4095ull, 4096ull, 4097ull, 100003ull, 1000001ull}) {
        CheckAgainstCpu(dtype, GenerateTensor(dtype, count, dist, count + 3), {});
      }
    }
  }
}

TEST_F(GpuCodecTest, MatchesCpuForEveryLaneLength) {
  const auto tensor = GenerateTensor(DataType::kBFloat16, 3000017, {DistKind::kGaussian, 0.02}, 5);
  for (uint32_t lane_symbols = 32; lane_symbols <= 4096; lane_symbols *= 2) {
    CheckAgainstCpu(DataType::kBFloat16, tensor, {.lane_symbols = lane_symbols});
  }
}

TEST_F(GpuCodecTest, UnalignedUserBuffers) {
  for (DataType dtype : CompressibleTypes()) {
    const auto tensor = GenerateTensor(dtype, 250001, {DistKind::kGaussian, 1.0}, 8);
    CheckAgainstCpu(dtype, tensor, {}, 1, 3);
    CheckAgainstCpu(dtype, tensor, {}, 2, 8);
  }
}

TEST_F(GpuCodecTest, StoredTypesAndStoredOption) {
  CheckAgainstCpu(DataType::kInt32, GenerateTensor(DataType::kInt32, 100001, {DistKind::kRandomBytes, 0}, 1));
  CheckAgainstCpu(DataType::kRaw, GenerateTensor(DataType::kRaw, 77, {DistKind::kRandomBytes, 0}, 1));
  CheckAgainstCpu(DataType::kBFloat16, GenerateTensor(DataType::kBFloat16, 100001, {DistKind::kGaussian, 1.0}, 1),
                  {.compress = false});
}

TEST_F(GpuCodecTest, LargeTensor) {
  const uint64_t count = 64ull << 20;  // 128 MB of bf16
  CheckAgainstCpu(DataType::kBFloat16, GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, 2));
}

TEST_F(GpuCodecTest, ManyCallsQueuedOnOneStream) {
  // The workspace counters reset themselves between calls; queue many without synchronising.
  constexpr int kCalls = 40;
  std::vector<std::vector<uint8_t>> tensors;
  std::vector<std::unique_ptr<DeviceBuffer>> inputs, frames, outputs;
  for (int i = 0; i < kCalls; ++i) {
    const uint64_t count = 5000 + 7919ull * i * i;
    tensors.push_back(GenerateTensor(DataType::kFloat16, count, {DistKind::kLaplace, 0.01 * (i + 1)}, i));
    inputs.push_back(std::make_unique<DeviceBuffer>(tensors[i].size()));
    frames.push_back(std::make_unique<DeviceBuffer>(MaxFrameBytes(DataType::kFloat16, count)));
    outputs.push_back(std::make_unique<DeviceBuffer>(tensors[i].size()));
    inputs[i]->Upload(tensors[i]);
  }
  for (int i = 0; i < kCalls; ++i) {
    const uint64_t count = tensors[i].size() / 2;
    const uint64_t capacity = MaxFrameBytes(DataType::kFloat16, count);
    ASSERT_TRUE(codec_->Compress(inputs[i]->get(), count, DataType::kFloat16, frames[i]->get(), capacity, stream_).ok());
    ASSERT_TRUE(codec_->Decompress(frames[i]->get(), capacity, DataType::kFloat16, outputs[i]->get(), count, stream_).ok());
  }
  ASSERT_TRUE(codec_->StreamStatus(stream_).ok());
  for (int i = 0; i < kCalls; ++i) EXPECT_TRUE(outputs[i]->Download(tensors[i].size()) == tensors[i]) << i;
}

TEST_F(GpuCodecTest, SplitEventMarksTheRawPlane) {
  const auto tensor = GenerateTensor(DataType::kBFloat16, 1 << 20, {DistKind::kGaussian, 0.02}, 4);
  const uint64_t count = 1 << 20;
  auto plan = PlanFrame(DataType::kBFloat16, count);
  ASSERT_TRUE(plan.ok());
  DeviceBuffer input(tensor.size()), frame(plan->max_frame_bytes);
  input.Upload(tensor);
  cudaEvent_t split_done;
  UCCLZIP_CUDA_OK(cudaEventCreateWithFlags(&split_done, cudaEventDisableTiming));
  ASSERT_TRUE(codec_->Compress(input.get(), count, DataType::kBFloat16, frame.get(), plan->max_frame_bytes, stream_, {},
                               split_done).ok());
  UCCLZIP_CUDA_OK(cudaEventSynchronize(split_done));
  // Once the event has fired the raw plane is final: it equals the CPU frame's.
  const auto cpu_frame = CompressToVector(tensor, DataType::kBFloat16);
  std::vector<uint8_t> raw(plan->raw_bytes);
  UCCLZIP_CUDA_OK(cudaMemcpy(raw.data(), frame.get() + plan->raw_offset, raw.size(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(raw.data(), cpu_frame.data() + plan->raw_offset, raw.size()), 0);
  ASSERT_TRUE(codec_->StreamStatus(stream_).ok());
  cudaEventDestroy(split_done);
}

TEST_F(GpuCodecTest, HostileFramesGiveErrorsNotFaults) {
  const uint64_t count = 200000;
  const auto tensor = GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, 6);
  const auto good = CompressToVector(tensor, DataType::kBFloat16, {.lane_symbols = 64});
  auto info = ReadFrameInfo(good.data(), good.size());
  ASSERT_TRUE(info.ok());
  std::mt19937_64 rng(1);
  int rejected = 0;
  for (int trial = 0; trial < 200; ++trial) {
    auto bad = good;
    size_t frame_bytes = bad.size();
    switch (trial % 4) {
      case 0: bad[rng() % codec::kHeaderBytes] ^= 1 + rng() % 255; break;                       // header
      case 1: bad[codec::kHeaderBytes + rng() % codec::kTableBytes] ^= 1 + rng() % 255; break;  // table
      case 2: bad[info->coded_offset + rng() % info->coded_bytes] ^= 1 + rng() % 255; break;   // stream
      case 3: frame_bytes = rng() % bad.size(); break;                                        // truncation
    }
    DeviceBuffer frame(bad.size()), output(tensor.size());
    frame.Upload(bad);
    ASSERT_TRUE(codec_->Decompress(frame.get(), frame_bytes, DataType::kBFloat16, output.get(), count, stream_).ok());
    const absl::Status status = codec_->StreamStatus(stream_);
    const absl::Status cpu = DecompressHost(bad.data(), frame_bytes, DataType::kBFloat16,
                                            std::vector<uint8_t>(tensor.size()).data(), count);
    EXPECT_EQ(status.ok(), cpu.ok()) << "trial " << trial << ": GPU " << status << " CPU " << cpu;
    rejected += !status.ok();
    EXPECT_TRUE(output.GuardsIntact()) << "trial " << trial;
  }
  EXPECT_GT(rejected, 150);
  // The codec stays usable after errors.
  CheckAgainstCpu(DataType::kBFloat16, tensor);
}

// QueueStatusRead and CompletedStatus give each call's verdict once an event after the read has
// fired, with no wait: corrupt and good frames taking turns on one stream, every verdict the
// CPU's, none left over for the next call; and a call made after the last queued read is not
// missed (CompletedStatus then waits for the stream).
TEST_F(GpuCodecTest, CompletedStatusGivesEachCallsVerdictAfterItsEvent) {
  const uint64_t count = 200000;
  const auto tensor = GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, 7);
  const auto good = CompressToVector(tensor, DataType::kBFloat16, {.lane_symbols = 64});
  auto info = ReadFrameInfo(good.data(), good.size());
  ASSERT_TRUE(info.ok());
  cudaEvent_t done;
  UCCLZIP_CUDA_OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  std::mt19937_64 rng(2);
  DeviceBuffer frame(good.size()), output(tensor.size());
  auto corrupt = [&] {
    auto bytes = good;
    bytes[info->coded_offset + rng() % info->coded_bytes] ^= 1 + rng() % 255;
    return bytes;
  };
  int rejected = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const std::vector<uint8_t> bytes = trial % 2 == 0 ? corrupt() : good;
    frame.Upload(bytes);
    ASSERT_TRUE(codec_->Decompress(frame.get(), bytes.size(), DataType::kBFloat16, output.get(), count, stream_).ok());
    ASSERT_TRUE(codec_->QueueStatusRead(stream_).ok());
    UCCLZIP_CUDA_OK(cudaEventRecord(done, stream_));
    UCCLZIP_CUDA_OK(cudaEventSynchronize(done));
    const absl::Status status = codec_->CompletedStatus(stream_);
    const absl::Status cpu = DecompressHost(bytes.data(), bytes.size(), DataType::kBFloat16,
                                            std::vector<uint8_t>(tensor.size()).data(), count);
    EXPECT_EQ(status.ok(), cpu.ok()) << "trial " << trial << ": GPU " << status << " CPU " << cpu;
    if (trial % 2 == 1) EXPECT_TRUE(output.Download(tensor.size()) == tensor) << "trial " << trial << ": a good frame";
    rejected += !cpu.ok();
  }
  EXPECT_GT(rejected, 0) << "no corrupt frame was refused: the test shows nothing";
  // A refused frame decoded after the last queued read.
  std::vector<uint8_t> bad = corrupt();
  while (DecompressHost(bad.data(), bad.size(), DataType::kBFloat16, std::vector<uint8_t>(tensor.size()).data(), count)
             .ok()) {
    bad = corrupt();
  }
  frame.Upload(bad);
  ASSERT_TRUE(codec_->Decompress(frame.get(), bad.size(), DataType::kBFloat16, output.get(), count, stream_).ok());
  EXPECT_FALSE(codec_->CompletedStatus(stream_).ok()) << "a call after the last queued read went unreported";
  EXPECT_TRUE(codec_->StreamStatus(stream_).ok()) << "an error was left over";
  UCCLZIP_CUDA_OK(cudaEventDestroy(done));
}

TEST_F(GpuCodecTest, RejectsBadArguments) {
  DeviceBuffer buf(1 << 20);
  EXPECT_EQ(codec_->Compress(buf.get(), kMaxCount + 1, DataType::kBFloat16, buf.get(), 1 << 20, stream_).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codec_->Compress(buf.get(), 1000, DataType::kBFloat16, buf.get() + 1, 1 << 19, stream_).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codec_->Compress(buf.get(), 100000, DataType::kBFloat16, buf.get(), 1000, stream_).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codec_->Decompress(nullptr, 100, DataType::kBFloat16, buf.get(), 10, stream_).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ucclzip::testing
