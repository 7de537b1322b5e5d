// The decoder against hostile frames: every truncation, every header byte changed, corrupted
// tables, indexes and streams. Each must give an error or (where the damage hits only raw
// payload) some output -- never a crash or a write outside the output buffer.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "codec/frame_format.h"
#include "codec_test_util.h"
#include "ucclzip/codec.h"

namespace ucclzip::testing {
namespace {

constexpr uint64_t kCount = 20000;

class FrameCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    tensor_ = GenerateTensor(DataType::kBFloat16, kCount, {DistKind::kGaussian, 0.02}, 17);
    frame_ = CompressToVector(tensor_, DataType::kBFloat16, {.lane_symbols = 64});
    ASSERT_EQ(ReadFrameInfo(frame_.data(), frame_.size())->mode, FrameMode::kSplitRans);
  }

  // Decodes into a guarded buffer; fails the test if the decoder wrote outside the output.
  absl::Status Decode(const std::vector<uint8_t>& frame) {
    std::vector<uint8_t> out(tensor_.size() + 64, 0xCD);
    absl::Status status = DecompressHost(frame.data(), frame.size(), DataType::kBFloat16, out.data() + 32, kCount);
    for (int i = 0; i < 32; ++i) {
      EXPECT_EQ(out[i], 0xCD);
      EXPECT_EQ(out[out.size() - 1 - i], 0xCD);
    }
    return status;
  }

  std::vector<uint8_t> tensor_, frame_;
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
  auto info = ReadFrameInfo(frame_.data(), frame_.size());
  for (uint32_t value : {0xFFFFFFFFu, 0x7FFFFFFFu, 1u}) {
    auto bad = frame_;
    std::memcpy(bad.data() + codec::kHeaderBytes + codec::kTableBytes + 4 * 3, &value, 4);
    EXPECT_FALSE(Decode(bad).ok()) << value;
  }
  (void)info;
}

TEST_F(FrameCorruption, RandomDamageNeverEscapesTheBuffers) {
  auto info = ReadFrameInfo(frame_.data(), frame_.size());
  ASSERT_TRUE(info.ok());
  std::mt19937_64 rng(23);
  int rejected = 0;
  for (int trial = 0; trial < 400; ++trial) {
    auto bad = frame_;
    // Damage the coded section, where a change must be detected by the stream checks.
    const uint64_t at = info->coded_offset + rng() % info->coded_bytes;
    bad[at] ^= static_cast<uint8_t>(1 + rng() % 255);
    rejected += !Decode(bad).ok();
  }
  // A changed state or word almost always leaves a lane off its start state at the end.
  EXPECT_GT(rejected, 390);
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

}  // namespace
}  // namespace ucclzip::testing
