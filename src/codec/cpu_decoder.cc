// CPU reference decoder. The frame is untrusted: the header, every table and every chunk offset
// are checked before use, and each lane's reads are bounded by its chunk.
//
// Tiles decode independently, so they are cut into tasks (cpu_tiles.h) that HostCodecThreads may
// run in parallel. Each task stops at its first error, checking a tile's own table before the
// tile's chunks; the error reported is the first in frame order, the same as one thread would
// report.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/cpu_rans.h"
#include "codec/cpu_split_loops.h"
#include "codec/cpu_tiles.h"
#include "codec/decode_table.h"
#include "codec/dtype_dispatch.h"
#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "codec/host_parallel.h"
#include "codec/rans_model.h"
#include "ucclzip/codec.h"

namespace ucclzip {
namespace {

using codec::DecodeError;
using codec::Header;
using codec::Layout;
using codec::Mode;
using codec::TileRange;

// Elements joined per block in the modes without coding, so that the symbols stay in L1.
constexpr uint64_t kJoinBlock = 4096;

// Modes 1 and 2, chunk c: the symbols are stored (mode 1) or all the header's constant one, and
// the carried raw parts follow the stored symbols (or fill the coded area alone).
template <typename Split>
void JoinUncodedChunk(const uint8_t* frame, const Header& h, const Layout& layout, uint32_t c, uint8_t* output) {
  using Bits = typename Split::Bits;
  const bool stored = static_cast<Mode>(h.mode) == Mode::kSplitStored;
  const codec::ChunkSpan chunk = codec::ChunkSpanOf(layout, h.count, c);
  const uint8_t* raw = frame + h.raw_offset + codec::RawPlaneIndex(layout, chunk.first) * Split::kRawWidth;
  const uint8_t* carried_raw = frame + h.coded_offset + (stored ? h.count : 0);
  uint8_t constant[kJoinBlock];
  if (!stored) std::memset(constant, h.constant_symbol, sizeof(constant));
  auto join = [&](const uint8_t* raw_parts, uint64_t e, uint64_t n) {
    const uint8_t* symbols = stored ? frame + h.coded_offset + chunk.first + e : constant;
    codec::JoinElements<Split>(raw_parts, symbols, n, output + (chunk.first + e) * sizeof(Bits));
  };
  for (uint64_t e = 0; e < chunk.kept; e += kJoinBlock) {
    join(raw + e * Split::kRawWidth, e, std::min(kJoinBlock, chunk.kept - e));
  }
  if (chunk.n > chunk.kept) {
    join(carried_raw + codec::CarriedIndex(layout, chunk.first + chunk.kept, chunk.n) * Split::kRawWidth, chunk.kept,
         chunk.n - chunk.kept);
  }
}

// Joins the carried elements of a decoded chunk (its lanes' last steps) from their symbols and
// the raw parts their lanes' end states hold.
template <typename Split>
void JoinCarried(const codec::ChunkSpan& span, const codec::ChunkToDecode& chunk, uint8_t* output) {
  using Bits = typename Split::Bits;
  constexpr uint32_t kRawBits = 8 * Split::kRawWidth;
  for (uint32_t lane = 0; lane < codec::kLanes; ++lane) {
    const uint32_t lane_elements = codec::LaneElements(span.n, lane);
    const uint32_t carried = std::min(lane_elements, chunk.carried_steps);
    for (uint32_t t = 0; t < carried; ++t) {
      const uint64_t e = uint64_t{lane_elements - 1 - t} * codec::kLanes + lane;
      const uint32_t raw = (chunk.end_state[lane] >> (t * kRawBits)) & ((1u << kRawBits) - 1);
      const Bits v = Split::Join(raw, chunk.symbols[e]);
      std::memcpy(output + (span.first + e) * sizeof(Bits), &v, sizeof(v));
    }
  }
}

// Decodes the chunks of `tile` with the slot entries of its table, two at a time. Returns 0 or
// the error word of the first bad chunk; errors are checked in chunk order, so the first is the
// one a chunk-by-chunk decoder would stop at.
template <typename Split>
uint32_t DecodeChunks(const uint8_t* frame, const Header& h, const Layout& layout, const uint32_t* slots,
                      const TileRange& tile, uint8_t* output) {
  using Bits = typename Split::Bits;
  constexpr bool kJoin = Split::kRawWidth != 0;  // fp8: the symbols are the elements
  const uint8_t* raw_plane = frame + h.raw_offset;
  const uint64_t chunk_elements = uint64_t{codec::kLanes} * layout.lane_symbols;
  const codec::ChunkCoder& coder = codec::ChosenChunkCoder();
  uint8_t* symbols = kJoin ? codec::ThreadScratch(2 * chunk_elements) : nullptr;
  uint32_t end_states[2][codec::kLanes];
  const auto prepare = [&](uint32_t c, uint32_t slot, codec::ChunkToDecode& chunk) {
    const uint64_t first = c * chunk_elements;
    chunk.n = static_cast<uint32_t>(std::min(chunk_elements, h.count - first));
    chunk.symbols = kJoin ? symbols + slot * chunk_elements : output + first;
    chunk.carried_steps = layout.carried_steps;
    chunk.raw_bits = 8 * Split::kRawWidth;
    chunk.end_state = end_states[slot];
    uint32_t begin_words, end_words;
    if (!codec::LocateChunk(frame, layout, h.coded_bytes, c, begin_words, end_words)) return false;
    chunk.bytes = frame + h.coded_offset + 4 * uint64_t{begin_words};
    chunk.size = 4 * uint64_t{end_words - begin_words};
    return true;
  };
  const auto join = [&](uint32_t c, const codec::ChunkToDecode& chunk) {
    if constexpr (kJoin) {
      const codec::ChunkSpan span = codec::ChunkSpanOf(layout, h.count, c);
      codec::JoinElements<Split>(raw_plane + codec::RawPlaneIndex(layout, span.first) * Split::kRawWidth, chunk.symbols,
                                 span.kept, output + span.first * sizeof(Bits));
      JoinCarried<Split>(span, chunk, output);
    }
  };
  for (uint32_t c = tile.first_chunk; c < tile.end_chunk; c += 2) {
    const uint32_t group = c + 1 < tile.end_chunk ? 2 : 1;
    codec::ChunkToDecode chunks[2];
    DecodeError results[2] = {DecodeError::kBadIndex, DecodeError::kBadIndex};
    const bool located = prepare(c, 0, chunks[0]);
    if (located && group == 2 && prepare(c + 1, 1, chunks[1])) {
      coder.decode_two(slots, chunks[0], chunks[1], results[0], results[1]);
    } else if (located) {
      results[0] = coder.decode(slots, chunks[0]);
    }
    for (uint32_t i = 0; i < group; ++i) {
      if (results[i] != DecodeError::kOk) return codec::MakeErrorWord(results[i], c + i);
      join(c + i, chunks[i]);
    }
  }
  return 0;
}

// Decodes the tiles of `range`, each with the global table's slot entries or its own table's.
// Returns 0 or the error word of the first error: a bad own table is kBadTable with the tile
// number + 1 as detail (0 is the global table), before any error in the tile's chunks.
template <typename Split>
uint32_t DecodeTiles(const uint8_t* frame, const Header& h, const Layout& layout, const uint32_t* global_slots,
                     const TileRange& range, uint8_t* output) {
  std::array<uint16_t, codec::kAlphabetSize> freqs;
  std::array<uint32_t, codec::kProbScale> own_slots;
  for (uint32_t t = range.first_tile; t < range.end_tile; ++t) {
    bool global = true;
    if (DecodeError e = codec::ReadTileTable(frame, layout, h.coded_bytes, t, freqs.data(), global);
        e != DecodeError::kOk) {
      return codec::MakeErrorWord(e, t + 1);
    }
    if (!global) codec::BuildDecodeTable(freqs.data(), own_slots.data());
    const uint32_t error = DecodeChunks<Split>(frame, h, layout, global ? global_slots : own_slots.data(),
                                               codec::TileOf(layout, h.count, t), output);
    if (error != 0) return error;
  }
  return 0;
}

// Returns a decode error word (frame_checks.h): the code, and the failing chunk or table as detail.
template <typename Split>
uint32_t DecodeSplit(const uint8_t* frame, const Header& h, uint8_t* output, codec::ParallelCall& call) {
  // CheckHeader has checked the header against this layout.
  const Layout layout = codec::ComputeLayout(sizeof(typename Split::Bits), true, h.count, 1u << h.lane_symbols_log2);
  const Mode mode = static_cast<Mode>(h.mode);
  if (mode == Mode::kSplitConstant || mode == Mode::kSplitStored) {
    const uint32_t tasks = call.TaskCount(layout.num_chunks);
    call.Run(tasks, [&](uint32_t t) {
      const codec::TaskShare share = codec::ShareOf(layout.num_chunks, t, tasks);
      for (uint64_t c = share.first; c < share.end; ++c) {
        JoinUncodedChunk<Split>(frame, h, layout, static_cast<uint32_t>(c), output);
      }
    });
    return 0;
  }
  std::array<uint16_t, codec::kAlphabetSize> freqs;
  std::memcpy(freqs.data(), frame + layout.table_offset, codec::kTableBytes);
  if (DecodeError e = codec::CheckTable(freqs.data()); e != DecodeError::kOk) return codec::MakeErrorWord(e, 0);
  std::array<uint32_t, codec::kProbScale> slots;
  codec::BuildDecodeTable(freqs.data(), slots.data());

  const uint32_t tasks = call.TaskCount(layout.num_tiles);
  std::vector<uint32_t> errors(tasks, 0);
  call.Run(tasks, [&](uint32_t t) {
    errors[t] = DecodeTiles<Split>(frame, h, layout, slots.data(), codec::TaskTiles(layout, h.count, t, tasks), output);
  });
  for (uint32_t error : errors) {
    if (error != 0) return error;
  }
  return 0;
}

}  // namespace

absl::Status DecompressHost(const void* frame, uint64_t frame_bytes, DataType dtype, void* output, uint64_t count,
                            HostCodecThreads* threads) {
  const std::string context = absl::StrCat("decompress ", DataTypeName(dtype), " x", count, " from a frame of ",
                                           frame_bytes, " bytes");
  if (frame == nullptr || (count > 0 && output == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": null ", frame == nullptr ? "frame" : "output", " pointer"));
  }
  if (!IsValidDataType(static_cast<uint8_t>(dtype))) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": invalid data type ", static_cast<int>(dtype)));
  }
  // Decoding writes the output while it still reads the frame: overlapping, a stored frame was
  // copied with an overlapping memcpy (undefined; ASan stops there) and a split one would read
  // symbols its own output had overwritten.
  const uint64_t output_bytes =
      count > UINT64_MAX / ElementSize(dtype) ? UINT64_MAX : count * ElementSize(dtype);
  if (codec::BuffersOverlap(frame, frame_bytes, output, output_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": the output [0x", absl::Hex(reinterpret_cast<uintptr_t>(output)),
                                                   ", +", output_bytes, " B) overlaps the frame [0x",
                                                   absl::Hex(reinterpret_cast<uintptr_t>(frame)), ", +", frame_bytes, " B)"));
  }
  if (frame_bytes < codec::kHeaderBytes) {
    return DecodeErrorToStatus(static_cast<uint32_t>(DecodeError::kTruncated), context);
  }
  const auto* in = static_cast<const uint8_t*>(frame);
  Header h;
  std::memcpy(&h, in, sizeof(h));
  const bool splittable = IsCompressibleType(dtype);
  const DecodeError header_error =
      codec::CheckHeader(h, frame_bytes, static_cast<uint8_t>(dtype), count, ElementSize(dtype), splittable);
  // A frame of another version names its version (DecodeErrorToStatus).
  uint32_t error = codec::MakeErrorWord(header_error, header_error == DecodeError::kBadVersion ? h.version : 0);
  if (error == 0) {
    auto* out = static_cast<uint8_t*>(output);
    if (static_cast<Mode>(h.mode) == Mode::kStored) {
      if (h.raw_bytes > 0) std::memcpy(out, in + h.raw_offset, h.raw_bytes);
    } else {
      error = codec::VisitSplit(
          dtype,
          [&]<typename Split>() {
            codec::ParallelCall call(threads);
            return DecodeSplit<Split>(in, h, out, call);
          },
          [] { return static_cast<uint32_t>(DecodeError::kBadMode); });
    }
  }
  return DecodeErrorToStatus(error, context);
}

}  // namespace ucclzip
