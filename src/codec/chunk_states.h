// A rANS chunk's 32 final states, stored in their significant bits (format version 4;
// docs/FRAME_FORMAT.md, "Chunk states"). A lane's final state is spread about as 1/x over
// [2^15, 2^31), so a fixed 32 bits left about 9 of them unused; a 4-bit length and the state's
// bits below its top one take about 26.5 on average.
//
// The arithmetic is here, once, for every coder: where a lane's bits lie and how its state is
// rebuilt from them. Each coder moves the bytes its own way (the CPU through a local copy of the
// state area, the GPU warp through shared memory: the encoder's own area, the decoder's ring).
#pragma once

#include <cstdint>

#include "codec/frame_format.h"

namespace ucclzip::codec {

// The state area: kStateCodeBytes of 4-bit codes (lane j's in nibble j, low nibble first), then
// each lane's state bits, lane 0 first, as one little-endian bit stream, zero-padded to a whole
// u16 word. A state of 16 + code significant bits is stored as its 15 + code bits below the top one.
inline constexpr uint32_t kStateCodeBytes = kLanes / 2;
inline constexpr uint32_t kStateCodeWords = kStateCodeBytes / 4;  // the codes as little-endian u32s
inline constexpr uint32_t kStateMinBits = 15;                     // of a state in [2^15, 2^16)
inline constexpr uint32_t kStateMaxCode = 15;                     // a state in [2^30, 2^31)
inline constexpr uint32_t kChunkMinStateBytes = kStateCodeBytes + kLanes * kStateMinBits / 8;
inline constexpr uint32_t kChunkMaxStateBytes = kStateCodeBytes + kLanes * (kStateMinBits + kStateMaxCode) / 8;
// The state area as little-endian u32 words, the last one completed with the chunk's next bytes.
inline constexpr uint32_t kChunkMaxStateWords = kChunkMaxStateBytes / 4;
static_assert(kChunkMinStateBytes % 4 == 0 && kChunkMaxStateBytes % 4 == 0);

// The code of a state in [2^15, 2^31): its significant bits less 16.
UZ_HD uint32_t StateCode(uint32_t x) { return 16 - CountLeadingZeros(x); }

// Bits stored for a state of `code`.
UZ_HD uint32_t StateBits(uint32_t code) { return kStateMinBits + code; }

// Sum of the nibbles of a u32 (at most 8 * 15).
UZ_HD uint32_t NibbleSum(uint32_t v) {
  return (((v & 0x0F0F0F0Fu) + ((v >> 4) & 0x0F0F0F0Fu)) * 0x01010101u) >> 24;
}

// Sum of the codes of the lanes below `lane` (of every lane for lane = kLanes).
UZ_HD uint32_t CodesBelow(const uint32_t* codes, uint32_t lane) {
  uint32_t sum = 0;
  for (uint32_t w = 0; w < kStateCodeWords; ++w) {
    const uint32_t first = 8 * w;
    const uint32_t below = lane <= first ? 0u : lane - first;  // lanes of this word below `lane`
    sum += NibbleSum(below >= 8 ? codes[w] : codes[w] & ((1u << 4 * below) - 1));
  }
  return sum;
}

// The state area's bits, and its bytes, for codes that sum to `code_sum`.
UZ_HD uint32_t ChunkStateBits(uint32_t code_sum) { return 8 * kStateCodeBytes + kLanes * kStateMinBits + code_sum; }
UZ_HD uint32_t ChunkStateBytes(uint32_t code_sum) { return 2 * ((ChunkStateBits(code_sum) + 15) / 16); }

// Where lane's state bits begin, in bits from the chunk's start.
UZ_HD uint32_t LaneStateBitOffset(uint32_t lane, uint32_t codes_below) {
  return 8 * kStateCodeBytes + kStateMinBits * lane + codes_below;
}

// A lane's contribution to the state area's words: its code's nibble, and its state's bits,
// which straddle at most two words.
struct LaneStatePlacement {
  uint32_t code_word, code_bits;
  uint32_t word, low, high;  // low into word, high into word + 1 (0 where they fit in one)
};

UZ_HD LaneStatePlacement PlaceLaneState(uint32_t x, uint32_t lane, uint32_t codes_below) {
  const uint32_t code = StateCode(x);
  const uint32_t bits = x & ((1u << StateBits(code)) - 1);
  const uint32_t offset = LaneStateBitOffset(lane, codes_below);
  const uint32_t shift = offset % 32;
  return {lane / 8, code << 4 * (lane % 8), offset / 32, bits << shift, shift == 0 ? 0u : bits >> (32 - shift)};
}

// Rebuilds a lane's state from the state area's u32 words (`words`: at least
// ceil(ChunkStateBytes / 4) of them), reading the second word only where the bits reach it.
template <typename Words>
UZ_HD uint32_t ReadLaneState(const Words& words, uint32_t lane, uint32_t codes_below) {
  const uint32_t code = (words[lane / 8] >> 4 * (lane % 8)) & 0xF;
  const uint32_t bit_count = StateBits(code);
  const uint32_t offset = LaneStateBitOffset(lane, codes_below);
  const uint32_t shift = offset % 32;
  uint64_t window = words[offset / 32];
  if (shift + bit_count > 32) window |= uint64_t{words[offset / 32 + 1]} << 32;
  return 1u << bit_count | (static_cast<uint32_t>(window >> shift) & ((1u << bit_count) - 1));
}

// The padding bits of the state area's last u16 word, which must be zero: a mask of them in that
// word (0 where the bits end on a word boundary).
UZ_HD uint32_t StatePadMask(uint32_t code_sum) {
  const uint32_t used = ChunkStateBits(code_sum) % 16;
  return used == 0 ? 0u : (0xFFFFu << used) & 0xFFFFu;
}

}  // namespace ucclzip::codec
