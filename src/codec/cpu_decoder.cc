// CPU reference decoder. The frame is untrusted: the header, the table and every chunk offset
// are checked before use, and each lane's reads are bounded by its chunk.
#include <array>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/decode_table.h"
#include "codec/dtype_dispatch.h"
#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "codec/rans_model.h"
#include "ucclzip/codec.h"

namespace ucclzip {
namespace {

using codec::DecodeError;
using codec::Header;
using codec::Mode;

template <typename Split>
void StoreElement(uint8_t* output, uint64_t index, typename Split::Bits value) {
  std::memcpy(output + index * sizeof(value), &value, sizeof(value));
}

template <typename Split>
uint32_t LoadRaw(const uint8_t* raw_plane, uint64_t index) {
  uint32_t raw = 0;
  for (uint32_t b = 0; b < Split::kRawWidth; ++b) raw |= uint32_t{raw_plane[index * Split::kRawWidth + b]} << (8 * b);
  return raw;
}

// Decodes one chunk whose bytes are [chunk, chunk + chunk_bytes). Returns kOk or the error.
template <typename Split>
DecodeError DecodeChunk(const uint8_t* chunk, uint64_t chunk_bytes, const uint32_t* slots, const uint8_t* raw_plane,
                        uint64_t first, uint64_t chunk_count, uint8_t* output) {
  if (chunk_bytes < codec::kChunkStateBytes || chunk_bytes % 4 != 0) return DecodeError::kBadIndex;
  std::array<uint32_t, codec::kLanes> state;
  std::memcpy(state.data(), chunk, codec::kChunkStateBytes);
  for (uint32_t x : state) {
    if (x < codec::kStateLow || x >= (1u << 31)) return DecodeError::kCorruptStream;
  }
  const uint8_t* words = chunk + codec::kChunkStateBytes;
  const uint64_t available_words = (chunk_bytes - codec::kChunkStateBytes) / 2;
  uint64_t next_word = 0;
  const uint64_t steps = codec::DivCeil(chunk_count, codec::kLanes);
  for (uint64_t k = 0; k < steps; ++k) {
    for (uint32_t lane = 0; lane < codec::kLanes; ++lane) {
      const uint64_t e = k * codec::kLanes + lane;
      if (e >= chunk_count) break;
      uint32_t x = state[lane];
      const uint32_t entry = slots[x & (codec::kProbScale - 1)];
      x = codec::DecodeStep(x, entry);
      if (x < codec::kStateLow) {
        if (next_word >= available_words) return DecodeError::kCorruptStream;
        uint16_t word;
        std::memcpy(&word, words + 2 * next_word++, 2);
        x = (x << 16) | word;
      }
      state[lane] = x;
      StoreElement<Split>(output, first + e, Split::Join(LoadRaw<Split>(raw_plane, first + e), codec::EntrySymbol(entry)));
    }
  }
  // The decoder must end exactly where the encoder began, having read every word but the pad.
  for (uint32_t x : state) {
    if (x != codec::kStateLow) return DecodeError::kCorruptStream;
  }
  const bool exact = next_word == available_words;
  const bool padded = next_word + 1 == available_words && next_word % 2 == 1 && words[2 * next_word] == 0 &&
                      words[2 * next_word + 1] == 0;
  return exact || padded ? DecodeError::kOk : DecodeError::kCorruptStream;
}

// Returns a decode error word (frame_checks.h): the code, and the failing chunk as detail.
template <typename Split>
uint32_t DecodeSplit(const uint8_t* frame, const Header& h, uint8_t* output) {
  const uint8_t* raw_plane = frame + h.raw_offset;
  const uint8_t* coded = frame + h.coded_offset;
  const Mode mode = static_cast<Mode>(h.mode);
  if (mode == Mode::kSplitConstant || mode == Mode::kSplitStored) {
    for (uint64_t i = 0; i < h.count; ++i) {
      const uint32_t symbol = mode == Mode::kSplitConstant ? h.constant_symbol : coded[i];
      StoreElement<Split>(output, i, Split::Join(LoadRaw<Split>(raw_plane, i), symbol));
    }
    return 0;
  }
  std::array<uint16_t, codec::kAlphabetSize> freqs;
  std::memcpy(freqs.data(), frame + codec::kHeaderBytes, codec::kTableBytes);
  if (DecodeError e = codec::CheckTable(freqs.data()); e != DecodeError::kOk) return codec::MakeErrorWord(e, 0);
  std::vector<uint32_t> slots(codec::kProbScale);
  codec::BuildDecodeTable(freqs.data(), slots.data());

  const uint32_t lane_symbols = 1u << h.lane_symbols_log2;
  const uint64_t chunk_elements = uint64_t{codec::kLanes} * lane_symbols;
  const uint64_t num_chunks = codec::DivCeil(h.count, chunk_elements);
  const uint8_t* index = frame + codec::kHeaderBytes + codec::kTableBytes;
  for (uint64_t c = 0; c < num_chunks; ++c) {
    uint32_t begin_words, end_words;
    std::memcpy(&begin_words, index + 4 * c, 4);
    if (c + 1 < num_chunks) {
      std::memcpy(&end_words, index + 4 * (c + 1), 4);
    } else {
      end_words = static_cast<uint32_t>(h.coded_bytes / 4);
    }
    if (begin_words > end_words || uint64_t{end_words} * 4 > h.coded_bytes) {
      return codec::MakeErrorWord(DecodeError::kBadIndex, static_cast<uint32_t>(c));
    }
    const uint64_t first = c * chunk_elements;
    const uint64_t chunk_count = std::min(chunk_elements, h.count - first);
    DecodeError e = DecodeChunk<Split>(coded + 4 * uint64_t{begin_words}, 4 * uint64_t{end_words - begin_words},
                                       slots.data(), raw_plane, first, chunk_count, output);
    if (e != DecodeError::kOk) return codec::MakeErrorWord(e, static_cast<uint32_t>(c));
  }
  return 0;
}

}  // namespace

absl::Status DecompressHost(const void* frame, uint64_t frame_bytes, DataType dtype, void* output, uint64_t count) {
  const std::string context = absl::StrCat("decompress ", DataTypeName(dtype), " x", count, " from a frame of ",
                                           frame_bytes, " bytes");
  if (frame == nullptr || (count > 0 && output == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": null ", frame == nullptr ? "frame" : "output", " pointer"));
  }
  if (!IsValidDataType(static_cast<uint8_t>(dtype))) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": invalid data type ", static_cast<int>(dtype)));
  }
  if (frame_bytes < codec::kHeaderBytes) {
    return DecodeErrorToStatus(static_cast<uint32_t>(DecodeError::kTruncated), context);
  }
  const auto* in = static_cast<const uint8_t*>(frame);
  Header h;
  std::memcpy(&h, in, sizeof(h));
  const bool splittable = IsCompressibleType(dtype);
  uint32_t error = static_cast<uint32_t>(
      codec::CheckHeader(h, frame_bytes, static_cast<uint8_t>(dtype), count, ElementSize(dtype), splittable));
  if (error == 0) {
    auto* out = static_cast<uint8_t*>(output);
    if (static_cast<Mode>(h.mode) == Mode::kStored) {
      if (h.raw_bytes > 0) std::memcpy(out, in + h.raw_offset, h.raw_bytes);
    } else {
      error = codec::VisitSplit(
          dtype, [&]<typename Split>() { return DecodeSplit<Split>(in, h, out); },
          [] { return static_cast<uint32_t>(DecodeError::kBadMode); });
    }
  }
  return DecodeErrorToStatus(error, context);
}

}  // namespace ucclzip
