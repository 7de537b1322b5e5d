// The CPU's rANS coders for one chunk of 32 interleaved lanes (docs/FRAME_FORMAT.md, "Mode 3").
// Symbols come from, and go to, a contiguous buffer: element e of the chunk is lane e mod 32 at
// step e / 32, so a step is 32 neighbouring bytes.
//
// Three implementations write and read the same bytes: a portable one, one lane at a time; an
// AVX2 one, eight lanes per instruction (cpu_rans_avx2.cc); and an AVX-512 one, sixteen
// (cpu_rans_avx512.cc); the widest the CPU has is chosen at run time. All share the per-lane
// steps below for what is left over: a chunk's partial last step, and the steps whose word reads
// need a bound check.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "codec/chunk_states.h"
#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "codec/rans_model.h"

namespace ucclzip::codec {

// The n + kEncodeSlackWords words below `words_end` must be writable for a chunk of n symbols:
// renormalisation words are stored before it is known whether they count, up to 8 at a time.
inline constexpr uint32_t kEncodeSlackWords = 8;

// The per-symbol encoder constants (rans_model.h) in the layouts the two coders read: whole
// EncoderSymbols for the portable one; for the AVX2 one, two 32-bit words per symbol, so that
// eight lanes fetch theirs with two gathers.
struct EncoderTable {
  static constexpr uint32_t kFreqShift = 13;   // bias < 2^13: start + 4095 at most
  static constexpr uint32_t kShiftShift = 25;  // freq < 2^12
  std::array<EncoderSymbol, kAlphabetSize> symbols{};
  std::array<uint32_t, kAlphabetSize> reciprocal{};
  std::array<uint32_t, kAlphabetSize> packed{};  // bias | freq << kFreqShift | shift << kShiftShift
  // Where every present symbol lies in [window_first, window_first + kWindowSymbols) (bf16 and
  // fp32 exponents mostly do), the AVX-512 coder looks the constants up from registers rather
  // than gathering them from memory, which costs more than all the rest of a step.
  static constexpr uint32_t kWindowSymbols = 64;
  bool in_window = false;
  uint32_t window_first = 0;
};

// From a frequency table that passed CheckTable; absent symbols get no constants.
inline EncoderTable MakeEncoderTable(const uint16_t* freqs) {
  EncoderTable table;
  uint32_t start = 0, lowest = kAlphabetSize, highest = 0;
  for (uint32_t s = 0; s < kAlphabetSize; ++s) {
    if (freqs[s] != 0) {
      lowest = std::min(lowest, s);
      highest = s;
      const EncoderSymbol sym = MakeEncoderSymbol(start, freqs[s]);
      table.symbols[s] = sym;
      table.reciprocal[s] = sym.reciprocal;
      table.packed[s] = sym.bias | uint32_t{freqs[s]} << EncoderTable::kFreqShift |
                        uint32_t{sym.shift} << EncoderTable::kShiftShift;
    }
    start += freqs[s];
  }
  table.in_window = highest - lowest < EncoderTable::kWindowSymbols;
  table.window_first = std::min(lowest, kAlphabetSize - EncoderTable::kWindowSymbols);
  return table;
}

// One chunk for a decoder: its untrusted bytes [bytes, bytes + size), the n symbols it holds
// and where they go; the lanes' carried raw parts (frame_format.h, carried_steps of raw_bits
// each), which their end states must hold in LaneStartState's form, and where those end states
// go.
struct ChunkToDecode {
  const uint8_t* bytes;
  uint64_t size;
  uint32_t n;
  uint8_t* symbols;
  uint32_t carried_steps;
  uint32_t raw_bits;
  uint32_t* end_state;  // kLanes states
};

// A chunk coder. Encode codes a chunk's n symbols (n <= 32 * the lane length): the lanes run
// backwards over their steps, each from the state the caller left in `state` (LaneStartState),
// and write their words downwards from `words_end`, the lanes of a step in descending order, so
// that the words lie in the order the decoder reads them; it returns the first word and leaves
// the final states in `state`. Decode decodes a chunk with the table's 4096 slot entries,
// reading nothing outside its bytes, and returns kOk (with the lanes' end states) or the error.
// DecodeTwo decodes two, each as Decode would: a lane's steps depend on one another, and two
// chunks give the CPU twice the independent work to overlap.
struct ChunkCoder {
  uint16_t* (*encode)(const uint8_t* symbols, uint32_t n, const EncoderTable& table, uint32_t* state,
                      uint16_t* words_end);
  DecodeError (*decode)(const uint32_t* slots, const ChunkToDecode& chunk);
  void (*decode_two)(const uint32_t* slots, const ChunkToDecode& a, const ChunkToDecode& b, DecodeError& a_result,
                     DecodeError& b_result);
};

// The portable coder; the AVX2 and AVX-512 coders where this CPU has those (else null); and the
// one the codec uses, the fastest of them.
const ChunkCoder& PortableChunkCoder();
const ChunkCoder* Avx2ChunkCoder();
const ChunkCoder* Avx512ChunkCoder();
const ChunkCoder& ChosenChunkCoder();

// --- Per-lane steps, shared by both coders ----------------------------------------------------

// Codes one symbol on one lane. Branch-free: the data decides the renormalisation (about one
// symbol in six, at random), so a word is always stored and `out` moves only when it counts.
inline void EncodeLaneStep(uint32_t& x, const EncoderSymbol& sym, uint16_t*& out) {
  const uint32_t emit = x >= sym.renorm_limit;
  out[-1] = static_cast<uint16_t>(x);
  out -= emit;
  x >>= emit * 16;  // arithmetic rather than a select, which the compiler may turn into a branch
  x = EncodeStep(x, sym);
}

// Decodes one symbol on one lane, reading a word only if it lies within the `available` words.
// Returns false where the lane needs a word past them.
inline bool DecodeLaneStepChecked(uint32_t& x, const uint32_t* slots, const uint8_t* words, uint64_t available,
                                  uint64_t& next, uint8_t& symbol) {
  const uint32_t entry = slots[x & (kProbScale - 1)];
  x = DecodeStep(x, entry);
  symbol = static_cast<uint8_t>(EntrySymbol(entry));
  if (x < kStateLow) {
    if (next >= available) return false;
    uint16_t word;
    std::memcpy(&word, words + 2 * next++, 2);
    x = (x << 16) | word;
  }
  return true;
}

// Writes a chunk's 32 final states as its state area (chunk_states.h) at `out`; returns its bytes.
inline uint32_t WriteChunkStates(const uint32_t* state, uint8_t* out) {
  uint32_t words[kChunkMaxStateWords + 1] = {};  // + 1: a placement's (empty) high word past the last
  uint32_t codes_below = 0;
  for (uint32_t lane = 0; lane < kLanes; ++lane) {
    const LaneStatePlacement p = PlaceLaneState(state[lane], lane, codes_below);
    words[p.code_word] |= p.code_bits;
    words[p.word] |= p.low;
    words[p.word + 1] |= p.high;
    codes_below += StateCode(state[lane]);
  }
  const uint32_t bytes = ChunkStateBytes(codes_below);
  std::memcpy(out, words, bytes);
  return bytes;
}

// Reads a chunk's 32 states from its state area and checks the chunk's size and the area's
// padding; `first_word` is where the renormalisation words begin, in u16 words from the chunk's
// start (decoders index the chunk's words from there, so that the pad word's rule, "an odd
// count of them", needs no offset).
inline DecodeError ReadChunkStates(const uint8_t* chunk, uint64_t chunk_bytes, uint32_t* state, uint64_t& first_word) {
  if (chunk_bytes < kChunkMinStateBytes || chunk_bytes % 4 != 0) return DecodeError::kBadIndex;
  uint32_t words[kChunkMaxStateWords] = {};
  std::memcpy(words, chunk, std::min<uint64_t>(chunk_bytes, kChunkMaxStateBytes));
  const uint32_t code_sum = CodesBelow(words, kLanes);
  const uint32_t state_bytes = ChunkStateBytes(code_sum);
  if (state_bytes > chunk_bytes) return DecodeError::kCorruptStream;
  uint16_t last;
  std::memcpy(&last, chunk + state_bytes - 2, 2);
  if ((last & StatePadMask(code_sum)) != 0) return DecodeError::kCorruptStream;
  for (uint32_t lane = 0; lane < kLanes; ++lane) state[lane] = ReadLaneState(words, lane, CodesBelow(words, lane));
  first_word = state_bytes / 2;
  return DecodeError::kOk;
}

// Decodes steps [first_step, steps of the chunk's n symbols) one lane at a time, with bound
// checks, and checks that the chunk ends as the encoder began: every lane at a start state
// (IsLaneStartState) and every word read but the pad. Leaves the end states in the chunk's.
inline DecodeError FinishChunkChecked(uint32_t* state, const uint32_t* slots, const uint8_t* words, uint64_t available,
                                      uint64_t next, uint32_t first_step, const ChunkToDecode& chunk) {
  const uint32_t n = chunk.n;
  for (uint32_t e = first_step * kLanes; e < n; ++e) {
    if (!DecodeLaneStepChecked(state[e % kLanes], slots, words, available, next, chunk.symbols[e])) {
      return DecodeError::kCorruptStream;
    }
  }
  for (uint32_t lane = 0; lane < kLanes; ++lane) {
    const uint32_t carried = std::min(LaneElements(n, lane), chunk.carried_steps);
    if (!IsLaneStartState(state[lane], carried, chunk.raw_bits, chunk.carried_steps)) return DecodeError::kCorruptStream;
    chunk.end_state[lane] = state[lane];
  }
  const bool exact = next == available;
  const bool padded =
      next + 1 == available && next % 2 == 1 && words[2 * next] == 0 && words[2 * next + 1] == 0;
  return exact || padded ? DecodeError::kOk : DecodeError::kCorruptStream;
}

}  // namespace ucclzip::codec
