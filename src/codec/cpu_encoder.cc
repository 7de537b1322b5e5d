// CPU reference encoder. It writes exactly the bytes the GPU encoder writes: the same split, the
// same tables, and the same interleaving of the 32 lanes' renormalisation words.
//
// Two passes over the input: the first writes the raw plane and counts each tile's symbols, the
// second chooses each tile's table and codes its chunks. Both are cut into tasks of whole tiles
// (cpu_tiles.h), which HostCodecThreads may run in parallel: a task's tables and chunks go
// straight into the frame when the task is the first, else into scratch, and are moved into place
// once every task's size is known.
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/cpu_rans.h"
#include "codec/cpu_split_loops.h"
#include "codec/cpu_tiles.h"
#include "codec/dtype_dispatch.h"
#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "codec/host_parallel.h"
#include "codec/rans_model.h"
#include "ucclzip/codec.h"

namespace ucclzip {
namespace {

using codec::Header;
using codec::Histogram;
using codec::Layout;
using codec::Mode;
using codec::TileRange;
using Freqs = std::array<uint16_t, codec::kAlphabetSize>;

// Symbols split and counted per block, so that the counting reads them from L1.
constexpr uint64_t kSplitBlock = 4096;

// Writes the raw plane of the chunks [first_chunk, end_chunk) (each chunk's raw parts but its
// carried ones) and adds their symbols to `histogram`.
template <typename Split>
void SplitAndCount(const uint8_t* input, uint64_t count, const Layout& layout, uint32_t first_chunk,
                   uint32_t end_chunk, uint8_t* raw_plane, Histogram& histogram) {
  using Bits = typename Split::Bits;
  codec::SymbolCounter counter(histogram);
  if constexpr (Split::kRawWidth == 0) {
    const uint64_t first = codec::ChunkSpanOf(layout, count, first_chunk).first;
    const codec::ChunkSpan last = codec::ChunkSpanOf(layout, count, end_chunk - 1);
    counter.Add(input + first, last.first + last.n - first);  // the elements are the symbols
  } else {
    uint8_t symbols[kSplitBlock];
    for (uint32_t c = first_chunk; c < end_chunk; ++c) {
      const codec::ChunkSpan chunk = codec::ChunkSpanOf(layout, count, c);
      uint8_t* chunk_raw = raw_plane + codec::RawPlaneIndex(layout, chunk.first) * Split::kRawWidth;
      for (uint64_t e = 0; e < chunk.kept; e += kSplitBlock) {
        const uint64_t n = std::min(kSplitBlock, chunk.kept - e);
        codec::SplitElements<Split>(input + (chunk.first + e) * sizeof(Bits), n, chunk_raw + e * Split::kRawWidth,
                                    symbols);
        counter.Add(symbols, n);
      }
      // The carried elements (fewer than kSplitBlock): their symbols only.
      const uint64_t carried = chunk.n - chunk.kept;
      codec::ExtractSymbols<Split>(input + (chunk.first + chunk.kept) * sizeof(Bits), carried, symbols);
      counter.Add(symbols, carried);
    }
  }
}

// The raw parts that lane `lane` of chunk `chunk` carries, packed as LaneStartState takes them.
template <typename Split>
uint32_t CarriedRaw(const uint8_t* input, const codec::ChunkSpan& chunk, uint32_t lane, uint32_t carried_steps) {
  const uint32_t lane_elements = codec::LaneElements(chunk.n, lane);
  const uint32_t carried = std::min(lane_elements, carried_steps);
  uint32_t packed = 0;
  for (uint32_t t = 0; t < carried; ++t) {
    const uint64_t e = chunk.first + uint64_t{lane_elements - 1 - t} * codec::kLanes + lane;
    packed |= Split::Raw(codec::LoadBits<Split>(input, e)) << (t * 8 * Split::kRawWidth);
  }
  return packed;
}

// Modes 1 and 2: every chunk's carried raw parts, in element order, at `out`.
template <typename Split>
void StoreCarriedRaw(const uint8_t* input, uint64_t count, const Layout& layout, uint8_t* out) {
  for (uint32_t c = 0; c < layout.num_chunks; ++c) {
    const codec::ChunkSpan chunk = codec::ChunkSpanOf(layout, count, c);
    uint8_t symbols[kSplitBlock];  // not kept: the symbols are stored or constant elsewhere
    const uint64_t carried = chunk.n - chunk.kept;
    codec::SplitElements<Split>(input + (chunk.first + chunk.kept) * sizeof(typename Split::Bits), carried, out,
                                symbols);
    out += carried * Split::kRawWidth;
  }
}

uint32_t PresentSymbols(const Histogram& histogram) {
  return static_cast<uint32_t>(std::count_if(histogram.begin(), histogram.end(), [](uint64_t n) { return n != 0; }));
}

// The cost bound (rans_model.h) of coding the symbols counted in `histogram` with `freqs`, which
// must give each of them a frequency.
uint64_t CostBoundQ16(const Histogram& histogram, const Freqs& freqs) {
  uint64_t bound = 0;
  for (uint32_t s = 0; s < codec::kAlphabetSize; ++s) {
    if (histogram[s] != 0) bound += codec::SymbolCostBoundQ16(histogram[s], freqs[s]);
  }
  return bound;
}

struct Model {
  Mode mode;
  uint8_t constant_symbol;
  Freqs freqs{};  // the global table
};

Model BuildModel(const Histogram& histogram, uint64_t count, uint32_t num_chunks) {
  Model model{};
  const uint32_t present = PresentSymbols(histogram);
  uint64_t cost_bound_q16 = 0;
  if (present >= 2) {
    codec::NormalizeHistogram(histogram.data(), count, present, model.freqs.data());
    cost_bound_q16 = CostBoundQ16(histogram, model.freqs);
  } else {
    const auto most_frequent = std::max_element(histogram.begin(), histogram.end());
    model.constant_symbol = static_cast<uint8_t>(most_frequent - histogram.begin());
  }
  model.mode = codec::ChooseSplitMode(present, cost_bound_q16, count, num_chunks);
  return model;
}

struct TileTable {
  Freqs freqs{};
  uint32_t bytes;  // its size in the frame
};

// The own table of a tile of `elements` symbols counted in `histogram`, if it pays against the
// frame's global table (TileTablePays); the same rule normalises both tables.
std::optional<TileTable> OwnTable(const Histogram& histogram, uint64_t elements, const Freqs& global) {
  const uint32_t present = PresentSymbols(histogram);
  if (present < 2) return std::nullopt;  // nothing to normalise: one symbol has no table
  TileTable own;
  codec::NormalizeHistogram(histogram.data(), elements, present, own.freqs.data());
  if (!codec::TileTablePays(CostBoundQ16(histogram, own.freqs), present, CostBoundQ16(histogram, global))) {
    return std::nullopt;
  }
  own.bytes = codec::TileTableBytes(present);
  return own;
}

uint64_t AlignUp4(uint64_t bytes) { return (bytes + 3) & ~uint64_t{3}; }

void StoreU32(uint8_t* at, uint32_t value) { std::memcpy(at, &value, 4); }

// Bytes the tiles of a range can take at most: per tile its own table, per chunk its largest
// state area and a pad word, and one word per symbol.
uint64_t RangeBytesBound(const TileRange& range) {
  return (range.end_tile - range.first_tile) * uint64_t{codec::kMaxTileTableBytes} +
         (range.end_chunk - range.first_chunk) * uint64_t{codec::kChunkMaxStateBytes + 2} + 2 * (range.end - range.first);
}

// Where a task writes its part of the coded area: at most `capacity` bytes at `bytes`, of which
// `written` are. Its index entries are offsets from `bytes`, in 4-byte units.
struct CodedPart {
  uint8_t* bytes;
  uint64_t capacity;
  uint64_t written = 0;

  bool Fits(uint64_t more) const { return written + more <= capacity; }
  uint32_t Entry() const { return static_cast<uint32_t>(written / 4); }
};

// Codes the chunks of `tile` with `table` into `part`, writing each chunk's index entry. False if
// they would not fit.
template <typename Split>
bool EncodeChunks(const uint8_t* input, uint64_t count, const Layout& layout, const TileRange& tile,
                  const codec::EncoderTable& table, uint8_t* frame, CodedPart& part) {
  using Bits = typename Split::Bits;
  const uint64_t chunk_elements = uint64_t{codec::kLanes} * layout.lane_symbols;
  const codec::ChunkCoder& coder = codec::ChosenChunkCoder();
  // This thread's buffers: the chunk's symbols, then its words (at most one per symbol).
  uint8_t* scratch = codec::ThreadScratch(codec::AlignUp16(chunk_elements) + 2 * (chunk_elements + codec::kEncodeSlackWords));
  uint16_t* words = reinterpret_cast<uint16_t*>(scratch + codec::AlignUp16(chunk_elements));
  for (uint32_t c = tile.first_chunk; c < tile.end_chunk; ++c) {
    const uint64_t first = c * chunk_elements;
    const auto n = static_cast<uint32_t>(std::min(chunk_elements, count - first));
    const uint8_t* symbols = input + first;  // fp8: the elements are the symbols
    if constexpr (Split::kRawWidth != 0) {
      codec::ExtractSymbols<Split>(input + first * sizeof(Bits), n, scratch);
      symbols = scratch;
    }
    uint32_t state[codec::kLanes];
    const codec::ChunkSpan span = codec::ChunkSpanOf(layout, count, c);
    for (uint32_t lane = 0; lane < codec::kLanes; ++lane) {
      const uint32_t carried = layout.carried_steps == 0 ? 0 : CarriedRaw<Split>(input, span, lane, layout.carried_steps);
      state[lane] = codec::LaneStartState(carried, layout.carried_steps);
    }
    uint16_t* words_end = words + n + codec::kEncodeSlackWords;
    const uint16_t* begin = coder.encode(symbols, n, table, state, words_end);
    const uint64_t word_bytes = 2 * static_cast<uint64_t>(words_end - begin);
    // The state area goes to a local buffer first: its size decides whether the chunk fits.
    uint8_t state_area[codec::kChunkMaxStateBytes];
    const uint32_t state_bytes = codec::WriteChunkStates(state, state_area);
    const uint64_t chunk_bytes = AlignUp4(state_bytes + word_bytes);
    if (!part.Fits(chunk_bytes)) return false;
    StoreU32(frame + layout.index_offset + 4 * uint64_t{c}, part.Entry());
    uint8_t* chunk = part.bytes + part.written;
    std::memcpy(chunk, state_area, state_bytes);
    std::memcpy(chunk + state_bytes, begin, word_bytes);
    // An odd count of u16 words (the state area's and the renormalisation words) is padded with
    // a zero word, read last.
    if ((state_bytes + word_bytes) % 4 != 0) std::memset(chunk + state_bytes + word_bytes, 0, 2);
    part.written += chunk_bytes;
  }
  return true;
}

// Codes the tiles of `range` into `part`: for each, its own table where one pays, then its
// chunks; writes their tile and chunk index entries. False if they would not fit.
template <typename Split>
bool EncodeTiles(const uint8_t* input, uint64_t count, const Layout& layout, const TileRange& range,
                 const Model& model, const codec::EncoderTable& global_table, const Histogram* tile_histograms,
                 uint8_t* frame, CodedPart& part) {
  codec::EncoderTable own_table;
  for (uint32_t t = range.first_tile; t < range.end_tile; ++t) {
    const TileRange tile = codec::TileOf(layout, count, t);
    const std::optional<TileTable> own = OwnTable(tile_histograms[t], tile.end - tile.first, model.freqs);
    uint32_t entry = codec::kGlobalTableTile;
    if (own) {
      if (!part.Fits(own->bytes)) return false;
      entry = part.Entry();
      part.written += codec::WriteTileTable(own->freqs.data(), part.bytes + part.written);
      own_table = codec::MakeEncoderTable(own->freqs.data());
    }
    StoreU32(frame + layout.tile_index_offset + 4 * uint64_t{t}, entry);
    if (!EncodeChunks<Split>(input, count, layout, tile, own ? own_table : global_table, frame, part)) return false;
  }
  return true;
}

// Adds `words` to the index entries [first, end) at `entries`: a part's offsets once the part has
// moved. Tiles that use the global table keep their kGlobalTableTile (no chunk entry is ever one).
void ShiftEntries(uint8_t* entries, uint32_t first, uint32_t end, uint32_t words) {
  for (uint32_t i = first; i < end; ++i) {
    const uint32_t entry = codec::LoadU32(entries + 4 * uint64_t{i});
    if (entry != codec::kGlobalTableTile) StoreU32(entries + 4 * uint64_t{i}, entry + words);
  }
}

template <typename Split>
absl::StatusOr<uint64_t> EncodeRans(const uint8_t* input, uint64_t count, DataType dtype, uint8_t* frame,
                                    const Layout& layout, const Model& model, const Histogram* tile_histograms,
                                    codec::ParallelCall& call) {
  const codec::EncoderTable global_table = codec::MakeEncoderTable(model.freqs.data());
  uint8_t* coded = frame + layout.coded_offset;
  const uint32_t tasks = call.TaskCount(layout.num_tiles);
  // Task 0 writes in place; task t > 0 into scratch, capped by its own bound and by the capacity
  // of the whole frame.
  std::vector<CodedPart> parts(tasks, CodedPart{coded, layout.coded_capacity});
  uint64_t scratch_bytes = 0;
  for (uint32_t t = 1; t < tasks; ++t) {
    parts[t].capacity = std::min(layout.coded_capacity, RangeBytesBound(codec::TaskTiles(layout, count, t, tasks)));
    scratch_bytes += parts[t].capacity;
  }
  if (tasks > 1) {
    uint8_t* scratch = call.Scratch(scratch_bytes);
    for (uint32_t t = 1; t < tasks; ++t) {
      parts[t].bytes = scratch;
      scratch += parts[t].capacity;
    }
  }
  std::vector<uint8_t> fitted(tasks);  // not vector<bool>: tasks write their own elements concurrently
  call.Run(tasks, [&](uint32_t t) {
    fitted[t] = EncodeTiles<Split>(input, count, layout, codec::TaskTiles(layout, count, t, tasks), model,
                                   global_table, tile_histograms, frame, parts[t]);
  });
  std::vector<uint64_t> place(tasks + 1, 0);
  for (uint32_t t = 0; t < tasks; ++t) {
    place[t + 1] = place[t] + parts[t].written;
    // The mode decision bounds the total; this guards the bound itself.
    if (!fitted[t] || place[t + 1] > layout.coded_capacity) {
      const TileRange r = codec::TaskTiles(layout, count, t, tasks);
      return absl::InternalError(absl::StrCat("compress ", DataTypeName(dtype), " x", count,
                                              ": rANS output outgrew its bound of ", layout.coded_capacity,
                                              " bytes in chunks ", r.first_chunk, " to ", r.end_chunk - 1));
    }
  }
  call.Run(tasks - 1, [&](uint32_t moved) {
    const uint32_t t = moved + 1;
    std::memcpy(coded + place[t], parts[t].bytes, parts[t].written);
    const TileRange r = codec::TaskTiles(layout, count, t, tasks);
    const auto words = static_cast<uint32_t>(place[t] / 4);
    ShiftEntries(frame + layout.index_offset, r.first_chunk, r.end_chunk, words);
    ShiftEntries(frame + layout.tile_index_offset, r.first_tile, r.end_tile, words);
  });
  return place[tasks];
}

template <typename Split>
absl::StatusOr<uint64_t> CompressSplit(const uint8_t* input, uint64_t count, DataType dtype, uint8_t* frame,
                                       const Layout& layout, codec::ParallelCall& call) {
  const uint32_t tasks = call.TaskCount(layout.num_tiles);
  std::vector<Histogram> tile_histograms(layout.num_tiles, Histogram{});
  call.Run(tasks, [&](uint32_t t) {
    const TileRange r = codec::TaskTiles(layout, count, t, tasks);
    for (uint32_t tile = r.first_tile; tile < r.end_tile; ++tile) {
      const TileRange chunks = codec::TileOf(layout, count, tile);
      SplitAndCount<Split>(input, count, layout, chunks.first_chunk, chunks.end_chunk, frame + layout.raw_offset,
                           tile_histograms[tile]);
    }
  });
  Histogram histogram{};
  for (const Histogram& h : tile_histograms) {
    for (uint32_t s = 0; s < codec::kAlphabetSize; ++s) histogram[s] += h[s];
  }
  const Model model = BuildModel(histogram, count, layout.num_chunks);
  Header header = codec::MakeHeader(layout, static_cast<uint8_t>(dtype), count, model.mode,
                                    model.mode == Mode::kSplitConstant ? model.constant_symbol : 0);
  // The global table, both indexes and the gaps are zero unless written below.
  std::memset(frame + layout.table_offset, 0, layout.raw_offset - layout.table_offset);
  std::memset(frame + layout.raw_offset + layout.raw_bytes, 0, layout.coded_offset - layout.raw_offset - layout.raw_bytes);

  if (model.mode == Mode::kSplitStored) {
    call.Run(tasks, [&](uint32_t t) {
      const TileRange r = codec::TaskTiles(layout, count, t, tasks);
      codec::ExtractSymbols<Split>(input + r.first * sizeof(typename Split::Bits), r.end - r.first,
                                   frame + layout.coded_offset + r.first);
    });
    StoreCarriedRaw<Split>(input, count, layout, frame + layout.coded_offset + count);
  } else if (model.mode == Mode::kSplitConstant) {
    StoreCarriedRaw<Split>(input, count, layout, frame + layout.coded_offset);
  } else if (model.mode == Mode::kSplitRans) {
    std::memcpy(frame + layout.table_offset, model.freqs.data(), codec::kTableBytes);
    absl::StatusOr<uint64_t> coded =
        EncodeRans<Split>(input, count, dtype, frame, layout, model, tile_histograms.data(), call);
    if (!coded.ok()) return coded.status();
    header.coded_bytes = *coded;
    header.frame_bytes = header.coded_offset + *coded;
  }
  std::memcpy(frame, &header, sizeof(header));
  return header.frame_bytes;
}

}  // namespace

absl::StatusOr<uint64_t> CompressHost(const void* input, uint64_t count, DataType dtype, void* frame,
                                      uint64_t frame_capacity, const CodecOptions& options,
                                      HostCodecThreads* threads) {
  auto plan = PlanFrame(dtype, count, options);
  if (!plan.ok()) return plan.status();
  if (frame == nullptr || (count > 0 && input == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("compress ", DataTypeName(dtype), " x", count,
                                                   ": null ", frame == nullptr ? "frame" : "input", " pointer"));
  }
  // The frame is written while the input is still read: overlapping, the stored copy was an
  // overlapping memcpy and the split stages would read what they had written.
  if (codec::BuffersOverlap(input, count * ElementSize(dtype), frame, frame_capacity)) {  // PlanFrame bounds count
    return absl::InvalidArgumentError(absl::StrCat("compress ", DataTypeName(dtype), " x", count, ": the input [0x",
                                                   absl::Hex(reinterpret_cast<uintptr_t>(input)), ", +",
                                                   count * ElementSize(dtype), " B) overlaps the frame [0x",
                                                   absl::Hex(reinterpret_cast<uintptr_t>(frame)), ", +", frame_capacity,
                                                   " B)"));
  }
  if (frame_capacity < plan->max_frame_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("compress ", DataTypeName(dtype), " x", count, ": frame capacity ",
                                                   frame_capacity, " bytes < the ", plan->max_frame_bytes,
                                                   " bytes this tensor may need"));
  }
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(frame);
  const Layout layout = codec::ComputeLayout(ElementSize(dtype), plan->split, count, plan->lane_symbols);
  if (!plan->split) {
    Header header = codec::MakeHeader(layout, static_cast<uint8_t>(dtype), count, Mode::kStored, 0);
    std::memcpy(out, &header, sizeof(header));
    if (count > 0) std::memcpy(out + layout.raw_offset, in, layout.raw_bytes);
    return header.frame_bytes;
  }
  return codec::VisitSplit(
      dtype,
      [&]<typename Split>() {
        codec::ParallelCall call(threads);
        return CompressSplit<Split>(in, count, dtype, out, layout, call);
      },
      []() -> absl::StatusOr<uint64_t> { return absl::InternalError("split planned for a type without split"); });
}

}  // namespace ucclzip
