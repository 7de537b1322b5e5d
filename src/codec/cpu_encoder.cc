// CPU reference encoder. It writes exactly the bytes the GPU encoder writes: the same split, the
// same model, and the same interleaving of the 32 lanes' renormalisation words.
//
// Two passes over the input: the first writes the raw plane and counts the symbols, the second
// codes the chunks. Both are cut into tasks of whole chunks, which HostCodecThreads may run in
// parallel: a task's chunks go straight into the frame when the task is the first, else into
// scratch, and are moved into place once every task's size is known.
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/cpu_rans.h"
#include "codec/cpu_split_loops.h"
#include "codec/dtype_dispatch.h"
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

// Symbols split and counted per block, so that the counting reads them from L1.
constexpr uint64_t kSplitBlock = 4096;

// The elements of task `task` of `tasks`, in whole chunks.
struct ChunkRange {
  uint32_t first_chunk, end_chunk;
  uint64_t first, end;  // elements
};

ChunkRange TaskChunks(const Layout& layout, uint64_t count, uint32_t task, uint32_t tasks) {
  const codec::TaskShare share = codec::ShareOf(layout.num_chunks, task, tasks);
  ChunkRange r;
  r.first_chunk = static_cast<uint32_t>(share.first);
  r.end_chunk = static_cast<uint32_t>(share.end);
  const uint64_t chunk_elements = uint64_t{codec::kLanes} * layout.lane_symbols;
  r.first = std::min(count, r.first_chunk * chunk_elements);
  r.end = std::min(count, r.end_chunk * chunk_elements);
  return r;
}

// Writes the raw plane of elements [first, end) and adds their symbols to `histogram`.
template <typename Split>
void SplitAndCount(const uint8_t* input, uint64_t first, uint64_t end, uint8_t* raw_plane, Histogram& histogram) {
  using Bits = typename Split::Bits;
  codec::SymbolCounter counter(histogram);
  if constexpr (Split::kRawWidth == 0) {
    counter.Add(input + first, end - first);  // the elements are the symbols
  } else {
    uint8_t symbols[kSplitBlock];
    for (uint64_t i = first; i < end; i += kSplitBlock) {
      const uint64_t n = std::min(kSplitBlock, end - i);
      codec::SplitElements<Split>(input + i * sizeof(Bits), n, raw_plane + i * Split::kRawWidth, symbols);
      counter.Add(symbols, n);
    }
  }
}

struct Model {
  Mode mode;
  uint8_t constant_symbol;
  std::array<uint16_t, 256> freqs{};
};

Model BuildModel(const Histogram& histogram, uint64_t count, uint32_t num_chunks) {
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

uint64_t AlignUp4(uint64_t bytes) { return (bytes + 3) & ~uint64_t{3}; }

// Bytes the chunks of a range can take at most: per chunk its states and a pad word, and one
// word per symbol.
uint64_t RangeBytesBound(const ChunkRange& range) {
  return (range.end_chunk - range.first_chunk) * uint64_t{codec::kChunkStateBytes + 2} + 2 * (range.end - range.first);
}

// Codes the chunks of `range` into `out` (at most `capacity` bytes), writing each chunk's offset
// from `out`, in 4-byte units, to its index entry. Returns the bytes written, or nothing if
// they would not fit.
template <typename Split>
std::optional<uint64_t> EncodeChunks(const uint8_t* input, uint64_t count, const Layout& layout, const ChunkRange& range,
                                     const codec::EncoderTable& table, uint8_t* index, uint8_t* out,
                                     uint64_t capacity) {
  using Bits = typename Split::Bits;
  const uint64_t chunk_elements = uint64_t{codec::kLanes} * layout.lane_symbols;
  const codec::ChunkCoder& coder = codec::ChosenChunkCoder();
  // This thread's buffers: the chunk's symbols, then its words (at most one per symbol).
  uint8_t* scratch = codec::ThreadScratch(codec::AlignUp16(chunk_elements) + 2 * (chunk_elements + codec::kEncodeSlackWords));
  uint16_t* words = reinterpret_cast<uint16_t*>(scratch + codec::AlignUp16(chunk_elements));
  uint64_t written = 0;
  for (uint32_t c = range.first_chunk; c < range.end_chunk; ++c) {
    const uint64_t first = c * chunk_elements;
    const auto n = static_cast<uint32_t>(std::min(chunk_elements, count - first));
    const uint8_t* symbols = input + first;  // fp8: the elements are the symbols
    if constexpr (Split::kRawWidth != 0) {
      codec::ExtractSymbols<Split>(input + first * sizeof(Bits), n, scratch);
      symbols = scratch;
    }
    uint32_t state[codec::kLanes];
    uint16_t* words_end = words + n + codec::kEncodeSlackWords;
    const uint16_t* begin = coder.encode(symbols, n, table, state, words_end);
    const uint64_t word_bytes = 2 * static_cast<uint64_t>(words_end - begin);
    const uint64_t chunk_bytes = codec::kChunkStateBytes + AlignUp4(word_bytes);
    if (written + chunk_bytes > capacity) return std::nullopt;
    const auto offset_words = static_cast<uint32_t>(written / 4);
    std::memcpy(index + 4 * uint64_t{c}, &offset_words, 4);
    uint8_t* chunk = out + written;
    std::memcpy(chunk, state, codec::kChunkStateBytes);
    std::memcpy(chunk + codec::kChunkStateBytes, begin, word_bytes);
    // An odd word count is padded with a zero word, read last.
    if (word_bytes % 4 != 0) std::memset(chunk + codec::kChunkStateBytes + word_bytes, 0, 2);
    written += chunk_bytes;
  }
  return written;
}

template <typename Split>
absl::StatusOr<uint64_t> EncodeRans(const uint8_t* input, uint64_t count, DataType dtype, uint8_t* frame,
                                    const Layout& layout, const Model& model, codec::ParallelCall& call) {
  const codec::EncoderTable table = codec::MakeEncoderTable(model.freqs.data());
  uint8_t* index = frame + layout.index_offset;
  uint8_t* coded = frame + layout.coded_offset;
  const uint32_t tasks = call.TaskCount(layout.num_chunks);
  // Task 0 writes in place; task t > 0 into scratch at scratch_offset[t], capped by its own bound
  // and by the capacity of the whole frame.
  std::vector<uint64_t> scratch_offset(tasks + 1, 0), capacity(tasks);
  capacity[0] = layout.coded_capacity;
  for (uint32_t t = 1; t < tasks; ++t) {
    capacity[t] = std::min(layout.coded_capacity, RangeBytesBound(TaskChunks(layout, count, t, tasks)));
    scratch_offset[t + 1] = scratch_offset[t] + capacity[t];
  }
  uint8_t* scratch = tasks > 1 ? call.Scratch(scratch_offset[tasks]) : nullptr;
  std::vector<std::optional<uint64_t>> written(tasks);
  call.Run(tasks, [&](uint32_t t) {
    uint8_t* out = t == 0 ? coded : scratch + scratch_offset[t];
    written[t] =
        EncodeChunks<Split>(input, count, layout, TaskChunks(layout, count, t, tasks), table, index, out, capacity[t]);
  });
  std::vector<uint64_t> place(tasks + 1, 0);
  for (uint32_t t = 0; t < tasks; ++t) {
    place[t + 1] = place[t] + written[t].value_or(0);
    // The mode decision bounds the total; this guards the bound itself.
    if (!written[t] || place[t + 1] > layout.coded_capacity) {
      const ChunkRange r = TaskChunks(layout, count, t, tasks);
      return absl::InternalError(absl::StrCat("compress ", DataTypeName(dtype), " x", count,
                                              ": rANS output outgrew its bound of ", layout.coded_capacity,
                                              " bytes in chunks ", r.first_chunk, " to ", r.end_chunk - 1));
    }
  }
  call.Run(tasks - 1, [&](uint32_t moved) {
    const uint32_t t = moved + 1;
    std::memcpy(coded + place[t], scratch + scratch_offset[t], *written[t]);
    const ChunkRange r = TaskChunks(layout, count, t, tasks);
    for (uint32_t c = r.first_chunk; c < r.end_chunk; ++c) {
      uint32_t offset_words;
      std::memcpy(&offset_words, index + 4 * uint64_t{c}, 4);
      offset_words += static_cast<uint32_t>(place[t] / 4);
      std::memcpy(index + 4 * uint64_t{c}, &offset_words, 4);
    }
  });
  return place[tasks];
}

template <typename Split>
absl::StatusOr<uint64_t> CompressSplit(const uint8_t* input, uint64_t count, DataType dtype, uint8_t* frame,
                                       const Layout& layout, codec::ParallelCall& call) {
  const uint32_t tasks = call.TaskCount(layout.num_chunks);
  std::vector<Histogram> histograms(tasks, Histogram{});
  call.Run(tasks, [&](uint32_t t) {
    const ChunkRange r = TaskChunks(layout, count, t, tasks);
    SplitAndCount<Split>(input, r.first, r.end, frame + layout.raw_offset, histograms[t]);
  });
  Histogram histogram{};
  for (const Histogram& h : histograms) {
    for (uint32_t s = 0; s < 256; ++s) histogram[s] += h[s];
  }
  const Model model = BuildModel(histogram, count, layout.num_chunks);
  Header header = codec::MakeHeader(layout, static_cast<uint8_t>(dtype), count, model.mode,
                                    model.mode == Mode::kSplitConstant ? model.constant_symbol : 0);
  std::memset(frame + layout.table_offset, 0, layout.raw_offset - layout.table_offset);
  std::memset(frame + layout.raw_offset + layout.raw_bytes, 0, layout.coded_offset - layout.raw_offset - layout.raw_bytes);

  if (model.mode == Mode::kSplitStored) {
    call.Run(tasks, [&](uint32_t t) {
      const ChunkRange r = TaskChunks(layout, count, t, tasks);
      codec::ExtractSymbols<Split>(input + r.first * sizeof(typename Split::Bits), r.end - r.first,
                                   frame + layout.coded_offset + r.first);
    });
  } else if (model.mode == Mode::kSplitRans) {
    std::memcpy(frame + layout.table_offset, model.freqs.data(), codec::kTableBytes);
    absl::StatusOr<uint64_t> coded = EncodeRans<Split>(input, count, dtype, frame, layout, model, call);
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
