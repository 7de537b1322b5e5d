// The CPU codec's unit of parallel work: whole tiles (docs/FRAME_FORMAT.md, "Tiles"). A task
// that owns whole tiles counts each of its tiles' symbols on its own and codes each tile with
// the one table the tile uses; a decoding task checks a tile's own table before the tile's
// chunks, so that the first error it meets is the first in frame order.
#pragma once

#include <algorithm>
#include <cstdint>

#include "codec/frame_format.h"
#include "codec/host_parallel.h"

namespace ucclzip::codec {

// Tiles [first_tile, end_tile), their chunks and their elements.
struct TileRange {
  uint32_t first_tile, end_tile;
  uint32_t first_chunk, end_chunk;
  uint64_t first, end;  // elements
};

inline TileRange TilesOf(const Layout& layout, uint64_t count, uint32_t first_tile, uint32_t end_tile) {
  const uint64_t chunk_elements = uint64_t{kLanes} * layout.lane_symbols;
  const auto first_chunk_of = [&](uint32_t tile) {
    return static_cast<uint32_t>(std::min<uint64_t>(layout.num_chunks, uint64_t{tile} << layout.tile_chunks_log2));
  };
  TileRange r;
  r.first_tile = first_tile;
  r.end_tile = end_tile;
  r.first_chunk = first_chunk_of(first_tile);
  r.end_chunk = first_chunk_of(end_tile);
  r.first = std::min(count, r.first_chunk * chunk_elements);
  r.end = std::min(count, r.end_chunk * chunk_elements);
  return r;
}

inline TileRange TileOf(const Layout& layout, uint64_t count, uint32_t tile) {
  return TilesOf(layout, count, tile, tile + 1);
}

// Task `task` of `tasks`: a near-equal share of the tiles.
inline TileRange TaskTiles(const Layout& layout, uint64_t count, uint32_t task, uint32_t tasks) {
  const TaskShare share = ShareOf(layout.num_tiles, task, tasks);
  return TilesOf(layout, count, static_cast<uint32_t>(share.first), static_cast<uint32_t>(share.end));
}

}  // namespace ucclzip::codec
