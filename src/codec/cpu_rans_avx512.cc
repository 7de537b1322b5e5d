// The AVX-512 chunk coder: each 512-bit register holds sixteen lanes' states, a step of 32 lanes
// is two registers, and the lanes' variable-length renormalisation words are moved into place by
// the compress and expand instructions under the lanes' bit mask (the AVX2 coder looks its
// permutations up). On CPUs with full-width 512-bit units this halves the instructions per
// symbol. Its encoder codes only chunks whose table fits EncoderTable's window, and leaves the
// others to the AVX2 coder (EncodeAvx512OrAvx2). Compiled for AVX-512 function by function, so
// that the library still runs on CPUs without it (ChosenChunkCoder asks the CPU first).
#include "codec/cpu_rans.h"

#if defined(__x86_64__)

// GCC 12's AVX-512 intrinsics start from a deliberately undefined vector (`__Y = __Y`), which it
// then reports as maybe uninitialized wherever they are inlined (GCC bug 105593, fixed in 13).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <bit>

#define UZ_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,popcnt")))

namespace ucclzip::codec {
namespace {

constexpr uint32_t kVectorLanes = 16;
constexpr uint32_t kVectorsPerStep = kLanes / kVectorLanes;

// renorm_limit == freq << kLimitShift.
constexpr int kLimitShift = 19;
static_assert(((kStateLow >> kProbBits) << 16) == 1u << kLimitShift);

// The high 32 bits of each lane's 64-bit product.
UZ_AVX512 inline __m512i MulHi(__m512i a, __m512i b) {
  const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(a, b), 32);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(b, 32));
  return _mm512_mask_blend_epi32(0xAAAA, even, odd);
}

// The encoder constants of sixteen symbols, from registers holding the table's window
// (EncoderTable::in_window): each 32 entries are two registers that one two-source permutation
// indexes.
struct WindowConstants {
  static constexpr uint32_t kRegisters = EncoderTable::kWindowSymbols / kVectorLanes;
  __m512i first;
  __m512i reciprocal[kRegisters], packed[kRegisters];

  UZ_AVX512 explicit WindowConstants(const EncoderTable& table) {
    first = _mm512_set1_epi32(static_cast<int>(table.window_first));
    for (uint32_t r = 0; r < kRegisters; ++r) {
      reciprocal[r] = _mm512_loadu_si512(table.reciprocal.data() + table.window_first + r * kVectorLanes);
      packed[r] = _mm512_loadu_si512(table.packed.data() + table.window_first + r * kVectorLanes);
    }
  }
  UZ_AVX512 void Fetch(__m512i symbol, __m512i& reciprocal_out, __m512i& packed_out) const {
    static_assert(kRegisters == 4, "two permutations of 32 entries and a blend");
    const __m512i index = _mm512_sub_epi32(symbol, first);  // the permutations read its low 5 bits
    const __mmask16 upper = _mm512_test_epi32_mask(index, _mm512_set1_epi32(32));
    reciprocal_out = _mm512_mask_blend_epi32(upper, _mm512_permutex2var_epi32(reciprocal[0], index, reciprocal[1]),
                                             _mm512_permutex2var_epi32(reciprocal[2], index, reciprocal[3]));
    packed_out = _mm512_mask_blend_epi32(upper, _mm512_permutex2var_epi32(packed[0], index, packed[1]),
                                         _mm512_permutex2var_epi32(packed[2], index, packed[3]));
  }
};

// Codes the sixteen lanes of `x` with the sixteen symbols at `symbols` (EncodeLaneStep, sixteen
// at once). The emitting lanes' words, in ascending lane order, go just below `out`.
UZ_AVX512 inline __m512i EncodeVector(__m512i x, const uint8_t* symbols, const WindowConstants& constants, uint16_t*& out) {
  const __m512i symbol = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(symbols)));
  __m512i reciprocal, packed;
  constants.Fetch(symbol, reciprocal, packed);
  const __m512i bias = _mm512_and_si512(packed, _mm512_set1_epi32((1 << EncoderTable::kFreqShift) - 1));
  const __m512i freq =
      _mm512_and_si512(_mm512_srli_epi32(packed, EncoderTable::kFreqShift), _mm512_set1_epi32(kProbScale - 1));
  const __m512i shift = _mm512_srli_epi32(packed, EncoderTable::kShiftShift);
  const __mmask16 emit = _mm512_cmpge_epu32_mask(x, _mm512_slli_epi32(freq, kLimitShift));
  const uint32_t emitted = std::popcount(static_cast<uint32_t>(emit));
  const __m256i words = _mm512_cvtepi32_epi16(_mm512_maskz_compress_epi32(emit, x));
  // A masked store: the words above `out` are earlier steps' and must stay.
  _mm256_mask_storeu_epi16(out - emitted, static_cast<__mmask16>((1u << emitted) - 1), words);
  out -= emitted;
  x = _mm512_mask_srli_epi32(x, emit, x, 16);
  const __m512i q = _mm512_srlv_epi32(MulHi(x, reciprocal), shift);
  const __m512i complement = _mm512_sub_epi32(_mm512_set1_epi32(kProbScale), freq);
  return _mm512_add_epi32(_mm512_add_epi32(x, bias), _mm512_mullo_epi32(q, complement));
}

// The chunk's whole steps, from the last; the lanes' states are in `state`.
UZ_AVX512 inline uint16_t* EncodeSteps(const uint8_t* symbols, uint32_t steps, const WindowConstants& constants,
                                       uint32_t* state, uint16_t* out) {
  __m512i low = _mm512_loadu_si512(state), high = _mm512_loadu_si512(state + kVectorLanes);
  for (uint32_t k = steps; k-- > 0;) {
    // Lanes in descending order: the high sixteen first, as their words go above the others'.
    high = EncodeVector(high, symbols + k * kLanes + kVectorLanes, constants, out);
    low = EncodeVector(low, symbols + k * kLanes, constants, out);
  }
  _mm512_storeu_si512(state, low);
  _mm512_storeu_si512(state + kVectorLanes, high);
  return out;
}

// A chunk whose table fits the window.
UZ_AVX512 uint16_t* EncodeAvx512(const uint8_t* symbols, uint32_t n, const EncoderTable& table, uint32_t* state,
                                 uint16_t* words_end) {
  uint16_t* out = words_end;
  const uint32_t full_steps = n / kLanes;
  for (uint32_t e = n; e-- > full_steps * kLanes;) EncodeLaneStep(state[e % kLanes], table.symbols[symbols[e]], out);
  return EncodeSteps(symbols, full_steps, WindowConstants(table), state, out);
}

// Tables wider than the window need gathers, and sixteen-lane gathers cost more per symbol than
// the AVX2 coder's eight-lane ones (measured on AMD Zen 5): those chunks go to that coder, which
// every AVX-512 CPU has.
UZ_AVX512 uint16_t* EncodeAvx512OrAvx2(const uint8_t* symbols, uint32_t n, const EncoderTable& table, uint32_t* state,
                                       uint16_t* words_end) {
  if (table.in_window) return EncodeAvx512(symbols, n, table, state, words_end);
  return Avx2ChunkCoder()->encode(symbols, n, table, state, words_end);
}

// Decodes the sixteen lanes of `x` (DecodeLaneStepChecked without the check, sixteen at once);
// the caller guarantees sixteen readable words at `words + 2 * next`. Returns the symbols.
UZ_AVX512 inline __m128i DecodeVector(__m512i& x, const uint32_t* slots, const uint8_t* words, uint64_t& next) {
  const __m512i slot_mask = _mm512_set1_epi32(kProbScale - 1);
  const __m512i entry = _mm512_i32gather_epi32(_mm512_and_si512(x, slot_mask), slots, 4);
  const __m512i freq = _mm512_and_si512(_mm512_srli_epi32(entry, 8), slot_mask);
  const __m512i decoded =
      _mm512_add_epi32(_mm512_mullo_epi32(freq, _mm512_srli_epi32(x, kProbBits)), _mm512_srli_epi32(entry, 20));
  const __mmask16 refill = _mm512_cmplt_epu32_mask(decoded, _mm512_set1_epi32(kStateLow));
  const __m512i loaded = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + 2 * next)));
  const __m512i word = _mm512_maskz_expand_epi32(refill, loaded);
  x = _mm512_mask_or_epi32(decoded, refill, _mm512_slli_epi32(decoded, 16), word);
  next += std::popcount(static_cast<uint32_t>(refill));
  return _mm512_cvtepi32_epi8(entry);  // the low byte of an entry is its symbol
}

// A chunk in the middle of decoding: its lanes' states in two registers, its words, and the
// next step.
struct VectorChunk {
  __m512i low, high;
  const uint8_t* words;
  uint64_t available;
  uint64_t next;
  uint32_t step;
};

UZ_AVX512 inline VectorChunk StartChunk(const uint32_t* state, uint64_t first_word, const ChunkToDecode& chunk) {
  VectorChunk c;
  c.low = _mm512_loadu_si512(state);
  c.high = _mm512_loadu_si512(state + kVectorLanes);
  c.words = chunk.bytes;
  c.available = chunk.size / 2;
  c.next = first_word;
  c.step = 0;
  return c;
}

// A whole step whose reads need no bound check: a step reads at most one word per lane.
inline bool HasFastStep(const VectorChunk& c, const ChunkToDecode& chunk) {
  return c.step < chunk.n / kLanes && c.available - c.next >= kLanes;
}

UZ_AVX512 inline void DecodeFastStep(VectorChunk& c, const uint32_t* slots, uint8_t* symbols) {
  uint8_t* out = symbols + c.step * kLanes;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), DecodeVector(c.low, slots, c.words, c.next));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + kVectorLanes), DecodeVector(c.high, slots, c.words, c.next));
  ++c.step;
}

UZ_AVX512 inline DecodeError FinishChunk(VectorChunk& c, const uint32_t* slots, const ChunkToDecode& chunk) {
  while (HasFastStep(c, chunk)) DecodeFastStep(c, slots, chunk.symbols);
  uint32_t state[kLanes];
  _mm512_storeu_si512(state, c.low);
  _mm512_storeu_si512(state + kVectorLanes, c.high);
  return FinishChunkChecked(state, slots, c.words, c.available, c.next, c.step, chunk);
}

UZ_AVX512 DecodeError DecodeAvx512(const uint32_t* slots, const ChunkToDecode& chunk) {
  uint32_t state[kLanes];
  uint64_t first_word = 0;
  if (DecodeError e = ReadChunkStates(chunk.bytes, chunk.size, state, first_word); e != DecodeError::kOk) return e;
  VectorChunk c = StartChunk(state, first_word, chunk);
  return FinishChunk(c, slots, chunk);
}

UZ_AVX512 void DecodeTwoAvx512(const uint32_t* slots, const ChunkToDecode& a, const ChunkToDecode& b,
                               DecodeError& a_result, DecodeError& b_result) {
  uint32_t a_state[kLanes], b_state[kLanes];
  uint64_t a_first = 0, b_first = 0;
  a_result = ReadChunkStates(a.bytes, a.size, a_state, a_first);
  b_result = ReadChunkStates(b.bytes, b.size, b_state, b_first);
  if (a_result != DecodeError::kOk || b_result != DecodeError::kOk) {
    if (a_result == DecodeError::kOk) a_result = DecodeAvx512(slots, a);
    if (b_result == DecodeError::kOk) b_result = DecodeAvx512(slots, b);
    return;
  }
  VectorChunk ca = StartChunk(a_state, a_first, a), cb = StartChunk(b_state, b_first, b);
  while (HasFastStep(ca, a) && HasFastStep(cb, b)) {
    DecodeFastStep(ca, slots, a.symbols);
    DecodeFastStep(cb, slots, b.symbols);
  }
  a_result = FinishChunk(ca, slots, a);
  b_result = FinishChunk(cb, slots, b);
}

}  // namespace

const ChunkCoder* Avx512ChunkCoder() {
  static constexpr ChunkCoder kCoder{EncodeAvx512OrAvx2, DecodeAvx512, DecodeTwoAvx512};
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && Avx2ChunkCoder() != nullptr;
  }();
  return supported ? &kCoder : nullptr;
}

}  // namespace ucclzip::codec

#else

namespace ucclzip::codec {

const ChunkCoder* Avx512ChunkCoder() { return nullptr; }

}  // namespace ucclzip::codec

#endif
