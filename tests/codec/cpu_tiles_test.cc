// Tiles with their own tables (format version 2) on the CPU codec: they are taken where the data
// changes along the tensor and beat any one table there, never taken on stationary data, and
// every type, lane length and tile count round-trips bit for bit.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>

#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "codec_test_util.h"
#include "ucclzip/codec.h"

namespace ucclzip::testing {
namespace {

// The layout of a split frame, as a decoder computes it from the header.
codec::Layout LayoutOf(const std::vector<uint8_t>& frame) {
  const absl::StatusOr<FrameInfo> info = ReadFrameInfo(frame.data(), frame.size());
  EXPECT_TRUE(info.ok()) << info.status();
  return codec::ComputeLayout(ElementSize(info->dtype), true, info->count, info->lane_symbols);
}

FrameMode ModeOf(const std::vector<uint8_t>& frame) { return ReadFrameInfo(frame.data(), frame.size())->mode; }

// The order-0 entropy, in bits, of the symbol bytes (docs/FRAME_FORMAT.md, "The split"): no
// frame that codes the whole tensor with one table can spend fewer bits on its symbols.
double SymbolEntropyBits(const std::vector<uint8_t>& tensor, DataType dtype) {
  const size_t width = ElementSize(dtype);
  const uint32_t shift = width == 4 ? 23 : width == 2 ? 7 : 0;
  std::array<uint64_t, 256> histogram{};
  const uint64_t count = tensor.size() / width;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &tensor[i * width], width);
    ++histogram[(bits >> shift) & 0xFF];
  }
  double bits = 0;
  for (uint64_t n : histogram) {
    if (n != 0) bits -= n * std::log2(static_cast<double>(n) / count);
  }
  return bits;
}

TEST(CpuTiles, NonStationaryTensorsBeatTheBestSingleTable) {
  for (DataType dtype : {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const uint64_t block = 300'000, count = 5 * block;  // each scale once
    const auto tensor = MixedScaleTensor(dtype, count, block, 41);
    const auto frame = CompressToVector(tensor, dtype);
    ASSERT_EQ(ModeOf(frame), FrameMode::kSplitRans);
    const codec::Layout layout = LayoutOf(frame);
    // Only the tiles that straddle two blocks (one per block boundary) may keep the global table.
    EXPECT_GE(TilesWithOwnTables(frame), layout.num_tiles - 4) << "of " << layout.num_tiles;
    // Header, global table, indexes and raw plane, plus the symbols at their entropy.
    const double single_table_floor = layout.coded_offset + SymbolEntropyBits(tensor, dtype) / 8;
    EXPECT_LT(frame.size(), 0.97 * single_table_floor) << "floor " << single_table_floor;
    std::vector<uint8_t> out(tensor.size());
    ASSERT_TRUE(DecompressHost(frame.data(), frame.size(), dtype, out.data(), count).ok());
    EXPECT_EQ(out, tensor);
  }
}

TEST(CpuTiles, StationaryTensorsUseOnlyTheGlobalTable) {
  for (DataType dtype : CompressibleTypes()) {
    for (const Distribution& dist : {Distribution{DistKind::kGaussian, 0.02}, Distribution{DistKind::kLaplace, 1.0}}) {
      SCOPED_TRACE(::testing::Message() << DataTypeName(dtype) << " " << dist.Name());
      const uint64_t count = 2'000'003;
      const auto frame = CompressToVector(GenerateTensor(dtype, count, dist, 5), dtype);
      ASSERT_EQ(ModeOf(frame), FrameMode::kSplitRans);
      EXPECT_GT(LayoutOf(frame).num_tiles, 20u);
      EXPECT_EQ(TilesWithOwnTables(frame), 0u);
    }
  }
}

// Every lane length, with 1 tile, a partial last tile (ending in a partial chunk) and several
// tiles; on data that changes scale within the tile size, IEEE special values and random bytes.
TEST(CpuTiles, EveryTypeLaneLengthAndTileCountRoundTrips) {
  uint32_t own_tables = 0;
  for (DataType dtype : CompressibleTypes()) {
    for (uint32_t lane_symbols = codec::kMinLaneSymbols; lane_symbols <= codec::kMaxLaneSymbols; lane_symbols *= 2) {
      const uint64_t chunk = uint64_t{codec::kLanes} * lane_symbols;
      const uint64_t tile = chunk << codec::TileChunksLog2(lane_symbols);
      for (uint64_t count : {tile, 2 * tile + chunk / 2 + 3, 5 * tile - 1}) {
        const std::vector<std::pair<const char*, std::vector<uint8_t>>> tensors = {
            {"mixed", MixedScaleTensor(dtype, count, tile / 2 + 1001, count,
                                       {{DistKind::kSpecialValues, 0}, {DistKind::kRandomBytes, 0}})},
            {"special", GenerateTensor(dtype, count, {DistKind::kSpecialValues, 0}, count)},
            {"random", GenerateTensor(dtype, count, {DistKind::kRandomBytes, 0}, count)}};
        for (const auto& [name, tensor] : tensors) {
          SCOPED_TRACE(::testing::Message() << DataTypeName(dtype) << " " << name << " x" << count << " lane_symbols "
                                            << lane_symbols);
          const auto frame = CompressToVector(tensor, dtype, {.lane_symbols = lane_symbols});
          ASSERT_FALSE(frame.empty());
          EXPECT_LE(frame.size(), MaxFrameBytes(dtype, count));
          if (ModeOf(frame) == FrameMode::kSplitRans) own_tables += TilesWithOwnTables(frame);
          std::vector<uint8_t> out(tensor.size() + 1, 0xA5);  // one guard byte
          ASSERT_TRUE(DecompressHost(frame.data(), frame.size(), dtype, out.data(), count).ok());
          EXPECT_EQ(std::memcmp(out.data(), tensor.data(), tensor.size()), 0);
          EXPECT_EQ(out.back(), 0xA5) << "decoder wrote past the output";
        }
      }
    }
  }
  EXPECT_GT(own_tables, 100u) << "the mixed tensors should give many tiles tables of their own";
}

}  // namespace
}  // namespace ucclzip::testing
