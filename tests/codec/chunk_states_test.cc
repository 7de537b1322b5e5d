// A chunk's state area (format version 4, chunk_states.h): every state of the range comes back,
// the area's size follows its codes exactly, and a decoder refuses an area that does not fit its
// chunk or whose padding bits are set.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "codec/cpu_rans.h"

namespace ucclzip::codec {
namespace {

using States = std::array<uint32_t, kLanes>;

// A chunk holding only `states`' area, padded to 4 bytes as a chunk would be.
std::vector<uint8_t> AreaChunk(const States& states, uint32_t& state_bytes) {
  std::vector<uint8_t> chunk(kChunkMaxStateBytes, 0xEE);  // bytes past the area are not zeroed
  state_bytes = WriteChunkStates(states.data(), chunk.data());
  chunk.resize((state_bytes + 3) / 4 * 4);
  if (state_bytes % 4 != 0) std::memset(chunk.data() + state_bytes, 0, 2);
  return chunk;
}

void ExpectRoundTrip(const States& states) {
  uint32_t state_bytes = 0;
  const std::vector<uint8_t> chunk = AreaChunk(states, state_bytes);
  uint32_t code_sum = 0;
  for (uint32_t x : states) code_sum += StateCode(x);
  EXPECT_EQ(state_bytes, ChunkStateBytes(code_sum));
  States read{};
  uint64_t first_word = 0;
  ASSERT_EQ(ReadChunkStates(chunk.data(), chunk.size(), read.data(), first_word), DecodeError::kOk);
  EXPECT_EQ(read, states);
  EXPECT_EQ(first_word, state_bytes / 2);
}

TEST(ChunkStates, EveryStateOfTheRangeComesBack) {
  // The range's edges and every code's edges, in every lane position.
  std::vector<uint32_t> edges;
  for (uint32_t bits = 16; bits <= 31; ++bits) {
    edges.push_back(1u << (bits - 1));
    edges.push_back((1u << (bits - 1)) | 1);
    edges.push_back((1u << bits) - 1);
  }
  for (size_t shift = 0; shift < edges.size(); ++shift) {
    States states;
    for (uint32_t lane = 0; lane < kLanes; ++lane) states[lane] = edges[(lane + shift) % edges.size()];
    ExpectRoundTrip(states);
  }
  std::mt19937 rng(4);
  for (int trial = 0; trial < 2000; ++trial) {
    States states;
    // Spread as the coder's are, about 1/x: a random bit length, then random bits below it.
    for (uint32_t& x : states) {
      const uint32_t bits = 16 + rng() % 16;
      x = (1u << (bits - 1)) | (rng() & ((1u << (bits - 1)) - 1));
    }
    ExpectRoundTrip(states);
  }
}

// Bytes worked out by hand from docs/FRAME_FORMAT.md ("Chunk states"), not from the code: lane 0
// at 0xFFFF (code 0, bits 0x7FFF from bit 128), lane 1 at 0x10005 (code 1, bits 0x0005 from bit
// 143), lane 2 at 2^30 + 1 (code 15, bits 1 from bit 159), the other lanes at 2^15 (code 0,
// 15 zero bits). The codes sum to 16: 128 + 480 + 16 = 624 bits, whole u16 words, no padding.
TEST(ChunkStates, AreaBytesFollowTheDocument) {
  States states;
  states.fill(kStateLow);
  states[0] = 0xFFFF;
  states[1] = 0x10005;
  states[2] = (1u << 30) + 1;
  std::vector<uint8_t> expected(78, 0);
  expected[0] = 0x10;   // lane 0's code 0 in the low nibble, lane 1's code 1 in the high one
  expected[1] = 0x0F;   // lane 2's code 15
  expected[16] = 0xFF;  // bits 128-135: lane 0's
  expected[17] = 0xFF;  // bits 136-142: lane 0's; bit 143: lane 1's bit 0
  expected[18] = 0x02;  // bit 145: lane 1's bit 2
  expected[19] = 0x80;  // bit 159: lane 2's bit 0
  std::vector<uint8_t> area(kChunkMaxStateBytes, 0xEE);
  ASSERT_EQ(WriteChunkStates(states.data(), area.data()), expected.size());
  area.resize(expected.size());
  EXPECT_EQ(area, expected);
  EXPECT_EQ(StatePadMask(16), 0u);

  // The area alone, with the pad word that makes a chunk of it: no renormalisation words.
  std::vector<uint8_t> chunk = expected;
  chunk.resize(80, 0);
  States read{};
  uint64_t first_word = 0;
  ASSERT_EQ(ReadChunkStates(chunk.data(), chunk.size(), read.data(), first_word), DecodeError::kOk);
  EXPECT_EQ(read, states);
  EXPECT_EQ(first_word, 39u);
}

TEST(ChunkStates, AreaSizeRunsFromSmallestToLargest) {
  States low, high;
  low.fill(kStateLow);
  high.fill(0x7FFFFFFFu);
  uint32_t low_bytes = 0, high_bytes = 0;
  AreaChunk(low, low_bytes);
  AreaChunk(high, high_bytes);
  EXPECT_EQ(low_bytes, kChunkMinStateBytes);
  EXPECT_EQ(high_bytes, kChunkMaxStateBytes);
  ExpectRoundTrip(low);
  ExpectRoundTrip(high);
}

TEST(ChunkStates, DecoderRefusesAnAreaPastItsChunkOrWithPaddingSet) {
  States states;
  for (uint32_t lane = 0; lane < kLanes; ++lane) states[lane] = (1u << 20) + lane;  // code 5
  states[0] = 1u << 21;                                                             // code 6
  const uint32_t code_sum = 5 * (kLanes - 1) + 6;
  uint32_t state_bytes = 0;
  std::vector<uint8_t> chunk = AreaChunk(states, state_bytes);
  ASSERT_EQ(state_bytes % 4, 2u);
  ASSERT_NE(StatePadMask(code_sum), 0u) << "the test needs an area with padding bits";
  States read{};
  uint64_t first_word = 0;
  ASSERT_EQ(ReadChunkStates(chunk.data(), chunk.size(), read.data(), first_word), DecodeError::kOk);

  auto padded = chunk;
  padded[state_bytes - 1] |= 0x80;  // the last padding bit
  EXPECT_EQ(ReadChunkStates(padded.data(), padded.size(), read.data(), first_word), DecodeError::kCorruptStream);

  auto grown = chunk;
  std::memset(grown.data() + 12, 0xFF, 4);  // lanes 24 to 31 at code 15: the area outgrows the chunk
  EXPECT_EQ(ReadChunkStates(grown.data(), grown.size(), read.data(), first_word), DecodeError::kCorruptStream);

  EXPECT_EQ(ReadChunkStates(chunk.data(), kChunkMinStateBytes - 4, read.data(), first_word), DecodeError::kBadIndex);
}

}  // namespace
}  // namespace ucclzip::codec
