// GPU codec: frames byte-identical to the CPU reference's, cross-decoding both ways, awkward
// sizes and alignments, tiles with tables of their own, long sequences on one stream, and hostile
// frames. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <set>

#include "codec/chunk_states.h"
#include "codec/frame_checks.h"
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
    CheckAgainstCpuFrame(dtype, tensor, CompressToVector(tensor, dtype, options), options, in_misalign, out_misalign);
  }

  // CheckAgainstCpu, given the CPU's frame of `tensor`.
  void CheckAgainstCpuFrame(DataType dtype, const std::vector<uint8_t>& tensor, const std::vector<uint8_t>& cpu_frame,
                            const CodecOptions& options, size_t in_misalign = 0, size_t out_misalign = 0) {
    const uint64_t count = tensor.size() / ElementSize(dtype);
    SCOPED_TRACE(::testing::Message() << DataTypeName(dtype) << " x" << count << " lane_symbols "
                                      << options.lane_symbols << " misalign " << in_misalign << "/" << out_misalign);
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

// Tensors whose scale changes along them, as a checkpoint's tensors laid end to end do: most
// tiles take tables of their own, and the GPU's frames are still the CPU's, for every type.
TEST_F(GpuCodecTest, MatchesCpuOnNonStationaryTensors) {
  for (DataType dtype : CompressibleTypes()) {
    const uint64_t block = 150'000, count = 20 * block + 17;
    const auto tensor = MixedScaleTensor(dtype, count, block, 21);
    const auto cpu_frame = CompressToVector(tensor, dtype);
    const uint64_t tiles = codec::DivCeil(count, codec::kTileTargetElements);  // the default lanes: 64 symbols
    EXPECT_GT(TilesWithOwnTables(cpu_frame), tiles / 2) << DataTypeName(dtype) << ": the test shows little";
    CheckAgainstCpuFrame(dtype, tensor, cpu_frame, {});
    if (HasFatalFailure()) return;
  }
}

// One tile, a partial last tile (ending in a partial chunk) and several tiles, at lane lengths
// from the shortest (64 chunks a tile) to the longest (4 chunks a tile), on data that changes
// scale within a tile and holds IEEE special values and random bytes.
TEST_F(GpuCodecTest, MatchesCpuAtEveryTileCountAndLaneLength) {
  uint32_t own_tables = 0;
  for (DataType dtype : {DataType::kBFloat16, DataType::kFloat32, DataType::kFloat8E4M3}) {
    for (uint32_t lane_symbols : {32u, 128u, 512u, 1024u, 4096u}) {
      const uint64_t chunk = uint64_t{codec::kLanes} * lane_symbols;
      const uint64_t tile = chunk << codec::TileChunksLog2(lane_symbols);
      for (uint64_t count : {tile, 2 * tile + chunk / 2 + 3, 5 * tile - 1}) {
        const CodecOptions options{.lane_symbols = lane_symbols};
        const auto tensor = MixedScaleTensor(dtype, count, tile / 2 + 1001, count,
                                             {{DistKind::kSpecialValues, 0}, {DistKind::kRandomBytes, 0}});
        const auto cpu_frame = CompressToVector(tensor, dtype, options);
        own_tables += TilesWithOwnTables(cpu_frame);
        CheckAgainstCpuFrame(dtype, tensor, cpu_frame, options);
        if (HasFatalFailure()) return;
      }
    }
  }
  EXPECT_GT(own_tables, 50u) << "the tensors should give many tiles tables of their own";
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
  const uint64_t count = 64ull << 20;  // 128 MB of bf16: 512 tiles of 4 chunks of 32 lanes of 1024 symbols
  CheckAgainstCpu(DataType::kBFloat16, GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, 0.02}, 2));
  // Its scale changing every 3M elements, most tiles take tables of their own.
  const auto mixed = MixedScaleTensor(DataType::kBFloat16, count, 3'000'017, 2);
  const auto cpu_frame = CompressToVector(mixed, DataType::kBFloat16);
  EXPECT_GT(TilesWithOwnTables(cpu_frame), 256u);
  CheckAgainstCpuFrame(DataType::kBFloat16, mixed, cpu_frame, {});
}

// A frame whose coded symbols pass 4 GiB, which a frame of more than 2^32 elements may hold
// (kMaxFrameCount is 2^33): 7 Gi fp8 elements of 32 equally likely symbols code at about 5 bits
// each, 4.7 GB. The encoder once summed the chunks' places in u32 bytes, which wrapped there and
// placed later chunks over earlier ones; the frame then failed to decode. Needs about 32 GiB of
// free device memory, and skips without it.
TEST(GpuCodec, CodedSymbolsPastFourGiBDecodeLargeTensor) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  constexpr DataType kType = DataType::kFloat8E5M2;
  constexpr uint64_t kCount = 7ull << 30;
  const uint64_t capacity = MaxFrameBytes(kType, kCount);
  size_t free_bytes = 0, total_bytes = 0;
  UCCLZIP_CUDA_OK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // The tensor (decoded in place), the frame, the codec's scratch of two bytes an element, slack.
  const uint64_t needed = kCount + capacity + 2 * kCount + (1ull << 30);
  if (free_bytes < needed) GTEST_SKIP() << "needs " << needed << " bytes of device memory, " << free_bytes << " free";
  auto codec = GpuCodec::Create(kCount);
  ASSERT_TRUE(codec.ok()) << codec.status();
  cudaStream_t stream = nullptr;
  UCCLZIP_CUDA_OK(cudaStreamCreate(&stream));
  const std::unique_ptr<CUstream_st, cudaError_t (*)(cudaStream_t)> stream_owner(stream, cudaStreamDestroy);
  DeviceBuffer tensor_buffer(kCount), frame_buffer(capacity);
  uint8_t* const tensor = tensor_buffer.get();
  uint8_t* const frame = frame_buffer.get();
  // One 64 MiB tile of random symbols below 32, repeated.
  constexpr uint64_t kTile = 64ull << 20;
  std::vector<uint8_t> tile(kTile);
  std::mt19937_64 rng(7);
  for (uint8_t& b : tile) b = static_cast<uint8_t>(rng() & 31);
  for (uint64_t at = 0; at < kCount; at += kTile) {
    UCCLZIP_CUDA_OK(cudaMemcpy(tensor + at, tile.data(), kTile, cudaMemcpyHostToDevice));
  }
  ASSERT_TRUE((*codec)->Compress(tensor, kCount, kType, frame, capacity, stream).ok());
  ASSERT_TRUE((*codec)->StreamStatus(stream).ok());
  const absl::StatusOr<FramePlan> plan = PlanFrame(kType, kCount);
  ASSERT_TRUE(plan.ok());
  const uint64_t frame_bytes = FrameBytesOnDevice(frame);
  EXPECT_GT(frame_bytes - plan->coded_offset, 1ull << 32) << "the coded symbols should pass 4 GiB";
  UCCLZIP_CUDA_OK(cudaMemset(tensor, 0xFF, kCount));
  ASSERT_TRUE((*codec)->Decompress(frame, frame_bytes, kType, tensor, kCount, stream).ok());
  const absl::Status decoded = (*codec)->StreamStatus(stream);
  EXPECT_TRUE(decoded.ok()) << decoded;
  std::vector<uint8_t> back(kTile);
  for (uint64_t at = 0; decoded.ok() && at < kCount; at += kTile) {
    UCCLZIP_CUDA_OK(cudaMemcpy(back.data(), tensor + at, kTile, cudaMemcpyDeviceToHost));
    ASSERT_TRUE(back == tile) << "the decoded tensor differs in its tile at element " << at;
  }
}

// A failed call's CUDA error is the codec's to report, not the next launch check's: a Create
// that ran out of device memory left cudaErrorMemoryAllocation behind, and the caller's next
// cudaGetLastError (PyTorch's check after its next kernel, say) failed a launch that had
// succeeded.
TEST(GpuCodecErrors, AFailedCreateLeavesNoErrorForTheCallersNextCheck) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  const absl::StatusOr<std::unique_ptr<GpuCodec>> codec = GpuCodec::Create(uint64_t{1} << 39);  // 1 TiB of scratch
  ASSERT_FALSE(codec.ok());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
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

// Calls queued on one stream with no wait between them: frames whose tiles take their own
// tables, frames with the global table only, and frames of the modes without tiles, in turn,
// of several types and lane lengths. Each is the CPU's frame, so no call used a count, a table
// or a size that an earlier call left in the workspace.
TEST_F(GpuCodecTest, QueuedCallsLeaveNoTileStateBehind) {
  constexpr int kCalls = 16;
  constexpr DataType kTypes[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat8E5M2, DataType::kFloat32};
  struct Call {
    DataType dtype;
    CodecOptions options;
    std::vector<uint8_t> tensor;
    std::unique_ptr<DeviceBuffer> input, frame;
  };
  std::vector<Call> calls(kCalls);
  uint32_t own_tables = 0;
  for (int i = 0; i < kCalls; ++i) {
    Call& call = calls[i];
    call.dtype = kTypes[i % 4];
    call.options.lane_symbols = i % 3 == 0 ? 0 : 32u << (i % 3);
    const uint64_t count = 300'000 + 77'777ull * i;
    switch (i % 4) {
      case 0:
      case 2: call.tensor = MixedScaleTensor(call.dtype, count, 40'000 + 1'000ull * i, i); break;  // own tables
      case 1: call.tensor = GenerateTensor(call.dtype, count, {DistKind::kGaussian, 0.02}, i); break;  // global only
      case 3:  // split, stored symbols or a constant one
        call.tensor =
            GenerateTensor(call.dtype, count, {i % 8 == 3 ? DistKind::kRandomBytes : DistKind::kConstant, 0.5}, i);
        break;
    }
    const uint64_t capacity = MaxFrameBytes(call.dtype, count);
    call.input = std::make_unique<DeviceBuffer>(call.tensor.size());
    call.frame = std::make_unique<DeviceBuffer>(capacity);
    call.input->Upload(call.tensor);
  }
  for (Call& call : calls) {
    const uint64_t count = call.tensor.size() / ElementSize(call.dtype);
    ASSERT_TRUE(codec_->Compress(call.input->get(), count, call.dtype, call.frame->get(),
                                 MaxFrameBytes(call.dtype, count), stream_, call.options)
                    .ok());
  }
  ASSERT_TRUE(codec_->StreamStatus(stream_).ok());
  std::set<FrameMode> modes;
  for (int i = 0; i < kCalls; ++i) {
    const Call& call = calls[i];
    const auto cpu_frame = CompressToVector(call.tensor, call.dtype, call.options);
    own_tables += TilesWithOwnTables(cpu_frame);
    modes.insert(ReadFrameInfo(cpu_frame.data(), cpu_frame.size())->mode);
    EXPECT_TRUE(call.frame->Download(cpu_frame.size()) == cpu_frame) << "call " << i << " differs from the CPU's frame";
  }
  EXPECT_GT(own_tables, 20u);
  EXPECT_EQ(modes.size(), 3u) << "rANS, stored symbols and a constant symbol";
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

// Hostile chunk state areas (format version 4): codes that make an area outgrow its chunk, codes
// that move every lane's bits, padding bits set. The GPU's verdict is the CPU's, and the decoder
// writes nothing outside its output (under memcheck too).
TEST_F(GpuCodecTest, HostileStateAreasGiveTheCpusVerdict) {
  const DataType dtype = DataType::kBFloat16;
  const CodecOptions options{.lane_symbols = 64};
  const uint64_t count = 2048 * 97 + 40;  // a last chunk of 40 elements, little more than its area
  const auto tensor = GenerateTensor(dtype, count, {DistKind::kGaussian, 0.02}, 11);
  const auto good = CompressToVector(tensor, dtype, options);
  const auto info = ReadFrameInfo(good.data(), good.size());
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->mode, FrameMode::kSplitRans);
  const codec::Layout layout = codec::ComputeLayout(ElementSize(dtype), true, count, options.lane_symbols);
  const auto area_of = [&](uint32_t chunk) {
    return info->coded_offset + uint64_t{codec::ChunkEntry(good.data(), layout, chunk)} * 4;
  };
  struct Case {
    std::vector<uint8_t> frame;
    bool must_fail;  // a size or padding check refuses it; the others fail in the stream's checks
  };
  std::vector<Case> cases;
  int padded_chunks = 0;
  for (uint32_t chunk = 0; chunk < layout.num_chunks; ++chunk) {
    const uint64_t area = area_of(chunk);
    if (chunk == 0 || chunk == layout.num_chunks / 2 || chunk == layout.num_chunks - 1) {
      auto widest = good;  // every lane at code 15: the largest area, past the end of a short chunk
      std::memset(&widest[area], 0xFF, codec::kStateCodeBytes);
      cases.push_back({widest, chunk == layout.num_chunks - 1});
      auto moved = good;  // lane 1's code changed: the bits of lanes 1 to 31 move
      moved[area] ^= 0x10;
      cases.push_back({moved, false});
    }
    uint32_t codes[codec::kStateCodeWords];
    std::memcpy(codes, &good[area], sizeof codes);
    const uint32_t code_sum = codec::CodesBelow(codes, codec::kLanes);
    if (padded_chunks < 3 && codec::StatePadMask(code_sum) != 0) {
      auto padded = good;  // the top bit of the area's last u16 is padding whenever any is
      padded[area + codec::ChunkStateBytes(code_sum) - 1] |= 0x80;
      cases.push_back({padded, true});
      ++padded_chunks;
    }
  }
  ASSERT_EQ(padded_chunks, 3) << "the test needs chunks whose areas end with padding bits";
  const uint64_t last_chunk_bytes = info->coded_offset + info->coded_bytes - area_of(layout.num_chunks - 1);
  ASSERT_LT(last_chunk_bytes, codec::kChunkMaxStateBytes) << "the last chunk must be too short for the widest area";
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& bad = cases[i].frame;
    DeviceBuffer frame(bad.size()), output(tensor.size());
    frame.Upload(bad);
    ASSERT_TRUE(codec_->Decompress(frame.get(), bad.size(), dtype, output.get(), count, stream_).ok());
    const absl::Status status = codec_->StreamStatus(stream_);
    const absl::Status cpu =
        DecompressHost(bad.data(), bad.size(), dtype, std::vector<uint8_t>(tensor.size()).data(), count);
    EXPECT_EQ(status.ok(), cpu.ok()) << "case " << i << ": GPU " << status << " CPU " << cpu;
    if (cases[i].must_fail) EXPECT_FALSE(status.ok()) << "case " << i;
    EXPECT_TRUE(output.GuardsIntact()) << "case " << i;
  }
  CheckAgainstCpu(dtype, tensor);  // the codec stays usable after errors
}

// Garbage in the tile index, in the tiles' own tables, and in the chunk entries that end them,
// in a frame whose tiles all have tables of their own and in one whose tiles but one use the
// global table: the GPU's verdict is the CPU's, and the decoder writes nothing outside its
// output (this test also runs under compute-sanitizer's memcheck, which sees any read out of
// bounds).
TEST_F(GpuCodecTest, HostileTileIndexAndTablesGiveErrorsNotFaults) {
  const DataType dtype = DataType::kBFloat16;
  const uint64_t count = 1'000'003;
  const CodecOptions options{.lane_symbols = 64};
  const codec::Layout layout = codec::ComputeLayout(ElementSize(dtype), true, count, options.lane_symbols);
  // A Gaussian with a short run at another scale: only the run's tile pays for a table.
  auto mostly_global = GenerateTensor(dtype, count, {DistKind::kGaussian, 0.02}, 8);
  const auto run = GenerateTensor(dtype, 2'000, {DistKind::kGaussian, 1.0}, 9);
  std::copy(run.begin(), run.end(), mostly_global.begin() + 2 * 300'000);
  const auto store_u32 = [](std::vector<uint8_t>& frame, uint64_t at, uint32_t value) {
    std::memcpy(&frame[at], &value, 4);
  };
  std::mt19937_64 rng(3);
  int rejected = 0, trials = 0;
  for (const auto& tensor : {MixedScaleTensor(dtype, count, 90'000, 8), mostly_global}) {
    const auto good = CompressToVector(tensor, dtype, options);
    const auto info = ReadFrameInfo(good.data(), good.size());
    ASSERT_TRUE(info.ok());
    ASSERT_EQ(info->mode, FrameMode::kSplitRans);
    std::vector<uint32_t> own_tiles;
    for (uint32_t t = 0; t < layout.num_tiles; ++t) {
      if (codec::TileEntry(good.data(), layout, t) != codec::kGlobalTableTile) own_tiles.push_back(t);
    }
    ASSERT_FALSE(own_tiles.empty()) << "the test needs tiles with their own tables";
    for (int trial = 0; trial < 120; ++trial, ++trials) {
      auto bad = good;
      const uint32_t any_tile = static_cast<uint32_t>(rng() % layout.num_tiles);
      const uint32_t own_tile = own_tiles[rng() % own_tiles.size()];
      const uint64_t any_entry = layout.tile_index_offset + 4ull * any_tile;
      const uint64_t own_entry = layout.tile_index_offset + 4ull * own_tile;
      const uint32_t table_at = codec::TileEntry(good.data(), layout, own_tile);  // 4-byte units
      const uint64_t first_chunk_entry = layout.index_offset + 4ull * (own_tile << layout.tile_chunks_log2);
      const uint32_t first_chunk_at = codec::LoadU32(&good[first_chunk_entry]);
      switch (trial % 6) {
        case 0: bad[any_entry + rng() % 4] ^= 1 + rng() % 255; break;                           // a byte of an entry
        case 1: store_u32(bad, own_entry, codec::kGlobalTableTile); break;                       // a table ignored
        case 2: store_u32(bad, any_entry, static_cast<uint32_t>(rng() % (info->coded_bytes / 4 + 2))); break;
        case 3: store_u32(bad, own_entry, rng() % 2 == 0 ? table_at + 1 : table_at - 1); break;  // a table moved
        case 4:  // a byte of a table: its bitmap, a frequency or the pad word
          bad[layout.coded_offset + 4ull * table_at + rng() % (4ull * (first_chunk_at - table_at))] ^= 1 + rng() % 255;
          break;
        case 5:  // the end of a table: its tile's first chunk entry
          store_u32(bad, first_chunk_entry, rng() % 2 == 0 ? first_chunk_at - 1 : static_cast<uint32_t>(rng()));
          break;
      }
      SCOPED_TRACE(::testing::Message() << own_tiles.size() << " tiles with their own tables, trial " << trial);
      DeviceBuffer frame(bad.size()), output(tensor.size());
      frame.Upload(bad);
      ASSERT_TRUE(codec_->Decompress(frame.get(), bad.size(), dtype, output.get(), count, stream_).ok());
      const absl::Status status = codec_->StreamStatus(stream_);
      std::vector<uint8_t> decoded(tensor.size());
      const absl::Status cpu = DecompressHost(bad.data(), bad.size(), dtype, decoded.data(), count);
      EXPECT_EQ(status.ok(), cpu.ok()) << "GPU " << status << " CPU " << cpu;
      if (status.ok() && cpu.ok()) EXPECT_TRUE(output.Download(tensor.size()) == decoded);
      EXPECT_TRUE(output.GuardsIntact());
      rejected += !status.ok();
    }
  }
  EXPECT_GT(rejected, trials * 3 / 4);
  // The codec stays usable after errors.
  CheckAgainstCpu(dtype, mostly_global, options);
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
