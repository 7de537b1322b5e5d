// The ucclzip frame: a self-describing container for one compressed tensor.
// docs/FRAME_FORMAT.md is the normative description; this header is its single implementation,
// shared by the CPU reference and the GPU kernels so that both read and write the same bytes.
#pragma once

#include <cstdint>

#include "codec/host_device.h"

namespace ucclzip::codec {

inline constexpr uint32_t kFrameMagic = 0x315A4355;  // "UCZ1" little-endian
inline constexpr uint16_t kFrameVersion = 4;
inline constexpr uint32_t kHeaderBytes = 64;
inline constexpr uint32_t kAlphabetSize = 256;        // one coded byte per element
inline constexpr uint32_t kTableBytes = kAlphabetSize * 2;  // one u16 frequency per symbol
inline constexpr uint32_t kLanes = 32;                // interleaved rANS lanes per chunk (one warp)
inline constexpr uint32_t kLanesLog2 = 5;
static_assert((1u << kLanesLog2) == kLanes);
inline constexpr uint32_t kProbBits = 12;             // frequencies sum to 2^12
inline constexpr uint32_t kProbScale = 1u << kProbBits;
inline constexpr uint32_t kStateLow = 1u << 15;       // rANS state lives in [2^15, 2^31)
// Format version 3: a rANS lane starts (and its decoder ends) at kCarryBase | the raw parts of
// its last elements, kCarryBits of them, which the raw plane then leaves out.
inline constexpr uint32_t kCarryBits = 24;
inline constexpr uint32_t kCarryBase = 1u << kCarryBits;
inline constexpr uint32_t kMinLaneSymbols = 32;  // keeps the index under 0.4 % even for fp8
inline constexpr uint32_t kMaxLaneSymbols = 4096;

// Tiles: runs of consecutive chunks that share a frequency table, either the frame's global
// table or one of their own (format version 2). A tile holds about kTileTargetElements
// elements, and never fewer than 2^kMinTileChunksLog2 chunks, so that the GPU decoder's blocks
// (one warp per chunk, that many warps) always decode chunks of one tile together.
inline constexpr uint64_t kTileTargetElements = 65536;
inline constexpr uint32_t kMinTileChunksLog2 = 2;
inline constexpr uint32_t kGlobalTableTile = 0xFFFFFFFFu;  // tile index entry: the tile uses the global table
// A tile's own table: a 256-bit map of the symbols present, then a u16 frequency for each present
// symbol in ascending symbol order, then a zero u16 if needed to end on a 4-byte boundary.
inline constexpr uint32_t kTileBitmapBytes = kAlphabetSize / 8;
inline constexpr uint32_t kMaxTileTableBytes = kTileBitmapBytes + 2 * kAlphabetSize;

// How the tensor is stored. Values are part of the format.
enum class Mode : uint8_t {
  kStored = 0,          // elements verbatim after the header (non-float types, tiny tensors)
  kSplitStored = 1,     // split into raw plane + one symbol byte per element, symbols verbatim
  kSplitConstant = 2,   // split; every symbol equals Header::constant_symbol, nothing coded
  kSplitRans = 3,       // split; symbols rANS-coded in interleaved 32-lane chunks
};

inline constexpr uint8_t kMaxMode = 3;

// Fixed 64-byte little-endian header at offset 0.
struct Header {
  uint32_t magic;
  uint16_t version;
  uint8_t dtype;            // ucclzip::DataType
  uint8_t mode;             // Mode
  uint64_t count;           // elements
  uint64_t frame_bytes;     // whole frame, header included
  uint64_t raw_offset;      // raw plane (kStored: the elements themselves)
  uint64_t raw_bytes;
  uint64_t coded_offset;    // symbols (stored or coded); == end of frame for kStored
  uint64_t coded_bytes;
  uint8_t lane_symbols_log2;  // split modes: log2 of the symbols per rANS lane
  uint8_t constant_symbol;    // kSplitConstant only, else zero
  uint16_t reserved16;        // zero
  uint32_t reserved32;        // zero
};
static_assert(sizeof(Header) == kHeaderBytes, "frame header must stay 64 bytes");

UZ_HD uint64_t AlignUp16(uint64_t value) { return (value + 15) & ~uint64_t{15}; }
UZ_HD uint64_t DivCeil(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
// DivCeil(a, 2^log2) as a shift: a 64-bit division by a value the compiler cannot see costs the
// GPU a subroutine of dozens of dependent instructions, on the decoder's serial setup path.
UZ_HD uint64_t DivCeilPow2(uint64_t a, uint32_t log2) { return (a + (uint64_t{1} << log2) - 1) >> log2; }

// log2 of a chunk's elements (kLanes lanes of `lane_symbols`, a power of two).
UZ_HD uint32_t ChunkElementsLog2(uint32_t lane_symbols) { return kLanesLog2 + 31 - CountLeadingZeros(lane_symbols); }

// Everything about a frame's layout that is fixed before the data is seen: where the raw plane
// goes (so that it can be sent while the symbols are still being coded), and the bounds.
struct Layout {
  Mode base_mode;           // kStored, or kSplitRans meaning "one of the split modes"
  uint32_t raw_width;       // raw-plane bytes per element (split modes)
  uint32_t lane_symbols;
  uint32_t carried_steps;     // steps at each lane's end whose raw parts its state carries
  uint64_t carried_elements;  // elements whose raw parts the lanes carry, in all
  uint32_t num_chunks;
  uint32_t tile_chunks_log2;  // chunks per tile, log2
  uint32_t num_tiles;
  uint64_t table_offset;      // the global table
  uint64_t index_offset;      // the chunk index
  uint64_t tile_index_offset;
  uint64_t raw_offset;
  uint64_t raw_bytes;
  uint64_t coded_offset;
  uint64_t coded_capacity;  // bytes the symbols may take: the stored-symbol size
  uint64_t max_frame_bytes;
};

// Chooses the symbols per lane when the caller leaves it open. Longer lanes amortise the final
// state each lane flushes (chunk_states.h); shorter lanes give more parallel lanes and so lower
// latency on small tensors. The rule depends only on the element count, so the CPU and GPU
// encoders choose alike and produce identical frames.
UZ_HD uint32_t DefaultLaneSymbols(uint64_t count) {
  // Aim for at least kTargetChunks chunks (enough warps to fill an H200), then cap; the lane
  // sweep in benchmarks/RESULTS.md shows the trade on that GPU.
  constexpr uint64_t kTargetChunks = 1024;
  uint64_t per_lane = count / (uint64_t{kLanes} * kTargetChunks);
  uint32_t symbols = 64;
  while (symbols < 1024 && symbols * 2 <= per_lane) symbols *= 2;
  return symbols;
}

// Chunks per tile (log2) for a lane length: about kTileTargetElements elements, at least
// 2^kMinTileChunksLog2 chunks. Depends only on the lane length, so encoders agree.
UZ_HD uint32_t TileChunksLog2(uint32_t lane_symbols) {
  uint32_t log2 = kMinTileChunksLog2;
  while ((uint64_t{kLanes} * lane_symbols << (log2 + 1)) <= kTileTargetElements) ++log2;
  return log2;
}

// Steps at the end of each lane whose raw parts the lane's first state carries: as many as fit
// in kCarryBits (bf16 and fp16: 3; fp32: 1; fp8, which has no raw part: none).
UZ_HD constexpr uint32_t CarriedSteps(uint32_t raw_width) { return raw_width == 0 ? 0 : kCarryBits / (8 * raw_width); }

// Of a chunk of n elements, how many have their raw parts carried: its last 32 m, or all of a
// shorter chunk. (Element e is lane e mod 32's step e / 32, so each lane's last m steps are the
// chunk's last 32 m elements, in a partial last chunk too.)
UZ_HD uint64_t ChunkCarried(uint64_t n, uint32_t carried_steps) {
  const uint64_t most = uint64_t{kLanes} * carried_steps;
  return n < most ? n : most;
}

// Elements of lane `lane` in a chunk of n elements.
UZ_HD uint32_t LaneElements(uint64_t n, uint32_t lane) {
  return static_cast<uint32_t>(n / kLanes + (lane < n % kLanes ? 1 : 0));
}

// The state lane starts from (when encoding) and ends at (when decoding): kCarryBase | its
// carried raw parts, the lane's last element's in the lowest bits, then the one before it; or
// kStateLow where the type carries nothing.
UZ_HD uint32_t LaneStartState(uint32_t carried_raw, uint32_t carried_steps) {
  return carried_steps == 0 ? kStateLow : kCarryBase | carried_raw;
}

// Whether a decoder's end state `x` is the start state of a lane that carries `carried` raw
// parts of `raw_bits` each (carried <= carried_steps): kCarryBase with nothing above the
// carried bits, or kStateLow where the type carries nothing.
UZ_HD bool IsLaneStartState(uint32_t x, uint32_t carried, uint32_t raw_bits, uint32_t carried_steps) {
  if (carried_steps == 0) return x == kStateLow;
  return (x >> kCarryBits) == 1 && ((x & (kCarryBase - 1)) >> (carried * raw_bits)) == 0;
}

// Bytes of a tile's own table with `present` symbols (2..256).
UZ_HD uint32_t TileTableBytes(uint32_t present) { return kTileBitmapBytes + 2 * present + 2 * (present & 1); }

// The most elements a frame holds. Chunk and tile offsets are u32 counts of 4-byte units and
// the coded area takes at most one byte per element, so 2^33 elements keep every offset below
// 2^31 and clear of kGlobalTableTile. (The pipeline cuts tensors into blocks far smaller.)
inline constexpr uint64_t kMaxFrameCount = uint64_t{1} << 33;

// Element counts below this are framed kStored: the 512-byte table would cost more than coding
// saves.
inline constexpr uint64_t kMinSplitCount = 4096;

UZ_HD Layout ComputeLayout(uint32_t element_size, bool splittable, uint64_t count, uint32_t lane_symbols) {
  Layout layout{};
  if (!splittable || count < kMinSplitCount) {
    layout.base_mode = Mode::kStored;
    layout.raw_offset = kHeaderBytes;
    layout.raw_bytes = count * element_size;
    layout.coded_offset = layout.raw_offset + layout.raw_bytes;
    layout.max_frame_bytes = layout.coded_offset;
    return layout;
  }
  layout.base_mode = Mode::kSplitRans;
  layout.raw_width = element_size - 1;
  layout.lane_symbols = lane_symbols == 0 ? DefaultLaneSymbols(count) : lane_symbols;  // a power of two
  layout.num_chunks = static_cast<uint32_t>(DivCeilPow2(count, ChunkElementsLog2(layout.lane_symbols)));
  layout.tile_chunks_log2 = TileChunksLog2(layout.lane_symbols);
  layout.num_tiles = static_cast<uint32_t>(DivCeilPow2(layout.num_chunks, layout.tile_chunks_log2));
  layout.table_offset = kHeaderBytes;
  layout.index_offset = layout.table_offset + kTableBytes;
  layout.tile_index_offset = layout.index_offset + uint64_t{layout.num_chunks} * 4;
  layout.raw_offset = AlignUp16(layout.tile_index_offset + uint64_t{layout.num_tiles} * 4);
  layout.carried_steps = CarriedSteps(layout.raw_width);
  const uint64_t chunk_elements = uint64_t{kLanes} * layout.lane_symbols;
  const uint64_t last_chunk = count - (uint64_t{layout.num_chunks} - 1) * chunk_elements;
  layout.carried_elements = (uint64_t{layout.num_chunks} - 1) * ChunkCarried(chunk_elements, layout.carried_steps) +
                            ChunkCarried(last_chunk, layout.carried_steps);
  layout.raw_bytes = (count - layout.carried_elements) * layout.raw_width;
  layout.coded_offset = AlignUp16(layout.raw_offset + layout.raw_bytes);
  // Stored symbols, one byte each, and then the carried raw parts, which modes 1 and 2 keep in
  // the coded area; rANS frames take less (ChooseSplitMode).
  layout.coded_capacity = count + layout.carried_elements * layout.raw_width;
  layout.max_frame_bytes = layout.coded_offset + layout.coded_capacity;
  return layout;
}

// Chunk c of a split frame of `count` elements: its first element, its elements, and how many
// of them come before the carried ones (their raw parts in the raw plane).
struct ChunkSpan {
  uint64_t first;
  uint64_t n;
  uint64_t kept;
};

UZ_HD ChunkSpan ChunkSpanOf(const Layout& layout, uint64_t count, uint32_t c) {
  const uint64_t chunk_elements = uint64_t{kLanes} * layout.lane_symbols;
  ChunkSpan span;
  span.first = c * chunk_elements;
  span.n = count - span.first < chunk_elements ? count - span.first : chunk_elements;
  span.kept = span.n - ChunkCarried(span.n, layout.carried_steps);
  return span;
}

// The chunk element i belongs to (a shift: chunks are a power of two long, and a division would
// cost the GPU's split and decode kernels dozens of instructions per element).
UZ_HD uint32_t ChunkOf(const Layout& layout, uint64_t i) {
  return static_cast<uint32_t>(i >> ChunkElementsLog2(layout.lane_symbols));
}

// Where the raw part of element i (not a carried one) lies in the raw plane, in elements: each
// chunk's uncarried elements, chunk after chunk (every chunk before i's is whole).
UZ_HD uint64_t RawPlaneIndex(const Layout& layout, uint64_t i) {
  return i - uint64_t{ChunkOf(layout, i)} * kLanes * layout.carried_steps;
}

// Modes 1 and 2 keep the carried raw parts after the stored symbols (mode 1) or alone (mode 2):
// where element i's lies there, in elements, given that it is carried (chunk after chunk, each
// chunk's in element order). `chunk_count` is the elements of i's chunk.
UZ_HD uint64_t CarriedIndex(const Layout& layout, uint64_t i, uint64_t chunk_count) {
  const uint64_t chunk = ChunkOf(layout, i);
  const uint64_t e = i - chunk * kLanes * layout.lane_symbols;
  return chunk * kLanes * layout.carried_steps + e - (chunk_count - ChunkCarried(chunk_count, layout.carried_steps));
}

UZ_HD bool IsValidLaneSymbols(uint32_t lane_symbols) {
  return lane_symbols >= kMinLaneSymbols && lane_symbols <= kMaxLaneSymbols &&
         (lane_symbols & (lane_symbols - 1)) == 0;
}

}  // namespace ucclzip::codec

namespace ucclzip::codec {

// Fills the header fields that are known before the data is coded. frame_bytes and coded_bytes
// are final only for modes whose symbol size is known up front; the rANS encoder completes them.
UZ_HD Header MakeHeader(const Layout& layout, uint8_t dtype, uint64_t count, Mode mode, uint8_t constant_symbol) {
  Header h{};
  h.magic = kFrameMagic;
  h.version = kFrameVersion;
  h.dtype = dtype;
  h.mode = static_cast<uint8_t>(mode);
  h.count = count;
  h.raw_offset = layout.raw_offset;
  h.raw_bytes = layout.raw_bytes;
  h.coded_offset = layout.coded_offset;
  const uint64_t carried_bytes = layout.carried_elements * layout.raw_width;
  h.coded_bytes = mode == Mode::kSplitStored ? count + carried_bytes : mode == Mode::kSplitConstant ? carried_bytes : 0;
  h.frame_bytes = h.coded_offset + h.coded_bytes;
  if (mode != Mode::kStored) {
    h.lane_symbols_log2 = static_cast<uint8_t>(31 - CountLeadingZeros(layout.lane_symbols));
  }
  h.constant_symbol = constant_symbol;
  return h;
}

}  // namespace ucclzip::codec
