// The codec's device-side state between the split, encode and decode kernels of one stream.
// Counters are left at zero by the kernel that consumes them, so no memset precedes a call.
#pragma once

#include <cub/agent/single_pass_scan_operators.cuh>

#include <cstddef>
#include <cstdint>

#include "codec/rans_model.h"

namespace ucclzip::codec::gpu {

// Decoupled look-back over the encode blocks' coded sizes (a group of chunks each) in 4-byte
// units (CUB's single-pass scan machinery).
using ChunkScanState = cub::ScanTileState<uint32_t>;

struct DeviceWorkspace {
  unsigned long long histogram[kAlphabetSize];  // zero between calls
  uint32_t split_blocks_done;                   // zero between calls
  uint32_t encode_ticket;                       // zero between calls
  uint32_t mode_word;                           // Mode | constant_symbol << 8, set by the split stage
  // The error words, side by side: GpuCodec::QueueStatusRead copies both to pinned host memory.
  uint32_t encode_error;  // non-zero if an encoder bound was violated
  uint32_t decode_error;  // first decode error word since last read
  EncoderSymbol symbols[kAlphabetSize];
};
static_assert(offsetof(DeviceWorkspace, decode_error) == offsetof(DeviceWorkspace, encode_error) + sizeof(uint32_t),
              "the error words are copied out together");

// The encoder's per-tile state (format v2: a tile may code with a table of its own), one entry
// per tile of the codec's largest tensor, carved from one allocation.
struct TileWorkspace {
  uint32_t* histograms;    // [tile][symbol]: counted by the split stage, zeroed by the tile model
  EncoderSymbol* symbols;  // [tile][symbol]: a tile's own table, for the encoder
  uint8_t* tables;         // [tile][kMaxTileTableBytes]: a tile's own table, as the frame holds it
  uint32_t* table_bytes;   // [tile]: the own table's size, 0 when the tile codes with the global table
};

// Tiles a tensor of `count` elements has at most, whatever its lane length: a tile of
// 2^TileChunksLog2 chunks of 32 * L elements holds at least kTileTargetElements (TileChunksLog2
// stops doubling only when a double tile would exceed kTileTargetElements, and both are powers
// of two), so only the last tile is shorter.
inline uint64_t MaxTiles(uint64_t count) { return DivCeil(count, kTileTargetElements); }

// log2 of the elements of a whole tile of a frame of this layout, and the elements.
__host__ __device__ inline uint32_t TileElementsLog2(const Layout& layout) {
  return ChunkElementsLog2(layout.lane_symbols) + layout.tile_chunks_log2;
}
__host__ __device__ inline uint64_t TileElements(const Layout& layout) { return uint64_t{1} << TileElementsLog2(layout); }

inline constexpr size_t kTileWorkspaceBytesPerTile =
    kAlphabetSize * (sizeof(uint32_t) + sizeof(EncoderSymbol)) + kMaxTileTableBytes + sizeof(uint32_t);

// Lays the arrays of a TileWorkspace for `max_tiles` tiles out in `storage`, of
// max_tiles * kTileWorkspaceBytesPerTile bytes (each array stays 16-byte aligned: every array
// but the last takes a multiple of 16 bytes per tile).
inline TileWorkspace CarveTileWorkspace(void* storage, uint64_t max_tiles) {
  static_assert(sizeof(EncoderSymbol) % 16 == 0 && kMaxTileTableBytes % 16 == 0);
  auto* bytes = static_cast<uint8_t*>(storage);
  TileWorkspace tiles;
  tiles.symbols = reinterpret_cast<EncoderSymbol*>(bytes);
  bytes += max_tiles * kAlphabetSize * sizeof(EncoderSymbol);
  tiles.histograms = reinterpret_cast<uint32_t*>(bytes);
  bytes += max_tiles * kAlphabetSize * sizeof(uint32_t);
  tiles.tables = bytes;
  bytes += max_tiles * kMaxTileTableBytes;
  tiles.table_bytes = reinterpret_cast<uint32_t*>(bytes);
  return tiles;
}

}  // namespace ucclzip::codec::gpu
