// CPU reference decoder. The frame is untrusted: the header, the table and every chunk offset
// are checked before use, and each lane's reads are bounded by its chunk.
//
// Chunks decode independently, so they are cut into tasks that HostCodecThreads may run in
// parallel. Each task stops at its first bad chunk; the error reported is the first chunk's in
// frame order, the same as one thread would report.
#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codec/cpu_rans.h"
#include "codec/cpu_split_loops.h"
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
using codec::Mode;

// Elements joined per block in the modes without coding, so that the symbols stay in L1.
constexpr uint64_t kJoinBlock = 4096;

// Modes 1 and 2: the symbols are `stored`, or (null) all `constant_symbol`.
template <typename Split>
void JoinUncoded(const uint8_t* raw_plane, const uint8_t* stored, uint8_t constant_symbol, uint64_t first,
                 uint64_t end, uint8_t* output) {
  using Bits = typename Split::Bits;
  uint8_t constant[kJoinBlock];
  if (stored == nullptr) std::memset(constant, constant_symbol, sizeof(constant));
  for (uint64_t i = first; i < end; i += kJoinBlock) {
    const uint64_t n = std::min(kJoinBlock, end - i);
    codec::JoinElements<Split>(raw_plane + i * Split::kRawWidth, stored != nullptr ? stored + i : constant, n,
                               output + i * sizeof(Bits));
  }
}

// Where chunk c's bytes lie, from the untrusted index: false if they are out of order or out of
// bounds.
bool LocateChunk(const uint8_t* frame, const Header& h, uint64_t c, uint64_t num_chunks, codec::ChunkToDecode& chunk) {
  const uint8_t* index = frame + codec::kHeaderBytes + codec::kTableBytes;
  uint32_t begin_words, end_words;
  std::memcpy(&begin_words, index + 4 * c, 4);
  if (c + 1 < num_chunks) {
    std::memcpy(&end_words, index + 4 * (c + 1), 4);
  } else {
    end_words = static_cast<uint32_t>(h.coded_bytes / 4);
  }
  if (begin_words > end_words || uint64_t{end_words} * 4 > h.coded_bytes) return false;
  chunk.bytes = frame + h.coded_offset + 4 * uint64_t{begin_words};
  chunk.size = 4 * uint64_t{end_words - begin_words};
  return true;
}

// Decodes chunks [first_chunk, end_chunk), two at a time. Returns 0 or the error word of the
// first bad chunk; errors are checked in chunk order, so the first is the one a chunk-by-chunk
// decoder would stop at.
template <typename Split>
uint32_t DecodeChunks(const uint8_t* frame, const Header& h, const uint32_t* slots, uint64_t first_chunk,
                      uint64_t end_chunk, uint8_t* output) {
  using Bits = typename Split::Bits;
  constexpr bool kJoin = Split::kRawWidth != 0;  // fp8: the symbols are the elements
  const uint8_t* raw_plane = frame + h.raw_offset;
  const uint64_t chunk_elements = uint64_t{codec::kLanes} << h.lane_symbols_log2;
  const uint64_t num_chunks = codec::DivCeil(h.count, chunk_elements);
  const codec::ChunkCoder& coder = codec::ChosenChunkCoder();
  uint8_t* symbols = kJoin ? codec::ThreadScratch(2 * chunk_elements) : nullptr;
  const auto error = [](DecodeError e, uint64_t c) { return codec::MakeErrorWord(e, static_cast<uint32_t>(c)); };
  const auto prepare = [&](uint64_t c, uint32_t slot, codec::ChunkToDecode& chunk) {
    const uint64_t first = c * chunk_elements;
    chunk.n = static_cast<uint32_t>(std::min(chunk_elements, h.count - first));
    chunk.symbols = kJoin ? symbols + slot * chunk_elements : output + first;
    return LocateChunk(frame, h, c, num_chunks, chunk);
  };
  const auto join = [&](uint64_t c, const codec::ChunkToDecode& chunk) {
    if constexpr (kJoin) {
      const uint64_t first = c * chunk_elements;
      codec::JoinElements<Split>(raw_plane + first * Split::kRawWidth, chunk.symbols, chunk.n,
                                 output + first * sizeof(Bits));
    }
  };
  for (uint64_t c = first_chunk; c < end_chunk; c += 2) {
    const uint32_t group = c + 1 < end_chunk ? 2 : 1;
    codec::ChunkToDecode chunks[2];
    DecodeError results[2] = {DecodeError::kBadIndex, DecodeError::kBadIndex};
    const bool located = prepare(c, 0, chunks[0]);
    if (located && group == 2 && prepare(c + 1, 1, chunks[1])) {
      coder.decode_two(slots, chunks[0], chunks[1], results[0], results[1]);
    } else if (located) {
      results[0] = coder.decode(slots, chunks[0]);
    }
    for (uint32_t i = 0; i < group; ++i) {
      if (results[i] != DecodeError::kOk) return error(results[i], c + i);
      join(c + i, chunks[i]);
    }
  }
  return 0;
}

// Returns a decode error word (frame_checks.h): the code, and the failing chunk as detail.
template <typename Split>
uint32_t DecodeSplit(const uint8_t* frame, const Header& h, uint8_t* output, codec::ParallelCall& call) {
  const uint8_t* raw_plane = frame + h.raw_offset;
  const Mode mode = static_cast<Mode>(h.mode);
  if (mode == Mode::kSplitConstant || mode == Mode::kSplitStored) {
    const uint8_t* stored = mode == Mode::kSplitStored ? frame + h.coded_offset : nullptr;
    const uint64_t blocks = codec::DivCeil(h.count, kJoinBlock);
    const uint32_t tasks = call.TaskCount(blocks);
    call.Run(tasks, [&](uint32_t t) {
      const codec::TaskShare share = codec::ShareOf(blocks, t, tasks);
      JoinUncoded<Split>(raw_plane, stored, h.constant_symbol, share.first * kJoinBlock,
                         std::min(h.count, share.end * kJoinBlock), output);
    });
    return 0;
  }
  std::array<uint16_t, codec::kAlphabetSize> freqs;
  std::memcpy(freqs.data(), frame + codec::kHeaderBytes, codec::kTableBytes);
  if (DecodeError e = codec::CheckTable(freqs.data()); e != DecodeError::kOk) return codec::MakeErrorWord(e, 0);
  std::array<uint32_t, codec::kProbScale> slots;
  codec::BuildDecodeTable(freqs.data(), slots.data());

  const uint64_t num_chunks = codec::DivCeil(h.count, uint64_t{codec::kLanes} << h.lane_symbols_log2);
  const uint32_t tasks = call.TaskCount(num_chunks);
  std::vector<uint32_t> errors(tasks, 0);
  call.Run(tasks, [&](uint32_t t) {
    const codec::TaskShare share = codec::ShareOf(num_chunks, t, tasks);
    errors[t] = DecodeChunks<Split>(frame, h, slots.data(), share.first, share.end, output);
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
