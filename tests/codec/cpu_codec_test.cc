// CPU reference codec: bit-exact round trips on every type, distribution and awkward size;
// ratios against the entropy bound; stored fallback; determinism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "codec_test_util.h"
#include "ucclzip/codec.h"

namespace ucclzip::testing {
namespace {

struct RoundTripCase {
  DataType dtype;
  Distribution dist;
  uint64_t count;
};

class CpuRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(CpuRoundTrip, IsBitExact) {
  const auto& [dtype, dist, count] = GetParam();
  const auto tensor = GenerateTensor(dtype, count, dist, /*seed=*/count * 31 + static_cast<int>(dtype));
  const auto frame = CompressToVector(tensor, dtype);
  ASSERT_FALSE(frame.empty());
  auto info = ReadFrameInfo(frame.data(), frame.size());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->count, count);
  EXPECT_EQ(info->frame_bytes, frame.size());
  EXPECT_LE(frame.size(), MaxFrameBytes(dtype, count));

  std::vector<uint8_t> out(tensor.size() + 1, 0xA5);  // poisoned, one guard byte
  ASSERT_TRUE(DecompressHost(frame.data(), frame.size(), dtype, out.data(), count).ok());
  EXPECT_TRUE(std::equal(tensor.begin(), tensor.end(), out.begin()));  // memcmp may not take an empty tensor's null
  EXPECT_EQ(out.back(), 0xA5) << "decoder wrote past the output";
}

std::vector<RoundTripCase> AllCases() {
  std::vector<RoundTripCase> cases;
  for (DataType dtype : CompressibleTypes()) {
    for (const Distribution& dist : TestDistributions()) {
      for (uint64_t count : {0ull, 1ull, 2ull, 31ull, 4095ull, 4096ull, 4097ull, 65537ull, 300001ull}) {
        cases.push_back({dtype, dist, count});
      }
    }
  }
  for (DataType dtype : {DataType::kRaw, DataType::kInt32, DataType::kFloat64}) {
    cases.push_back({dtype, {DistKind::kRandomBytes, 0}, 12345});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CpuRoundTrip, ::testing::ValuesIn(AllCases()),
                         [](const auto& info) {
                           std::string name = std::string(DataTypeName(info.param.dtype)) + "_" +
                                              info.param.dist.Name() + "_" + std::to_string(info.param.count);
                           for (char& c : name) {
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(CpuCodec, EveryLaneLengthRoundTrips) {
  const auto tensor = GenerateTensor(DataType::kBFloat16, 200003, {DistKind::kGaussian, 0.02}, 7);
  for (uint32_t lane_symbols = 32; lane_symbols <= 4096; lane_symbols *= 2) {
    const auto frame = CompressToVector(tensor, DataType::kBFloat16, {.lane_symbols = lane_symbols});
    ASSERT_FALSE(frame.empty());
    EXPECT_EQ(ReadFrameInfo(frame.data(), frame.size())->lane_symbols, lane_symbols);
    std::vector<uint8_t> out(tensor.size());
    ASSERT_TRUE(DecompressHost(frame.data(), frame.size(), DataType::kBFloat16, out.data(), 200003).ok());
    EXPECT_EQ(out, tensor) << "lane_symbols " << lane_symbols;
  }
}

TEST(CpuCodec, UnalignedBuffersRoundTrip) {
  const uint64_t count = 70001;
  const auto tensor = GenerateTensor(DataType::kFloat32, count, {DistKind::kGaussian, 1.0}, 3);
  std::vector<uint8_t> input(tensor.size() + 3), frame(MaxFrameBytes(DataType::kFloat32, count) + 5),
      output(tensor.size() + 7);
  std::memcpy(input.data() + 3, tensor.data(), tensor.size());
  auto size = CompressHost(input.data() + 3, count, DataType::kFloat32, frame.data() + 5, frame.size() - 5);
  ASSERT_TRUE(size.ok()) << size.status();
  ASSERT_TRUE(DecompressHost(frame.data() + 5, *size, DataType::kFloat32, output.data() + 7, count).ok());
  EXPECT_EQ(std::memcmp(output.data() + 7, tensor.data(), tensor.size()), 0);
}

TEST(CpuCodec, GaussianBf16ReachesTheEntropyBound) {
  for (double sigma : {1.0, 0.02}) {
    const uint64_t count = 8 << 20;  // 16 MB
    const auto tensor = GenerateTensor(DataType::kBFloat16, count, {DistKind::kGaussian, sigma}, 11);
    const auto frame = CompressToVector(tensor, DataType::kBFloat16);
    const double ratio = static_cast<double>(tensor.size()) / frame.size();
    const EntropyReport bound = MeasureEntropy(tensor.data(), count, DataType::kBFloat16);
    EXPECT_GE(ratio, 0.99 * bound.bound_ratio) << "sigma " << sigma << " bound " << bound.bound_ratio;
    EXPECT_GE(ratio, 1.50) << "sigma " << sigma;
  }
}

TEST(CpuCodec, IncompressibleInputFallsBackToStoredSymbols) {
  for (DataType dtype : CompressibleTypes()) {
    const uint64_t count = 1 << 18;
    const auto tensor = GenerateTensor(dtype, count, {DistKind::kRandomBytes, 0}, 5);
    const auto frame = CompressToVector(tensor, dtype);
    auto info = ReadFrameInfo(frame.data(), frame.size());
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->mode, FrameMode::kSplitStored) << DataTypeName(dtype);
    // Worst-case expansion: the fixed header and table, plus at most 0.5 %.
    EXPECT_LE(frame.size(), tensor.size() + 576 + tensor.size() / 200) << DataTypeName(dtype);
  }
}

TEST(CpuCodec, ConstantExponentsNeedNoCoding) {
  const auto tensor = GenerateTensor(DataType::kBFloat16, 100000, {DistKind::kConstant, 1.5}, 1);
  const auto frame = CompressToVector(tensor, DataType::kBFloat16);
  EXPECT_EQ(ReadFrameInfo(frame.data(), frame.size())->mode, FrameMode::kSplitConstant);
  EXPECT_LT(frame.size(), tensor.size() / 2 + 1024);
}

// Mode 2 codes no symbol, but the raw parts that rANS lanes would carry still travel (in the
// coded area): every symbol alike, every raw part random, and last chunks shorter than the
// carried steps, partial, and whole.
TEST(CpuCodec, ConstantSymbolsWithRandomRawPartsRoundTrip) {
  for (DataType dtype : {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32}) {
    for (uint64_t count : {4097ull, 2048ull * 5 + 40, 300001ull, 8192ull}) {
      auto tensor = GenerateTensor(dtype, count, {DistKind::kRandomBytes, 0}, count);
      for (uint64_t i = 0; i < count; ++i) {
        if (dtype == DataType::kFloat32) {
          uint32_t v;
          std::memcpy(&v, tensor.data() + 4 * i, 4);
          v = (v & 0x807FFFFFu) | (0x7Eu << 23);  // the symbol is the exponent
          std::memcpy(tensor.data() + 4 * i, &v, 4);
        } else {
          uint16_t v;
          std::memcpy(&v, tensor.data() + 2 * i, 2);
          v = static_cast<uint16_t>((v & 0x807Fu) | (0x7Eu << 7));  // the symbol is bits 14..7
          std::memcpy(tensor.data() + 2 * i, &v, 2);
        }
      }
      const auto frame = CompressToVector(tensor, dtype);
      ASSERT_EQ(ReadFrameInfo(frame.data(), frame.size())->mode, FrameMode::kSplitConstant)
          << DataTypeName(dtype) << " x" << count;
      std::vector<uint8_t> out(tensor.size());
      ASSERT_TRUE(DecompressHost(frame.data(), frame.size(), dtype, out.data(), count).ok());
      EXPECT_EQ(out, tensor) << DataTypeName(dtype) << " x" << count;
    }
  }
}

TEST(CpuCodec, EncodingIsDeterministic) {
  const auto tensor = GenerateTensor(DataType::kFloat16, 123457, {DistKind::kLaplace, 0.05}, 9);
  EXPECT_EQ(CompressToVector(tensor, DataType::kFloat16), CompressToVector(tensor, DataType::kFloat16));
}

TEST(CpuCodec, CompressionCanBeTurnedOff) {
  const auto tensor = GenerateTensor(DataType::kBFloat16, 10000, {DistKind::kGaussian, 1.0}, 2);
  const auto frame = CompressToVector(tensor, DataType::kBFloat16, {.compress = false});
  EXPECT_EQ(ReadFrameInfo(frame.data(), frame.size())->mode, FrameMode::kStored);
  EXPECT_EQ(frame.size(), tensor.size() + kFrameHeaderBytes);
}

TEST(CpuCodec, RejectsBadArguments) {
  std::vector<uint8_t> data(1024), frame(4096);
  auto too_small = CompressHost(data.data(), 512, DataType::kBFloat16, frame.data(), 100);
  EXPECT_EQ(too_small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_small.status().message().find("capacity 100"), std::string::npos) << too_small.status();
  EXPECT_FALSE(CompressHost(nullptr, 10, DataType::kBFloat16, frame.data(), frame.size()).ok());
  EXPECT_FALSE(CompressHost(data.data(), 10, static_cast<DataType>(200), frame.data(), frame.size()).ok());
  EXPECT_FALSE(PlanFrame(DataType::kBFloat16, 1000, {.lane_symbols = 100}).ok());
  // Chunk offsets are u32 counts of 4-byte units: past 2^33 elements they could wrap.
  EXPECT_TRUE(PlanFrame(DataType::kBFloat16, uint64_t{1} << 33).ok());
  auto too_many = PlanFrame(DataType::kBFloat16, (uint64_t{1} << 33) + 1);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("the most one frame holds"), std::string::npos) << too_many.status();
}

TEST(CpuCodec, DecoderRejectsWrongTypeOrCount) {
  const auto tensor = GenerateTensor(DataType::kBFloat16, 50000, {DistKind::kGaussian, 1.0}, 4);
  const auto frame = CompressToVector(tensor, DataType::kBFloat16);
  std::vector<uint8_t> out(tensor.size() * 2);
  auto wrong_type = DecompressHost(frame.data(), frame.size(), DataType::kFloat16, out.data(), 50000);
  EXPECT_EQ(wrong_type.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_type.message().find("fp16 x50000"), std::string::npos) << wrong_type;
  auto wrong_count = DecompressHost(frame.data(), frame.size(), DataType::kBFloat16, out.data(), 49999);
  EXPECT_EQ(wrong_count.code(), absl::StatusCode::kInvalidArgument);
}

// Buffers for the frame head of blocks of up to N elements (the pipeline's pinned heads) are
// sized by MaxFrameHeadBytes(N); a shorter block may have the longer index (its default lanes
// are shorter), which once overflowed such a buffer.
TEST(FramePlan, MaxFrameHeadBytesBoundsEveryShorterFrame) {
  for (DataType dtype : {DataType::kBFloat16, DataType::kFloat32, DataType::kFloat8E4M3}) {
    for (uint64_t limit : {uint64_t{4096}, uint64_t{1} << 20, uint64_t{8} << 20, uint64_t{32} << 20}) {
      const uint64_t bound = MaxFrameHeadBytes(dtype, limit);
      uint64_t largest_default = 0;
      // Every count would take long; these cover each lane-length step and its neighbours.
      for (uint64_t count = 1; count <= limit; count = count < 8192 ? count + 97 : count * 1.01) {
        for (uint32_t lane_symbols : {0u, 32u, 1024u}) {
          absl::StatusOr<FramePlan> plan = PlanFrame(dtype, count, CodecOptions{.lane_symbols = lane_symbols});
          ASSERT_TRUE(plan.ok()) << plan.status();
          if (lane_symbols == 0) largest_default = std::max(largest_default, plan->raw_offset);
          ASSERT_LE(plan->raw_offset, bound) << DataTypeName(dtype) << " x" << count << " under a bound for " << limit;
        }
      }
      if (limit >= (uint64_t{8} << 20)) {  // above the shortest default lanes
        EXPECT_GT(largest_default, PlanFrame(dtype, limit)->raw_offset) << "shorter default frames have longer heads";
      }
    }
  }
}

}  // namespace
}  // namespace ucclzip::testing
