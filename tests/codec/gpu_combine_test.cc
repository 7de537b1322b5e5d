// GPU decompress-and-combine: the bits of Decompress followed by ReduceOnDevice, and of the CPU's
// DecompressHost followed by ReduceOnHost, for every compressed type, operator (avg with and
// without its divisor), frame mode and awkward size, in place and out of place, aligned or not,
// on data full of special values, on frames whose tiles have tables of their own; corrupt
// frames give errors, never faults or writes outside the result. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <string>

#include "codec/frame_format.h"
#include "codec_test_util.h"
#include "gpu_codec_fixture.h"
#include "gpu_test.h"
#include "ucclzip/codec.h"
#include "ucclzip/reduction.h"

namespace ucclzip::testing {
namespace {

struct Combination {
  ReduceOp op;
  uint32_t divisor;
};

// Every operator, and avg both on an inner hop (a sum) and on the last (divided by the world size).
constexpr Combination kCombinations[] = {{ReduceOp::kSum, 1}, {ReduceOp::kProd, 1}, {ReduceOp::kMin, 1},
                                         {ReduceOp::kMax, 1}, {ReduceOp::kAvg, 1},  {ReduceOp::kAvg, 3}};

// A NaN of `dtype` with a payload and sign drawn from `rng` (e4m3 has only its two NaNs).
void WriteNaN(DataType dtype, uint8_t* element, std::mt19937_64& rng) {
  const uint64_t r = rng();
  const bool negative = r & 1;
  switch (dtype) {
    case DataType::kFloat32: {
      const uint32_t bits = 0x7F800000u | std::max<uint32_t>(static_cast<uint32_t>(r >> 8) & 0x7FFFFF, 1) |
                            (negative ? 0x80000000u : 0);
      std::memcpy(element, &bits, 4);
      return;
    }
    case DataType::kBFloat16:
    case DataType::kFloat16: {
      const bool bf16 = dtype == DataType::kBFloat16;
      const uint16_t mantissa_mask = bf16 ? 0x7F : 0x3FF;
      const uint16_t bits = static_cast<uint16_t>((bf16 ? 0x7F80 : 0x7C00) |
                                                  std::max<uint16_t>(static_cast<uint16_t>(r >> 8) & mantissa_mask, 1) |
                                                  (negative ? 0x8000 : 0));
      std::memcpy(element, &bits, 2);
      return;
    }
    case DataType::kFloat8E5M2:
      *element = static_cast<uint8_t>(0x7C | std::max<uint64_t>((r >> 8) & 3, 1) | (negative ? 0x80 : 0));
      return;
    default: *element = negative ? 0xFF : 0x7F; return;  // e4m3
  }
}

// The generator's special values (infinities, signed zeros, subnormals, the largest finite
// value) with one element in eight a NaN with a payload besides.
std::vector<uint8_t> SpecialValuesWithNaNs(DataType dtype, uint64_t count, uint64_t seed) {
  std::vector<uint8_t> tensor = GenerateTensor(dtype, count, {DistKind::kSpecialValues, 0}, seed);
  std::mt19937_64 rng(seed);
  const size_t width = ElementSize(dtype);
  for (uint64_t i = 0; i < count; ++i) {
    if (rng() % 8 == 0) WriteNaN(dtype, &tensor[i * width], rng);
  }
  return tensor;
}

// The received tensor and the local one of a case, from one source of values.
struct Operands {
  std::string name;
  std::vector<uint8_t> received, local;
};

std::vector<Operands> OperandsOf(DataType dtype, uint64_t count) {
  std::vector<Operands> cases;
  cases.push_back({"special+nan", SpecialValuesWithNaNs(dtype, count, count + 1),
                   SpecialValuesWithNaNs(dtype, count, count + 2)});
  for (const Distribution dist : {Distribution{DistKind::kGaussian, 1e-3}, Distribution{DistKind::kGaussian, 1.0},
                                  Distribution{DistKind::kGaussian, 1e3}, Distribution{DistKind::kRandomBytes, 0},
                                  Distribution{DistKind::kConstant, 0.75}}) {
    cases.push_back({dist.Name(), GenerateTensor(dtype, count, dist, count + 3), GenerateTensor(dtype, count, dist, count + 4)});
  }
  return cases;
}

class GpuCombineTest : public GpuCodecFixture<1'000'003> {
 protected:
  // Compresses `received` on the CPU, then for each combination checks that the fused kernel,
  // out of place and in place (result == local), gives the bits of the two kernels and of the
  // CPU. `misalign` shifts the local and result buffers off their element alignment. Returns the
  // frame's mode.
  FrameMode CheckCombinations(DataType dtype, const std::vector<uint8_t>& received, const std::vector<uint8_t>& local,
                              const CodecOptions& options = {}, size_t misalign = 0) {
    const uint64_t count = received.size() / ElementSize(dtype);
    const std::vector<uint8_t> frame = CompressToVector(received, dtype, options);
    const absl::StatusOr<FrameInfo> info = ReadFrameInfo(frame.data(), frame.size());
    if (!info.ok()) {
      ADD_FAILURE() << "the CPU's frame: " << info.status();
      return FrameMode::kStored;
    }
    std::vector<uint8_t> decoded(received.size());
    EXPECT_TRUE(DecompressHost(frame.data(), frame.size(), dtype, decoded.data(), count).ok());
    DeviceBuffer frame_dev(frame.size()), local_dev(local.size(), misalign), decoded_dev(received.size()),
        two_kernels(received.size()), fused(received.size(), misalign), in_place(local.size(), misalign);
    frame_dev.Upload(frame);
    local_dev.Upload(local);
    for (const Combination c : kCombinations) {
      SCOPED_TRACE(::testing::Message() << ReduceOpName(c.op) << " / " << c.divisor);
      std::vector<uint8_t> want(received.size());
      EXPECT_TRUE(ReduceOnHost(dtype, c.op, decoded.data(), local.data(), want.data(), count, c.divisor).ok());
      EXPECT_TRUE(codec_->Decompress(frame_dev.get(), frame.size(), dtype, decoded_dev.get(), count, stream_).ok());
      EXPECT_TRUE(ReduceOnDevice(dtype, c.op, decoded_dev.get(), local_dev.get(), two_kernels.get(), count, stream_,
                                 c.divisor)
                      .ok());
      EXPECT_TRUE(codec_->DecompressAndCombine(frame_dev.get(), frame.size(), dtype, local_dev.get(), fused.get(),
                                               count, c.op, c.divisor, stream_)
                      .ok());
      in_place.Upload(local);
      EXPECT_TRUE(codec_->DecompressAndCombine(frame_dev.get(), frame.size(), dtype, in_place.get(), in_place.get(),
                                               count, c.op, c.divisor, stream_)
                      .ok());
      const absl::Status status = codec_->StreamStatus(stream_);
      EXPECT_TRUE(status.ok()) << status;
      EXPECT_TRUE(two_kernels.Download(want.size()) == want) << "decode, then reduce: not the CPU's bits";
      EXPECT_TRUE(fused.Download(want.size()) == want) << "fused out of place: not the CPU's bits";
      EXPECT_TRUE(in_place.Download(want.size()) == want) << "fused in place: not the CPU's bits";
      EXPECT_TRUE(local_dev.Download(local.size()) == local) << "out of place, the local operand changed";
      if (::testing::Test::HasFailure()) break;  // one combination's report is enough
    }
    EXPECT_TRUE(fused.GuardsIntact());
    EXPECT_TRUE(in_place.GuardsIntact());
    return info->mode;
  }
};

TEST_F(GpuCombineTest, GivesTheBitsOfDecodeThenReduceForEveryTypeOperatorAndSize) {
  for (DataType dtype : CompressibleTypes()) {
    std::set<FrameMode> modes;
    for (uint64_t count : {1ull, 31ull, 4097ull, 100'003ull, 1'000'003ull}) {
      for (const Operands& operands : OperandsOf(dtype, count)) {
        SCOPED_TRACE(::testing::Message() << DataTypeName(dtype) << " x" << count << " " << operands.name);
        modes.insert(CheckCombinations(dtype, operands.received, operands.local));
        if (HasFailure()) return;
      }
    }
    // Small tensors are stored; above kMinSplitCount, random bytes store their symbols, a
    // constant codes none and the rest are rANS-coded.
    EXPECT_EQ(modes.size(), 4u) << DataTypeName(dtype);
  }
}

TEST_F(GpuCombineTest, EveryFrameModeOfEveryType) {
  for (DataType dtype : CompressibleTypes()) {
    const uint64_t count = 100'003;
    const auto gaussian = GenerateTensor(dtype, count, {DistKind::kGaussian, 1.0}, 7);
    const auto local = GenerateTensor(dtype, count, {DistKind::kGaussian, 1.0}, 8);
    // Random bytes spread the symbols over all 256 values: rANS would not pay, so they are stored.
    const auto random = GenerateTensor(dtype, count, {DistKind::kRandomBytes, 0}, 9);
    SCOPED_TRACE(DataTypeName(dtype));
    EXPECT_EQ(CheckCombinations(dtype, gaussian, local, {.compress = false}), FrameMode::kStored);
    EXPECT_EQ(CheckCombinations(dtype, GenerateTensor(dtype, count, {DistKind::kConstant, -2.5}, 10), local),
              FrameMode::kSplitConstant);
    EXPECT_EQ(CheckCombinations(dtype, gaussian, local), FrameMode::kSplitRans);
    // Short lanes cost a chunk state per 32 symbols: fp8 e4m3 at sigma 1 then stores instead
    // (ratio 0.990 on the CPU reference, which writes the same frames; H200 run s7-3), so the
    // short-lane frames code a narrower Gaussian (e4m3: 1.302).
    const auto narrow = GenerateTensor(dtype, count, {DistKind::kGaussian, 0.02}, 7);
    EXPECT_EQ(CheckCombinations(dtype, narrow, local, {.lane_symbols = 32}), FrameMode::kSplitRans);
    EXPECT_EQ(CheckCombinations(dtype, random, local), FrameMode::kSplitStored);
  }
}

// Frames whose tiles code with tables of their own (format v2), at the default lanes (32 chunks
// a tile) and the longest (4 chunks a tile, one decoding block's worth).
TEST_F(GpuCombineTest, FramesWithTilesOwnTables) {
  for (DataType dtype : CompressibleTypes()) {
    const uint64_t count = 1'000'003;
    const auto received = MixedScaleTensor(dtype, count, 300'001, 14);
    const auto local = GenerateTensor(dtype, count, {DistKind::kGaussian, 1.0}, 15);
    for (const CodecOptions options : {CodecOptions{}, CodecOptions{.lane_symbols = 4096}}) {
      SCOPED_TRACE(::testing::Message() << DataTypeName(dtype) << " lane_symbols " << options.lane_symbols);
      EXPECT_GT(TilesWithOwnTables(CompressToVector(received, dtype, options)), 0u) << "the test shows nothing";
      EXPECT_EQ(CheckCombinations(dtype, received, local, options), FrameMode::kSplitRans);
      if (HasFailure()) return;
    }
  }
}

TEST_F(GpuCombineTest, UnalignedLocalAndResult) {
  for (DataType dtype : CompressibleTypes()) {
    const uint64_t count = 100'003;
    const auto received = GenerateTensor(dtype, count, {DistKind::kGaussian, 1.0}, 11);
    const auto local = GenerateTensor(dtype, count, {DistKind::kGaussian, 1.0}, 12);
    for (size_t misalign : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << DataTypeName(dtype) << " misaligned by " << misalign);
      EXPECT_EQ(CheckCombinations(dtype, received, local, {}, misalign), FrameMode::kSplitRans);
      EXPECT_EQ(CheckCombinations(dtype, received, local, {.compress = false}, misalign), FrameMode::kStored);
    }
  }
}

// Flipped bytes in every part of a frame and truncations, combined in place: the status is the
// CPU decoder's verdict, nothing outside the result is written, and a frame that the checks
// cannot tell from a sound one (a flip in the raw plane) combines as the CPU decodes it. The
// coded frames are of a Gaussian (the global table only) and of a tensor whose scale changes
// (tiles with their own tables, which the flips in the coded area also hit).
TEST_F(GpuCombineTest, CorruptFramesGiveErrorsNotFaults) {
  const DataType dtype = DataType::kBFloat16;
  const uint64_t count = 200'000;
  const auto gaussian = GenerateTensor(dtype, count, {DistKind::kGaussian, 0.02}, 12);
  const auto mixed = MixedScaleTensor(dtype, count, 30'000, 16);
  const auto local = GenerateTensor(dtype, count, {DistKind::kGaussian, 0.02}, 13);
  std::mt19937_64 rng(2);
  int rejected = 0, trials = 0;
  struct Source {
    const char* name;
    const std::vector<uint8_t>& tensor;
    CodecOptions options;
  };
  const Source sources[] = {{"rANS, global table", gaussian, {.lane_symbols = 64}},
                            {"rANS, own tables", mixed, {.lane_symbols = 64}},
                            {"stored", gaussian, {.compress = false}}};
  for (const auto& [name, tensor, options] : sources) {
    const auto good = CompressToVector(tensor, dtype, options);
    const absl::StatusOr<FrameInfo> info = ReadFrameInfo(good.data(), good.size());
    ASSERT_TRUE(info.ok()) << info.status();
    const bool coded = info->coded_bytes > 0;
    for (int trial = 0; trial < 120; ++trial, ++trials) {
      auto bad = good;
      size_t frame_bytes = bad.size();
      switch (trial % 5) {
        case 0: bad[rng() % codec::kHeaderBytes] ^= 1 + rng() % 255; break;  // header
        case 1:  // table (rANS) or elements (stored)
          bad[coded ? codec::kHeaderBytes + rng() % codec::kTableBytes : info->raw_offset + rng() % info->raw_bytes] ^=
              1 + rng() % 255;
          break;
        case 2:  // coded stream, or the header again
          bad[coded ? info->coded_offset + rng() % info->coded_bytes : rng() % codec::kHeaderBytes] ^= 1 + rng() % 255;
          break;
        case 3: bad[info->raw_offset + rng() % info->raw_bytes] ^= 1 + rng() % 255; break;  // raw plane
        case 4: frame_bytes = rng() % bad.size(); break;                                    // truncation
      }
      SCOPED_TRACE(::testing::Message() << name << " frame, trial " << trial);
      DeviceBuffer frame(bad.size()), result(local.size(), trial % 3);
      frame.Upload(bad);
      result.Upload(local);
      ASSERT_TRUE(codec_->DecompressAndCombine(frame.get(), frame_bytes, dtype, result.get(), result.get(), count,
                                               ReduceOp::kSum, 1, stream_)
                      .ok());
      const absl::Status status = codec_->StreamStatus(stream_);
      std::vector<uint8_t> decoded(tensor.size());
      const absl::Status cpu = DecompressHost(bad.data(), frame_bytes, dtype, decoded.data(), count);
      EXPECT_EQ(status.ok(), cpu.ok()) << "GPU " << status << " CPU " << cpu;
      EXPECT_TRUE(result.GuardsIntact());
      if (status.ok() && cpu.ok()) {
        std::vector<uint8_t> want(local.size());
        ASSERT_TRUE(ReduceOnHost(dtype, ReduceOp::kSum, decoded.data(), local.data(), want.data(), count).ok());
        EXPECT_TRUE(result.Download(want.size()) == want);
      }
      rejected += !status.ok();
    }
  }
  // Header, table, stream and truncation trials of the rANS frames, header and truncation ones of
  // the stored frame, are almost all rejected.
  EXPECT_GT(rejected, trials / 2);
  // The codec stays usable after errors.
  CheckCombinations(dtype, mixed, local);
}

TEST_F(GpuCombineTest, RejectsBadArguments) {
  DeviceBuffer buf(1 << 20);
  const uint64_t capacity = 1 << 19;
  auto code = [&](const void* frame, DataType dtype, const void* local, void* result, ReduceOp op, uint32_t divisor) {
    return codec_->DecompressAndCombine(frame, capacity, dtype, local, result, 1000, op, divisor, stream_).code();
  };
  uint8_t* const b = buf.get();
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(b, DataType::kInt32, b + 4096, b + 8192, ReduceOp::kSum, 1), kInvalid);  // never compressed
  EXPECT_EQ(code(b, static_cast<DataType>(200), b + 4096, b + 8192, ReduceOp::kSum, 1), kInvalid);
  EXPECT_EQ(code(b, DataType::kBFloat16, b + 4096, b + 8192, static_cast<ReduceOp>(9), 1), kInvalid);
  EXPECT_EQ(code(b, DataType::kBFloat16, b + 4096, b + 8192, ReduceOp::kAvg, 0), kInvalid);
  EXPECT_EQ(code(b, DataType::kBFloat16, nullptr, b + 8192, ReduceOp::kSum, 1), kInvalid);
  EXPECT_EQ(code(b, DataType::kBFloat16, b + 4096, nullptr, ReduceOp::kSum, 1), kInvalid);
  EXPECT_EQ(code(nullptr, DataType::kBFloat16, b + 4096, b + 8192, ReduceOp::kSum, 1), kInvalid);
  EXPECT_EQ(code(b + 8, DataType::kBFloat16, b + 4096, b + 8192, ReduceOp::kSum, 1), kInvalid);  // frame unaligned
  EXPECT_TRUE(codec_->StreamStatus(stream_).ok()) << "nothing was launched";
}

}  // namespace
}  // namespace ucclzip::testing
