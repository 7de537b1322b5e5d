// Validation of untrusted frames, shared by the CPU decoder, ReadFrameInfo and the GPU decoder.
// Every size and offset is checked against what the caller expects before anything is read.
#pragma once

#include <cstdint>

#include "codec/chunk_states.h"
#include "codec/frame_format.h"
#include "codec/host_device.h"

namespace ucclzip::codec {

// Decode error word: the code in the low 8 bits, a detail (e.g. the chunk) in the upper 24.
enum class DecodeError : uint32_t {
  kOk = 0,
  kBadMagic = 1,
  kBadVersion = 2,
  kTypeMismatch = 3,
  kCountMismatch = 4,
  kBadMode = 5,
  kTruncated = 6,        // frame_bytes larger than the bytes available
  kBadLayout = 7,        // offsets or sizes disagree with the count and type
  kBadTable = 8,         // frequencies do not sum to 2^12, or fewer than two symbols
  kBadIndex = 9,         // chunk offsets out of order or out of bounds
  kCorruptStream = 10,   // a lane read past its chunk, or did not end where the encoder began
  kBadArgument = 11,     // the caller's own arguments (null, misaligned, too small)
};

// Whether the caller's buffers [a, +a_bytes) and [b, +b_bytes) share a byte (bytes that do not
// fit the address space count as reaching its end).
inline bool BuffersOverlap(const void* a, uint64_t a_bytes, const void* b, uint64_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  if (a_bytes == 0 || b_bytes == 0) return false;
  const uintptr_t x_end = a_bytes > UINTPTR_MAX - x ? UINTPTR_MAX : x + a_bytes;
  const uintptr_t y_end = b_bytes > UINTPTR_MAX - y ? UINTPTR_MAX : y + b_bytes;
  return x < y_end && y < x_end;
}

UZ_HD uint32_t MakeErrorWord(DecodeError code, uint32_t detail) {
  return static_cast<uint32_t>(code) | (detail << 8);
}

// Checks a header against the bytes available and the caller's expectations (expected_dtype
// or expected_count may be set to the header's own when the caller has none).
UZ_HD DecodeError CheckHeader(const Header& h, uint64_t available_bytes, uint8_t expected_dtype,
                              uint64_t expected_count, uint32_t element_size, bool splittable) {
  if (h.magic != kFrameMagic) return DecodeError::kBadMagic;
  if (h.version != kFrameVersion) return DecodeError::kBadVersion;
  if (h.dtype != expected_dtype) return DecodeError::kTypeMismatch;
  if (h.count != expected_count) return DecodeError::kCountMismatch;
  if (h.mode > kMaxMode) return DecodeError::kBadMode;
  if (h.reserved16 != 0 || h.reserved32 != 0) return DecodeError::kBadLayout;
  if (h.constant_symbol != 0 && h.mode != static_cast<uint8_t>(Mode::kSplitConstant)) return DecodeError::kBadLayout;
  if (h.frame_bytes > available_bytes) return DecodeError::kTruncated;
  const Mode mode = static_cast<Mode>(h.mode);
  if (h.count > (uint64_t{1} << 48)) return DecodeError::kBadLayout;
  // A split frame's chunk and tile counts are u32 (Layout), and its index holds offsets for at
  // most kMaxFrameCount elements: beyond, the counts would wrap and the layout checked below
  // describe a few chunks of a far larger frame, which would then "decode" into them alone.
  if (h.mode != static_cast<uint8_t>(Mode::kStored) && h.count > kMaxFrameCount) return DecodeError::kBadLayout;
  const uint32_t lane_symbols = h.lane_symbols_log2 < 32 ? (1u << h.lane_symbols_log2) : 0;
  if (mode != Mode::kStored && !IsValidLaneSymbols(lane_symbols)) return DecodeError::kBadLayout;
  if (mode == Mode::kStored && h.lane_symbols_log2 != 0) return DecodeError::kBadLayout;
  // Any type may be stored; only compressible types of kMinSplitCount or more may be split.
  const bool split = mode != Mode::kStored;
  const Layout layout = ComputeLayout(element_size, splittable && split, h.count, split ? lane_symbols : 0);
  if (split && layout.base_mode == Mode::kStored) return DecodeError::kBadMode;
  if (h.raw_offset != layout.raw_offset || h.raw_bytes != layout.raw_bytes ||
      h.coded_offset != layout.coded_offset) {
    return DecodeError::kBadLayout;
  }
  uint64_t expected_coded = 0;
  const uint64_t carried_bytes = layout.carried_elements * layout.raw_width;  // modes 1 and 2 keep them
  switch (mode) {
    case Mode::kStored: expected_coded = 0; break;
    case Mode::kSplitConstant: expected_coded = carried_bytes; break;
    case Mode::kSplitStored: expected_coded = h.count + carried_bytes; break;
    case Mode::kSplitRans:
      if (h.coded_bytes < uint64_t{layout.num_chunks} * kChunkMinStateBytes || h.coded_bytes > layout.coded_capacity ||
          h.coded_bytes % 4 != 0) {
        return DecodeError::kBadLayout;
      }
      expected_coded = h.coded_bytes;
      break;
  }
  if (h.coded_bytes != expected_coded || h.frame_bytes != h.coded_offset + h.coded_bytes) {
    return DecodeError::kBadLayout;
  }
  return DecodeError::kOk;
}

// Checks the frequency table of a kSplitRans frame.
UZ_HD DecodeError CheckTable(const uint16_t* freqs) {
  uint32_t sum = 0, present = 0;
  for (uint32_t s = 0; s < kAlphabetSize; ++s) {
    sum += freqs[s];
    present += freqs[s] != 0;
  }
  return (sum == kProbScale && present >= 2) ? DecodeError::kOk : DecodeError::kBadTable;
}

UZ_HD uint32_t LoadU32(const uint8_t* bytes) {
  return uint32_t{bytes[0]} | uint32_t{bytes[1]} << 8 | uint32_t{bytes[2]} << 16 | uint32_t{bytes[3]} << 24;
}

// The tile index entry of `tile` (kGlobalTableTile, or its table's offset in 4-byte units).
UZ_HD uint32_t TileEntry(const uint8_t* frame, const Layout& layout, uint32_t tile) {
  return LoadU32(frame + layout.tile_index_offset + 4 * uint64_t{tile});
}

UZ_HD uint32_t ChunkEntry(const uint8_t* frame, const Layout& layout, uint32_t chunk) {
  return LoadU32(frame + layout.index_offset + 4 * uint64_t{chunk});
}

// Where chunk c's bytes lie in the coded area, in 4-byte units from coded_offset: from its index
// entry to where the next thing begins, which is the next tile's own table if chunk c + 1 starts
// a tile that has one, else chunk c + 1; the last chunk ends at coded_bytes. False if the range
// is reversed, out of bounds, or shorter than the smallest state area.
UZ_HD bool LocateChunk(const uint8_t* frame, const Layout& layout, uint64_t coded_bytes, uint32_t c, uint32_t& begin,
                       uint32_t& end) {
  begin = ChunkEntry(frame, layout, c);
  const uint32_t next = c + 1;
  if (next == layout.num_chunks) {
    end = static_cast<uint32_t>(coded_bytes / 4);
  } else {
    const bool next_starts_tile = (next & ((1u << layout.tile_chunks_log2) - 1)) == 0;
    const uint32_t tile_entry = next_starts_tile ? TileEntry(frame, layout, next >> layout.tile_chunks_log2)
                                                 : kGlobalTableTile;
    end = tile_entry != kGlobalTableTile ? tile_entry : ChunkEntry(frame, layout, next);
  }
  return begin <= end && uint64_t{end} * 4 <= coded_bytes && end - begin >= kChunkMinStateBytes / 4;
}

// Reads and checks the own table of `tile` into `freqs` (all 256). A sound table has at least
// two symbols, every listed frequency non-zero, a sum of 2^12, a zero pad word where one is
// needed, and ends exactly where the tile's first chunk begins. Sets `global` instead, and
// leaves `freqs` alone, when the tile uses the global table.
UZ_HD DecodeError ReadTileTable(const uint8_t* frame, const Layout& layout, uint64_t coded_bytes, uint32_t tile,
                                uint16_t* freqs, bool& global) {
  const uint32_t entry = TileEntry(frame, layout, tile);
  global = entry == kGlobalTableTile;
  if (global) return DecodeError::kOk;
  const uint64_t at = uint64_t{entry} * 4;
  const uint64_t chunk_at = uint64_t{ChunkEntry(frame, layout, tile << layout.tile_chunks_log2)} * 4;
  if (at + kTileBitmapBytes > chunk_at || chunk_at > coded_bytes) return DecodeError::kBadTable;
  const uint8_t* table = frame + layout.coded_offset + at;
  uint32_t present = 0, sum = 0;
  for (uint32_t s = 0; s < kAlphabetSize; ++s) {
    freqs[s] = 0;
    if (((table[s / 8] >> (s % 8)) & 1) == 0) continue;
    const uint64_t word_at = kTileBitmapBytes + 2 * uint64_t{present};
    if (at + word_at + 2 > chunk_at) return DecodeError::kBadTable;
    freqs[s] = static_cast<uint16_t>(table[word_at] | table[word_at + 1] << 8);
    if (freqs[s] == 0) return DecodeError::kBadTable;
    sum += freqs[s];
    ++present;
  }
  if (present < 2 || sum != kProbScale || at + TileTableBytes(present) != chunk_at) return DecodeError::kBadTable;
  if ((present & 1) != 0 && (table[kTileBitmapBytes + 2 * present] | table[kTileBitmapBytes + 2 * present + 1]) != 0) {
    return DecodeError::kBadTable;
  }
  return DecodeError::kOk;
}

}  // namespace ucclzip::codec
