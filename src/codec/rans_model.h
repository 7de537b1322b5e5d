// The rANS probability model: how a histogram becomes the frame's frequency table, the per-symbol
// encoder constants, the decoder's slot entries, and the mode decision. Shared, bit for bit, by
// the CPU reference and the GPU kernels.
//
// Coder: 32-bit state in [2^15, 2^31), 16-bit renormalisation words, frequencies summing to
// 2^12. Division is replaced by an exact multiply-high by a reciprocal (exact for x < 2^31,
// see EncoderSymbol), so a step costs a handful of integer instructions.
#pragma once

#include <cstdint>

#include "codec/chunk_states.h"
#include "codec/frame_format.h"
#include "codec/host_device.h"

namespace ucclzip::codec {

UZ_HD uint32_t MulHi32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((uint64_t{a} * b) >> 32);
#endif
}

// Normalised frequency of one symbol. Every present symbol gets at least 1; the rest of the
// scale is shared in proportion to the counts; the remainder (at most the number of present
// symbols) goes to the most frequent symbol. Costs about 0.003 bits/symbol against the
// empirical entropy on bf16 Gaussians, needs no sorting or iteration, and runs one symbol per
// thread on the GPU.
UZ_HD uint32_t NormalizedFrequency(uint64_t count, uint64_t total, uint32_t present_symbols) {
  if (count == 0) return 0;
  const uint64_t scaled = count * (kProbScale - present_symbols);
  // The same quotient in 32 bits where it fits (a tile's table, any frame of up to 2^20
  // elements): a 64-bit division is a long subroutine on the GPU.
  if ((scaled | total) >> 32 == 0) return 1 + static_cast<uint32_t>(scaled) / static_cast<uint32_t>(total);
  return 1 + static_cast<uint32_t>(scaled / total);
}

// The table of a histogram of `total` symbols with `present` (>= 2) distinct values, as the GPU
// builds it one symbol per thread: NormalizedFrequency for each, the remainder to the most
// frequent symbol (lowest value on ties). Returns that symbol.
UZ_HD uint32_t NormalizeHistogram(const uint64_t* histogram, uint64_t total, uint32_t present, uint16_t* freqs) {
  uint32_t most_frequent = 0, sum = 0;
  for (uint32_t s = 0; s < kAlphabetSize; ++s) {
    if (histogram[s] > histogram[most_frequent]) most_frequent = s;
    freqs[s] = static_cast<uint16_t>(NormalizedFrequency(histogram[s], total, present));
    sum += freqs[s];
  }
  freqs[most_frequent] = static_cast<uint16_t>(freqs[most_frequent] + kProbScale - sum);
  return most_frequent;
}

// Per-symbol constants for the encoder step x -> floor(x/f)*M + (x mod f) + c, computed as
// x + bias + q*complement with q = floor(x/f) = mulhi(x, reciprocal) >> shift.
// For f >= 2, with s = ceil(log2 f): reciprocal = ceil(2^(31+s)/f) < 2^32 and the quotient is
// exact for every x < 2^31 (the rounding error of the reciprocal adds less than x/2^(31+s) < 1/f).
// For f == 1 the reciprocal 2^32-1 gives q = x-1, which the bias absorbs.
struct EncoderSymbol {
  uint32_t renorm_limit;  // emit 16 bits first when x >= renorm_limit
  uint32_t reciprocal;
  uint32_t bias;
  uint16_t complement;
  uint16_t shift;
};

// `freq` must be in [1, 4095]; absent symbols have no encoder constants.
UZ_HD EncoderSymbol MakeEncoderSymbol(uint32_t start, uint32_t freq) {
  EncoderSymbol sym{};
  sym.renorm_limit = ((kStateLow >> kProbBits) << 16) * freq;
  sym.complement = static_cast<uint16_t>(kProbScale - freq);
  if (freq == 1) {
    sym.reciprocal = 0xFFFFFFFFu;
    sym.shift = 0;
    sym.bias = start + kProbScale - 1;
  } else {
    uint32_t s = 32 - CountLeadingZeros(freq - 1);  // ceil(log2 freq)
    sym.reciprocal = static_cast<uint32_t>(((uint64_t{1} << (31 + s)) + freq - 1) / freq);
    sym.shift = static_cast<uint16_t>(s - 1);
    sym.bias = start;
  }
  return sym;
}

UZ_HD uint32_t EncodeStep(uint32_t x, const EncoderSymbol& sym) {
  uint32_t q = MulHi32(x, sym.reciprocal) >> sym.shift;
  return x + sym.bias + q * sym.complement;
}

// Decoder slot entry, packed in 32 bits: symbol (8) | frequency (12) | slot - start (12).
UZ_HD uint32_t MakeDecoderEntry(uint32_t symbol, uint32_t freq, uint32_t offset_in_symbol) {
  return symbol | (freq << 8) | (offset_in_symbol << 20);
}
UZ_HD uint32_t EntrySymbol(uint32_t entry) { return entry & 0xFF; }
UZ_HD uint32_t DecodeStep(uint32_t x, uint32_t entry) {
  uint32_t freq = (entry >> 8) & 0xFFF;
  return freq * (x >> kProbBits) + (entry >> 20);
}

// log2(value) rounded down, in 16.16 fixed point, for 1 <= value < 2^16. Integer-only, so the
// mode decision below is identical on every machine. Each fraction bit squares the mantissa (in
// Q31, in [1, 2)); in 32-bit halves, because on the GPU a 64-bit square is three multiplies and
// the 16 squarings are a chain on the model's critical path (every tile's model runs two).
UZ_HD uint32_t Log2FloorQ16(uint32_t value) {
  uint32_t integer = 31 - CountLeadingZeros(value);
  uint32_t mantissa = value << (31 - integer);  // in [2^31, 2^32): 1.xxx in Q31
  uint32_t fraction = 0;
  for (int bit = 15; bit >= 0; --bit) {
    // The square in Q31, (m * m) >> 31, lies in [2^31, 2^33): at least 2 (2^32) exactly when
    // the high word's top bit is set, and then the bit is 1 and the square halves to that word.
    const uint32_t high = MulHi32(mantissa, mantissa), low = mantissa * mantissa;
    const uint32_t at_least_two = high >> 31;
    fraction |= at_least_two << bit;
    mantissa = at_least_two != 0 ? high : (high << 1) | (low >> 31);
  }
  return (integer << 16) | fraction;
}

// An upper bound, in bits, on what coding `count` symbols of frequency `freq` can cost: each step
// grows the state by at most (M/f)*(1 + 1/8) because the state is >= 8f when it is coded.
UZ_HD uint64_t SymbolCostBoundQ16(uint64_t count, uint32_t freq) {
  constexpr uint32_t kStepSlackQ16 = 11143;  // log2(9/8) = 0.16993, rounded up, in Q16
  uint32_t per_symbol = (kProbBits << 16) - Log2FloorQ16(freq) + kStepSlackQ16;
  return count * per_symbol;
}

// A tile takes a table of its own only when coding it with that table, plus the table's own
// bytes, is bounded below coding it with the global table. Costs are SymbolCostBoundQ16 sums, so
// the frame's bound (and with it the capacity proof of RansPays) only shrinks.
UZ_HD bool TileTablePays(uint64_t own_cost_q16, uint32_t own_present, uint64_t global_cost_q16) {
  if (own_present < 2) return false;  // one symbol has no table (2^12 does not fit a frequency)
  const uint64_t table_q16 = uint64_t{TileTableBytes(own_present)} * 8 << 16;
  return own_cost_q16 + table_q16 < global_cost_q16;
}

// Writes a tile's own table (frame_format.h) and returns its size.
UZ_HD uint32_t WriteTileTable(const uint16_t* freqs, uint8_t* out) {
  uint32_t present = 0;
  for (uint32_t byte = 0; byte < kTileBitmapBytes; ++byte) {
    uint32_t bits = 0;
    for (uint32_t bit = 0; bit < 8; ++bit) bits |= (freqs[byte * 8 + bit] != 0 ? 1u : 0u) << bit;
    out[byte] = static_cast<uint8_t>(bits);
  }
  for (uint32_t s = 0; s < kAlphabetSize; ++s) {
    if (freqs[s] == 0) continue;
    out[kTileBitmapBytes + 2 * present] = static_cast<uint8_t>(freqs[s]);
    out[kTileBitmapBytes + 2 * present + 1] = static_cast<uint8_t>(freqs[s] >> 8);
    ++present;
  }
  const uint32_t bytes = TileTableBytes(present);
  for (uint32_t at = kTileBitmapBytes + 2 * present; at < bytes; ++at) out[at] = 0;
  return bytes;
}

// Bytes a chunk can add beyond its symbols' cost: its largest state area, the rounding of each
// lane's words and the chunk's 4-byte alignment.
inline constexpr uint64_t kChunkOverheadBoundBytes = kChunkMaxStateBytes + kLanes * 2 + 4;

// rANS is used only when its worst case saves at least 1/32 of the stored symbols. The bound is
// a true upper bound, so a chosen rANS frame never outgrows the stored-symbol capacity.
UZ_HD bool RansPays(uint64_t cost_bound_q16, uint64_t count, uint32_t num_chunks) {
  uint64_t bound_bytes = (cost_bound_q16 >> 19) + 1 + uint64_t{num_chunks} * kChunkOverheadBoundBytes;
  return bound_bytes <= count - count / 32;
}

}  // namespace ucclzip::codec

namespace ucclzip::codec {

// The split modes' choice, from the histogram's summary: one symbol needs no coding; rANS when
// its worst case pays; otherwise the symbols are stored.
UZ_HD Mode ChooseSplitMode(uint32_t present_symbols, uint64_t cost_bound_q16, uint64_t count, uint32_t num_chunks) {
  if (present_symbols <= 1) return Mode::kSplitConstant;
  return RansPays(cost_bound_q16, count, num_chunks) ? Mode::kSplitRans : Mode::kSplitStored;
}

}  // namespace ucclzip::codec
