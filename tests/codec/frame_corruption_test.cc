// The decoder against hostile frames: every truncation, every header byte changed, corrupted
// tables, indexes, tiles' own tables and streams. Each must give an error or (where the damage
// hits only raw payload) some output -- never a crash or a write outside the output buffer.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <span>

#include "codec/chunk_states.h"
#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "codec_test_util.h"
#include "ucclzip/codec.h"

namespace ucclzip::testing {
namespace {

// A bf16 frame and a guarded decoder for its damaged copies.
class CorruptionTest : public ::testing::Test {
 protected:
  void Prepare(std::vector<uint8_t> tensor, uint32_t lane_symbols) {
    tensor_ = std::move(tensor);
    count_ = tensor_.size() / 2;
    frame_ = CompressToVector(tensor_, DataType::kBFloat16, {.lane_symbols = lane_symbols});
    absl::StatusOr<FrameInfo> info = ReadFrameInfo(frame_.data(), frame_.size());
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_EQ(info->mode, FrameMode::kSplitRans);
    info_ = *info;
    layout_ = codec::ComputeLayout(2, true, count_, lane_symbols);
  }

  // Decodes into a guarded buffer; fails the test if the decoder wrote outside the output.
  absl::Status Decode(const std::vector<uint8_t>& frame) {
    std::vector<uint8_t> out(tensor_.size() + 64, 0xCD);
    absl::Status status = DecompressHost(frame.data(), frame.size(), DataType::kBFloat16, out.data() + 32, count_);
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(out[i], 0xCD);
      EXPECT_EQ(out[out.size() - 1 - i], 0xCD);
    }
    return status;
  }

  std::vector<uint8_t> tensor_, frame_;
  uint64_t count_ = 0;
  FrameInfo info_{};
  codec::Layout layout_{};
};

constexpr uint64_t kCount = 20000;

class FrameCorruption : public CorruptionTest {
 protected:
  void SetUp() override {
    Prepare(GenerateTensor(DataType::kBFloat16, kCount, {DistKind::kGaussian, 0.02}, 17), 64);
  }
};

TEST_F(FrameCorruption, EveryTruncationIsRejected) {
  for (size_t len = 0; len < frame_.size(); len += (len < 1024 ? 1 : 97)) {
    std::vector<uint8_t> cut(frame_.begin(), frame_.begin() + len);
    EXPECT_FALSE(Decode(cut).ok()) << "length " << len;
  }
}

TEST_F(FrameCorruption, EveryHeaderByteIsChecked) {
  for (size_t byte = 0; byte < codec::kHeaderBytes; ++byte) {
    for (uint8_t flip : {0x01, 0x80, 0xFF}) {
      auto bad = frame_;
      bad[byte] ^= flip;
      EXPECT_FALSE(Decode(bad).ok()) << "byte " << byte << " ^ " << int(flip);
    }
  }
}

TEST_F(FrameCorruption, CorruptTableIsRejected) {
  auto bad = frame_;
  uint16_t f;
  std::memcpy(&f, bad.data() + codec::kHeaderBytes + 2 * 120, 2);
  f += 1;
  std::memcpy(bad.data() + codec::kHeaderBytes + 2 * 120, &f, 2);
  EXPECT_EQ(Decode(bad).code(), absl::StatusCode::kDataLoss);
}

TEST_F(FrameCorruption, CorruptIndexIsRejected) {
  for (uint32_t value : {0xFFFFFFFFu, 0x7FFFFFFFu, 1u}) {
    auto bad = frame_;
    std::memcpy(bad.data() + layout_.index_offset + 4 * 3, &value, 4);
    EXPECT_FALSE(Decode(bad).ok()) << value;
  }
}

TEST_F(FrameCorruption, OtherVersionsAreRefusedByName) {
  for (uint16_t version : {uint16_t{1}, uint16_t{2}, uint16_t{3}, uint16_t{5}}) {
    auto old = frame_;
    std::memcpy(old.data() + 4, &version, 2);
    for (const absl::Status& status : {Decode(old), ReadFrameInfo(old.data(), old.size()).status()}) {
      EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
      EXPECT_NE(status.message().find("frame version " + std::to_string(version)), std::string::npos) << status;
      EXPECT_NE(status.message().find("reads version 4"), std::string::npos) << status;
    }
  }
}

// Chunk state areas (format version 4, chunk_states.h) made hostile: every lane at the longest
// code, which takes a short last chunk's area past its end and moves every lane's bits in a
// long one; one lane's code changed, which moves the bits of the lanes after it; a padding bit
// set. Each frame is refused, and the decoder writes nothing outside its output.
class StateAreaCorruption : public CorruptionTest {
 protected:
  void SetUp() override {
    // Four whole chunks of 64-symbol lanes and a last one of 40 elements, shorter than the
    // widest area.
    Prepare(GenerateTensor(DataType::kBFloat16, 4 * 2048 + 40, {DistKind::kGaussian, 0.02}, 19), 64);
  }
  uint64_t AreaOf(uint32_t chunk) const {
    return info_.coded_offset + uint64_t{codec::ChunkEntry(frame_.data(), layout_, chunk)} * 4;
  }
  uint32_t CodeSum(uint32_t chunk) const {
    uint32_t codes[codec::kStateCodeWords];
    std::memcpy(codes, &frame_[AreaOf(chunk)], sizeof codes);
    return codec::CodesBelow(codes, codec::kLanes);
  }
};

TEST_F(StateAreaCorruption, HostileAreasAreRefused) {
  const uint32_t last = layout_.num_chunks - 1;
  ASSERT_EQ(layout_.num_chunks, 5u);
  ASSERT_LT(info_.coded_offset + info_.coded_bytes - AreaOf(last), codec::kChunkMaxStateBytes)
      << "the last chunk must be too short for the widest area";
  for (uint32_t chunk : {0u, last}) {
    auto widest = frame_;
    std::memset(&widest[AreaOf(chunk)], 0xFF, codec::kStateCodeBytes);
    EXPECT_EQ(Decode(widest).code(), absl::StatusCode::kDataLoss) << "chunk " << chunk;
    auto moved = frame_;
    moved[AreaOf(chunk)] ^= 0x10;  // lane 1's code
    EXPECT_EQ(Decode(moved).code(), absl::StatusCode::kDataLoss) << "chunk " << chunk;
  }
  int padded = 0;
  for (uint32_t chunk = 0; chunk < layout_.num_chunks; ++chunk) {
    const uint32_t code_sum = CodeSum(chunk);
    if (codec::StatePadMask(code_sum) == 0) continue;
    auto bad = frame_;
    bad[AreaOf(chunk) + codec::ChunkStateBytes(code_sum) - 1] |= 0x80;  // the area's last bit is padding
    EXPECT_EQ(Decode(bad).code(), absl::StatusCode::kDataLoss) << "chunk " << chunk;
    ++padded;
  }
  EXPECT_GT(padded, 0) << "the test needs areas that end with padding bits";
}

TEST_F(FrameCorruption, RandomDamageNeverEscapesTheBuffers) {
  std::mt19937_64 rng(23);
  int rejected = 0;
  for (int trial = 0; trial < 400; ++trial) {
    auto bad = frame_;
    // Damage the coded section, where a change must be detected by the stream checks.
    const uint64_t at = info_.coded_offset + rng() % info_.coded_bytes;
    bad[at] ^= static_cast<uint8_t>(1 + rng() % 255);
    rejected += !Decode(bad).ok();
  }
  // A changed state or word almost always leaves a lane off its start state at the end, or its
  // words not used up. Not always: a change to the low bits of a lane's stored state can carry
  // through its steps into its carried raw parts alone, which nothing constrains
  // (docs/FRAME_FORMAT.md, "Carried raw parts"). 365 of 400 are rejected in format version 4,
  // whose stored states are all significant bits (380 in version 3, whose 32-bit states had
  // about 9 unused high bits; over 390 in version 2, whose lanes ended at 2^15 exactly).
  EXPECT_GT(rejected, 350) << rejected << " of 400 rejected";
}

TEST_F(FrameCorruption, HostileSizesAreRejectedBeforeUse) {
  for (uint64_t count : {uint64_t{1} << 62, ~uint64_t{0}, kCount + 1}) {
    auto bad = frame_;
    std::memcpy(bad.data() + 8, &count, 8);
    EXPECT_FALSE(Decode(bad).ok());
  }
  for (size_t field : {16, 24, 32, 40, 48}) {  // frame_bytes and every offset/size
    auto bad = frame_;
    const uint64_t huge = ~uint64_t{0} - 7;
    std::memcpy(bad.data() + field, &huge, 8);
    EXPECT_FALSE(Decode(bad).ok()) << "field at " << field;
  }
}

// A split frame of more elements than kMaxFrameCount has more chunks than the layout's u32
// chunk count holds: at 32-symbol lanes, 2^42 + 3077 elements are 2^32 + 4 chunks, which the
// layout took for 4. Such an fp8 frame of the constant mode is 608 bytes, passed every check
// of that 4-chunk layout, and decoded "successfully" into the first 4096 elements alone, with
// the rest of the output never written. No encoder writes it (PlanFrame refuses the count).
TEST(HostileCount, ASplitFrameOfMoreChunksThanTheIndexHoldsIsRejected) {
  const uint64_t count = (uint64_t{1} << 42) + 3 * 1024 + 5;
  const codec::Layout layout = codec::ComputeLayout(1, true, count, codec::kMinLaneSymbols);
  ASSERT_EQ(layout.num_chunks, 4u) << "the chunk count is expected to wrap (2^32 + 4 as u32)";
  const codec::Header h = codec::MakeHeader(layout, static_cast<uint8_t>(DataType::kFloat8E4M3), count,
                                            codec::Mode::kSplitConstant, 0x38);
  // The frame and, after it, the output in one allocation: the output the count claims (4 TiB)
  // then never overlaps the frame, which the call would refuse before reading the frame, had the
  // heap put the output below it (as it sometimes did with two vectors).
  std::vector<uint8_t> memory(h.frame_bytes + 4 * 1024 + 64, 0xCD);
  const std::span<uint8_t> frame(memory.data(), h.frame_bytes);
  const std::span<uint8_t> out(memory.data() + h.frame_bytes, memory.size() - h.frame_bytes);
  std::fill(frame.begin(), frame.end(), 0);
  std::memcpy(frame.data(), &h, sizeof(h));
  ASSERT_LT(frame.size(), 1024u);

  absl::StatusOr<FrameInfo> info = ReadFrameInfo(frame.data(), frame.size());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kDataLoss) << "ReadFrameInfo accepted " << (info.ok() ? info->count : 0) << " elements";
  // Were it accepted, the decoder would write the 4 chunks it counts (4096 bytes) and stop.
  const absl::Status status = DecompressHost(frame.data(), frame.size(), DataType::kFloat8E4M3, out.data(), count);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("disagree with its count"), std::string::npos) << status;
  EXPECT_EQ(out[0], 0xCD) << "the decoder wrote the output of a frame it should refuse";
}

// A frame whose tiles have tables of their own, tile 0's among them: it lies at the start of the
// coded area, with no chunk before it, so that a table can be rewritten there and checked alone.
class TileCorruption : public CorruptionTest {
 protected:
  void SetUp() override {
    constexpr uint64_t kTile = 65536;  // elements, at 64-symbol lanes
    Prepare(MixedScaleTensor(DataType::kBFloat16, 12 * kTile + 1000, 2 * kTile + 4321, 29), 64);
    ASSERT_EQ(Entry(frame_, 0), 0u) << "tile 0 should have its own table";
    for (uint32_t t = 1; t < layout_.num_tiles; ++t) {
      if (Entry(frame_, t) != codec::kGlobalTableTile) own_tiles_.push_back(t);
    }
    ASSERT_GE(own_tiles_.size(), 3u);
  }

  uint32_t Entry(const std::vector<uint8_t>& frame, uint32_t tile) const {
    return codec::TileEntry(frame.data(), layout_, tile);
  }
  void SetEntry(std::vector<uint8_t>& frame, uint32_t tile, uint32_t value) const {
    std::memcpy(frame.data() + layout_.tile_index_offset + 4 * tile, &value, 4);
  }
  // Where tile 0's table and its first chunk lie.
  uint8_t* TableOfTile0(std::vector<uint8_t>& frame) const { return frame.data() + info_.coded_offset; }
  uint64_t Chunk0Bytes() const { return 4 * uint64_t{codec::ChunkEntry(frame_.data(), layout_, 0)}; }

  // A copy of the frame with tile 0's table replaced by `freqs` (symbol -> frequency) and `pad`
  // as the pad word, placed so that it ends where chunk 0 begins.
  std::vector<uint8_t> WithTile0Table(const std::map<uint8_t, uint16_t>& freqs, uint16_t pad) const {
    std::vector<uint8_t> table(codec::kTileBitmapBytes);
    for (const auto& [symbol, freq] : freqs) {
      table[symbol / 8] |= 1 << (symbol % 8);
      table.push_back(static_cast<uint8_t>(freq));
      table.push_back(static_cast<uint8_t>(freq >> 8));
    }
    if (freqs.size() % 2 == 1) {
      table.push_back(static_cast<uint8_t>(pad));
      table.push_back(static_cast<uint8_t>(pad >> 8));
    }
    auto frame = frame_;
    EXPECT_LE(table.size(), Chunk0Bytes());
    const uint64_t at = Chunk0Bytes() - table.size();
    std::memcpy(frame.data() + info_.coded_offset + at, table.data(), table.size());
    SetEntry(frame, 0, static_cast<uint32_t>(at / 4));
    return frame;
  }

  // Expects the bad-table error of tile `tile`.
  void ExpectBadTable(const std::vector<uint8_t>& frame, uint32_t tile) {
    const absl::Status status = Decode(frame);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(status.message().find("frequency table (tile " + std::to_string(tile) + "'s own)"), std::string::npos)
        << status;
  }

  // Expects an error that is not a bad table: the table passed its checks.
  void ExpectTableAccepted(const std::vector<uint8_t>& frame) {
    const absl::Status status = Decode(frame);
    EXPECT_FALSE(status.ok());
    EXPECT_EQ(status.message().find("frequency table"), std::string::npos) << status;
  }

  std::vector<uint32_t> own_tiles_;  // after tile 0
};

TEST_F(TileCorruption, TheUndamagedFrameDecodes) {
  std::vector<uint8_t> out(tensor_.size());
  ASSERT_TRUE(DecompressHost(frame_.data(), frame_.size(), DataType::kBFloat16, out.data(), count_).ok());
  EXPECT_EQ(out, tensor_);
}

TEST_F(TileCorruption, OneSymbolIsNoTable) {
  ExpectBadTable(WithTile0Table({{126, 4096}}, 0), 0);
  ExpectTableAccepted(WithTile0Table({{126, 4095}, {127, 1}}, 0));
}

TEST_F(TileCorruption, FrequenciesMustSumTo4096) {
  ExpectBadTable(WithTile0Table({{120, 2000}, {121, 2000}, {122, 95}}, 0), 0);
  ExpectBadTable(WithTile0Table({{120, 2000}, {121, 2000}, {122, 97}}, 0), 0);
  ExpectTableAccepted(WithTile0Table({{120, 2000}, {121, 2000}, {122, 96}}, 0));
}

TEST_F(TileCorruption, PresentSymbolsNeedAFrequency) {
  ExpectBadTable(WithTile0Table({{120, 2048}, {121, 0}, {122, 2048}}, 0), 0);
  // In the encoder's own table: one frequency moved onto the next keeps the sum.
  auto bad = frame_;
  uint8_t* freqs = TableOfTile0(bad) + codec::kTileBitmapBytes;
  const uint16_t first = static_cast<uint16_t>(freqs[0] | freqs[1] << 8);
  const uint16_t second = static_cast<uint16_t>(freqs[2] | freqs[3] << 8) + first;
  freqs[0] = freqs[1] = 0;
  freqs[2] = static_cast<uint8_t>(second);
  freqs[3] = static_cast<uint8_t>(second >> 8);
  ExpectBadTable(bad, 0);
}

TEST_F(TileCorruption, ThePadWordMustBeZero) {
  ExpectBadTable(WithTile0Table({{120, 1000}, {121, 1000}, {122, 2096}}, 1), 0);
  ExpectBadTable(WithTile0Table({{120, 1000}, {121, 1000}, {122, 2096}}, 0x8000), 0);
  ExpectTableAccepted(WithTile0Table({{120, 1000}, {121, 1000}, {122, 2096}}, 0));
}

TEST_F(TileCorruption, AChangedFrequencyIsRejected) {
  for (uint32_t tile : {0u, own_tiles_[1]}) {
    auto bad = frame_;
    bad[info_.coded_offset + 4 * uint64_t{Entry(frame_, tile)} + codec::kTileBitmapBytes] ^= 1;
    const absl::Status status = Decode(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(status.message().find("tile " + std::to_string(tile) + "'s own"), std::string::npos) << status;
  }
}

TEST_F(TileCorruption, TheTableMustEndWhereItsChunkBegins) {
  // Tile 0 has no chunk before it, so the table alone is at fault.
  for (uint32_t entry : {1u, 2u}) {
    auto bad = frame_;
    SetEntry(bad, 0, entry);
    ExpectBadTable(bad, 0);
  }
  // Elsewhere the chunk before the table ends where the table begins: one of the two is at fault.
  for (uint32_t tile : own_tiles_) {
    for (int32_t shift : {-1, 1}) {
      auto bad = frame_;
      SetEntry(bad, tile, Entry(frame_, tile) + shift);
      EXPECT_EQ(Decode(bad).code(), absl::StatusCode::kDataLoss) << "tile " << tile << " shift " << shift;
    }
  }
}

TEST_F(TileCorruption, EntriesOutOfRangeAreRejected) {
  const auto end = static_cast<uint32_t>(info_.coded_bytes / 4);
  for (uint32_t entry : {end, end + 1, 0x7FFFFFFFu, 0xFFFFFFFEu}) {
    auto bad = frame_;
    SetEntry(bad, 0, entry);
    ExpectBadTable(bad, 0);
    for (uint32_t tile : own_tiles_) {
      bad = frame_;
      SetEntry(bad, tile, entry);
      EXPECT_EQ(Decode(bad).code(), absl::StatusCode::kDataLoss) << "tile " << tile << " entry " << entry;
    }
  }
}

TEST_F(TileCorruption, SwappingGlobalAndOwnIsRejected) {
  // An own table taken for the previous chunk's words, or a chunk's states taken for a table.
  for (uint32_t tile = 0; tile < layout_.num_tiles; ++tile) {
    auto bad = frame_;
    const uint32_t entry = Entry(frame_, tile);
    const uint32_t first_chunk = tile << layout_.tile_chunks_log2;
    SetEntry(bad, tile,
             entry == codec::kGlobalTableTile ? codec::ChunkEntry(frame_.data(), layout_, first_chunk) - 8
                                              : codec::kGlobalTableTile);
    EXPECT_EQ(Decode(bad).code(), absl::StatusCode::kDataLoss) << "tile " << tile;
  }
}

TEST_F(TileCorruption, RandomDamageToTilesNeverEscapesTheBuffers) {
  std::mt19937_64 rng(31);
  const uint64_t tables = Chunk0Bytes();  // tile 0's table: about as long as the others
  int rejected = 0;
  for (int trial = 0; trial < 600; ++trial) {
    auto bad = frame_;
    const uint32_t own_tile = own_tiles_[rng() % own_tiles_.size()];
    const uint64_t at = trial % 2 == 0 ? layout_.tile_index_offset + rng() % (4 * layout_.num_tiles)
                                       : info_.coded_offset + 4 * uint64_t{Entry(frame_, own_tile)} + rng() % tables;
    bad[at] ^= static_cast<uint8_t>(1 + rng() % 255);
    rejected += !Decode(bad).ok();
  }
  EXPECT_GT(rejected, 590);
}

}  // namespace
}  // namespace ucclzip::testing
