// CPU reference encoder. It writes exactly the bytes the GPU encoder writes: the same split, the
// same model, and the same interleaving of the 32 lanes' renormalisation words.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/dtype_dispatch.h"
#include "codec/frame_format.h"
#include "codec/rans_model.h"
#include "ucclzip/codec.h"

namespace ucclzip {
namespace {

using codec::EncoderSymbol;
using codec::Header;
using codec::Layout;
using codec::Mode;

template <typename Split>
typename Split::Bits LoadElement(const uint8_t* input, uint64_t index) {
  typename Split::Bits value;
  std::memcpy(&value, input + index * sizeof(value), sizeof(value));
  return value;
}

// Writes the raw plane and counts the symbols.
template <typename Split>
void SplitAndCount(const uint8_t* input, uint64_t count, uint8_t* raw_plane, std::array<uint64_t, 256>& histogram) {
  for (uint64_t i = 0; i < count; ++i) {
    const auto v = LoadElement<Split>(input, i);
    const uint32_t raw = Split::Raw(v);
    for (uint32_t b = 0; b < Split::kRawWidth; ++b) raw_plane[i * Split::kRawWidth + b] = static_cast<uint8_t>(raw >> (8 * b));
    ++histogram[Split::Symbol(v)];
  }
}

struct Model {
  Mode mode;
  uint8_t constant_symbol;
  std::array<uint16_t, 256> freqs{};
};

Model BuildModel(const std::array<uint64_t, 256>& histogram, uint64_t count, uint32_t num_chunks) {
  Model model{};
  uint32_t present = 0, most_frequent = 0;
  for (uint32_t s = 0; s < 256; ++s) {
    present += histogram[s] != 0;
    if (histogram[s] > histogram[most_frequent]) most_frequent = s;
  }
  model.constant_symbol = static_cast<uint8_t>(most_frequent);
  uint32_t sum = 0;
  uint64_t cost_bound_q16 = 0;
  if (present >= 2) {
    for (uint32_t s = 0; s < 256; ++s) {
      model.freqs[s] = static_cast<uint16_t>(codec::NormalizedFrequency(histogram[s], count, present));
      sum += model.freqs[s];
    }
    model.freqs[most_frequent] = static_cast<uint16_t>(model.freqs[most_frequent] + codec::kProbScale - sum);
    for (uint32_t s = 0; s < 256; ++s) {
      if (histogram[s] != 0) cost_bound_q16 += codec::SymbolCostBoundQ16(histogram[s], model.freqs[s]);
    }
  }
  model.mode = codec::ChooseSplitMode(present, cost_bound_q16, count, num_chunks);
  return model;
}

// Codes one chunk: lanes run backwards over their symbols, each emitted word is pushed on a stack
// (lanes in descending order within a step), and the chunk is written as the 32 final states
// followed by the stack reversed -- the order in which the decoder, running forwards, reads it.
template <typename Split>
void EncodeChunk(const uint8_t* input, uint64_t first, uint64_t chunk_count,
                 const std::array<EncoderSymbol, 256>& symbols, std::vector<uint16_t>& stack,
                 std::vector<uint8_t>& chunk) {
  std::array<uint32_t, codec::kLanes> state;
  state.fill(codec::kStateLow);
  stack.clear();
  const uint64_t steps = codec::DivCeil(chunk_count, codec::kLanes);
  for (uint64_t k = steps; k-- > 0;) {
    for (uint32_t lane = codec::kLanes; lane-- > 0;) {
      const uint64_t e = k * codec::kLanes + lane;
      if (e >= chunk_count) continue;
      const EncoderSymbol& sym = symbols[Split::Symbol(LoadElement<Split>(input, first + e))];
      uint32_t x = state[lane];
      if (x >= sym.renorm_limit) {
        stack.push_back(static_cast<uint16_t>(x & 0xFFFF));
        x >>= 16;
      }
      state[lane] = codec::EncodeStep(x, sym);
    }
  }
  if (stack.size() % 2 != 0) stack.insert(stack.begin(), 0);  // pads the chunk to 4 bytes, read last
  chunk.resize(codec::kChunkStateBytes + 2 * stack.size());
  std::memcpy(chunk.data(), state.data(), codec::kChunkStateBytes);
  uint8_t* words = chunk.data() + codec::kChunkStateBytes;
  for (size_t i = 0; i < stack.size(); ++i) std::memcpy(words + 2 * i, &stack[stack.size() - 1 - i], 2);
}

template <typename Split>
absl::StatusOr<uint64_t> CompressSplit(const uint8_t* input, uint64_t count, DataType dtype, uint8_t* frame,
                                       const Layout& layout) {
  std::array<uint64_t, 256> histogram{};
  SplitAndCount<Split>(input, count, frame + layout.raw_offset, histogram);
  const Model model = BuildModel(histogram, count, layout.num_chunks);
  Header header = codec::MakeHeader(layout, static_cast<uint8_t>(dtype), count, model.mode,
                                    model.mode == Mode::kSplitConstant ? model.constant_symbol : 0);
  std::memset(frame + layout.table_offset, 0, layout.raw_offset - layout.table_offset);
  std::memset(frame + layout.raw_offset + layout.raw_bytes, 0, layout.coded_offset - layout.raw_offset - layout.raw_bytes);

  if (model.mode == Mode::kSplitStored) {
    uint8_t* symbols = frame + layout.coded_offset;
    for (uint64_t i = 0; i < count; ++i) symbols[i] = static_cast<uint8_t>(Split::Symbol(LoadElement<Split>(input, i)));
  } else if (model.mode == Mode::kSplitRans) {
    std::memcpy(frame + layout.table_offset, model.freqs.data(), codec::kTableBytes);
    std::array<EncoderSymbol, 256> symbols{};
    uint32_t start = 0;
    for (uint32_t s = 0; s < 256; ++s) {
      if (model.freqs[s] != 0) symbols[s] = codec::MakeEncoderSymbol(start, model.freqs[s]);
      start += model.freqs[s];
    }
    const uint64_t chunk_elements = uint64_t{codec::kLanes} * layout.lane_symbols;
    std::vector<uint16_t> stack;
    std::vector<uint8_t> chunk;
    stack.reserve(chunk_elements + 1);
    uint64_t coded = 0;
    for (uint32_t c = 0; c < layout.num_chunks; ++c) {
      const uint64_t first = c * chunk_elements;
      EncodeChunk<Split>(input, first, std::min(chunk_elements, count - first), symbols, stack, chunk);
      // The mode decision bounds the total; this guards the bound itself.
      if (coded + chunk.size() > layout.coded_capacity) {
        return absl::InternalError(absl::StrCat("compress ", DataTypeName(dtype), " x", count,
                                                ": rANS output outgrew its bound of ", layout.coded_capacity,
                                                " bytes at chunk ", c));
      }
      const uint32_t offset_words = static_cast<uint32_t>(coded / 4);
      std::memcpy(frame + layout.index_offset + 4 * uint64_t{c}, &offset_words, 4);
      std::memcpy(frame + layout.coded_offset + coded, chunk.data(), chunk.size());
      coded += chunk.size();
    }
    header.coded_bytes = coded;
    header.frame_bytes = header.coded_offset + coded;
  }
  std::memcpy(frame, &header, sizeof(header));
  return header.frame_bytes;
}

}  // namespace

absl::StatusOr<uint64_t> CompressHost(const void* input, uint64_t count, DataType dtype, void* frame,
                                      uint64_t frame_capacity, const CodecOptions& options) {
  auto plan = PlanFrame(dtype, count, options);
  if (!plan.ok()) return plan.status();
  if (frame == nullptr || (count > 0 && input == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("compress ", DataTypeName(dtype), " x", count,
                                                   ": null ", frame == nullptr ? "frame" : "input", " pointer"));
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
      [&]<typename Split>() { return CompressSplit<Split>(in, count, dtype, out, layout); },
      []() -> absl::StatusOr<uint64_t> { return absl::InternalError("split planned for a type without split"); });
}

}  // namespace ucclzip
