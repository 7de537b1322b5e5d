// The AVX2 chunk coder: each 256-bit register holds eight lanes' states, a step of 32 lanes is
// four registers, and the lanes' variable-length renormalisation words are moved into place by
// permutations looked up from the lanes' bit mask. Compiled for AVX2 function by function, so
// that the library still runs on CPUs without it (ChosenChunkCoder asks the CPU first).
#include "codec/cpu_rans.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <array>
#include <bit>
#include <cstddef>

#define UZ_AVX2 __attribute__((target("avx2,popcnt")))

namespace ucclzip::codec {
namespace {

constexpr uint32_t kVectorLanes = 8;
constexpr uint32_t kVectorsPerStep = kLanes / kVectorLanes;

// Byte i of entry m: for each 8-lane mask m, where lane i's word comes from. Expand: lane i (bit
// i set) takes the next word after those of the set lanes below it. Compress: the set lanes'
// words, in ascending lane order, fill the top popcount(m) positions.
using PermutationTable = std::array<uint64_t, 256>;

constexpr PermutationTable MakeExpandTable() {
  PermutationTable table{};
  for (uint32_t m = 0; m < 256; ++m) {
    uint64_t from = 0;
    for (uint32_t lane = 0; lane < kVectorLanes; ++lane) {
      if ((m >> lane) & 1) table[m] |= from++ << (8 * lane);
    }
  }
  return table;
}

constexpr PermutationTable MakeCompressTable() {
  PermutationTable table{};
  for (uint32_t m = 0; m < 256; ++m) {
    uint64_t to = kVectorLanes - std::popcount(m);
    for (uint64_t lane = 0; lane < kVectorLanes; ++lane) {
      if ((m >> lane) & 1) table[m] |= lane << (8 * to++);
    }
  }
  return table;
}

alignas(64) constexpr PermutationTable kExpand = MakeExpandTable();
alignas(64) constexpr PermutationTable kCompress = MakeCompressTable();

UZ_AVX2 inline __m256i Permutation(const PermutationTable& table, uint32_t mask) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(&table[mask])));
}

UZ_AVX2 inline uint32_t LaneMask(__m256i condition) {
  return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_castsi256_ps(condition)));
}

// The high 32 bits of each lane's 64-bit product.
UZ_AVX2 inline __m256i MulHi(__m256i a, __m256i b) {
  const __m256i even = _mm256_srli_epi64(_mm256_mul_epu32(a, b), 32);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));
  return _mm256_blend_epi32(even, odd, 0xAA);
}

// renorm_limit == freq << kLimitShift.
constexpr int kLimitShift = 19;
static_assert(((kStateLow >> kProbBits) << 16) == 1u << kLimitShift);

// Codes the eight lanes of `x` with the eight symbols at `symbols` (EncodeLaneStep, eight at once).
UZ_AVX2 inline __m256i EncodeVector(__m256i x, const uint8_t* symbols, const EncoderTable& table, uint16_t*& out) {
  const __m256i low16 = _mm256_set1_epi32(0xFFFF);
  const __m256i symbol = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(symbols)));
  const __m256i reciprocal = _mm256_i32gather_epi32(reinterpret_cast<const int*>(table.reciprocal.data()), symbol, 4);
  const __m256i packed = _mm256_i32gather_epi32(reinterpret_cast<const int*>(table.packed.data()), symbol, 4);
  const __m256i bias = _mm256_and_si256(packed, _mm256_set1_epi32((1 << EncoderTable::kFreqShift) - 1));
  const __m256i freq =
      _mm256_and_si256(_mm256_srli_epi32(packed, EncoderTable::kFreqShift), _mm256_set1_epi32(kProbScale - 1));
  const __m256i shift = _mm256_srli_epi32(packed, EncoderTable::kShiftShift);
  // x >= freq << 19: states and limits are below 2^31, so the signed comparison is the unsigned one.
  const __m256i limit = _mm256_slli_epi32(freq, kLimitShift);
  const __m256i emit = _mm256_cmpgt_epi32(x, _mm256_sub_epi32(limit, _mm256_set1_epi32(1)));
  const uint32_t mask = LaneMask(emit);
  const __m256i words = _mm256_permutevar8x32_epi32(_mm256_and_si256(x, low16), Permutation(kCompress, mask));
  const __m256i words16 = _mm256_permute4x64_epi64(_mm256_packus_epi32(words, words), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out - kVectorLanes), _mm256_castsi256_si128(words16));
  out -= std::popcount(mask);
  x = _mm256_blendv_epi8(x, _mm256_srli_epi32(x, 16), emit);
  const __m256i q = _mm256_srlv_epi32(MulHi(x, reciprocal), shift);
  const __m256i complement = _mm256_sub_epi32(_mm256_set1_epi32(kProbScale), freq);
  return _mm256_add_epi32(_mm256_add_epi32(x, bias), _mm256_mullo_epi32(q, complement));
}

UZ_AVX2 uint16_t* EncodeAvx2(const uint8_t* symbols, uint32_t n, const EncoderTable& table, uint32_t* state,
                             uint16_t* words_end) {
  uint16_t* out = words_end;
  const uint32_t full_steps = n / kLanes;
  for (uint32_t e = n; e-- > full_steps * kLanes;) EncodeLaneStep(state[e % kLanes], table.symbols[symbols[e]], out);
  __m256i x[kVectorsPerStep];
  for (uint32_t v = 0; v < kVectorsPerStep; ++v) {
    x[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state + v * kVectorLanes));
  }
  for (uint32_t k = full_steps; k-- > 0;) {
    // Lanes in descending order: the highest eight first, as their words go above the others'.
    for (uint32_t v = kVectorsPerStep; v-- > 0;) {
      x[v] = EncodeVector(x[v], symbols + k * kLanes + v * kVectorLanes, table, out);
    }
  }
  for (uint32_t v = 0; v < kVectorsPerStep; ++v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(state + v * kVectorLanes), x[v]);
  }
  return out;
}

// Decodes the eight lanes of `x` (DecodeLaneStepChecked without the check, eight at once); the
// caller guarantees eight readable words at `words`. Returns the entries, whose low bytes are
// the symbols.
UZ_AVX2 inline __m256i DecodeVector(__m256i& x, const int* slots, const uint8_t* words, uint64_t& next) {
  const __m256i slot_mask = _mm256_set1_epi32(kProbScale - 1);
  const __m256i entry = _mm256_i32gather_epi32(slots, _mm256_and_si256(x, slot_mask), 4);
  const __m256i freq = _mm256_and_si256(_mm256_srli_epi32(entry, 8), slot_mask);
  const __m256i decoded =
      _mm256_add_epi32(_mm256_mullo_epi32(freq, _mm256_srli_epi32(x, kProbBits)), _mm256_srli_epi32(entry, 20));
  const __m256i refill = _mm256_cmpgt_epi32(_mm256_set1_epi32(kStateLow), decoded);
  const uint32_t mask = LaneMask(refill);
  const __m256i loaded = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(words + 2 * next)));
  const __m256i word = _mm256_permutevar8x32_epi32(loaded, Permutation(kExpand, mask));
  x = _mm256_blendv_epi8(decoded, _mm256_or_si256(_mm256_slli_epi32(decoded, 16), word), refill);
  next += std::popcount(mask);
  return entry;
}

// A chunk in the middle of decoding: its lanes' states in four registers, its words, and the
// next step.
struct VectorChunk {
  __m256i x[kVectorsPerStep];
  const uint8_t* words;
  uint64_t available;
  uint64_t next;
  uint32_t step;
};

UZ_AVX2 inline VectorChunk StartChunk(const uint32_t* state, uint64_t first_word, const ChunkToDecode& chunk) {
  VectorChunk c;
  for (uint32_t v = 0; v < kVectorsPerStep; ++v) {
    c.x[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state + v * kVectorLanes));
  }
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

UZ_AVX2 inline void DecodeFastStep(VectorChunk& c, const int* slots, uint8_t* symbols) {
  const __m256i low8 = _mm256_set1_epi32(0xFF);
  __m256i entry[kVectorsPerStep];
  for (uint32_t v = 0; v < kVectorsPerStep; ++v) {
    entry[v] = _mm256_and_si256(DecodeVector(c.x[v], slots, c.words, c.next), low8);
  }
  const __m256i bytes =
      _mm256_packus_epi16(_mm256_packus_epi32(entry[0], entry[1]), _mm256_packus_epi32(entry[2], entry[3]));
  // Bytes 0-3 of each register's symbols lie in the first half, 4-7 in the second.
  const __m256i interleave = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(symbols + c.step * kLanes), _mm256_permutevar8x32_epi32(bytes, interleave));
  ++c.step;
}

UZ_AVX2 inline DecodeError FinishChunk(VectorChunk& c, const uint32_t* slots, const ChunkToDecode& chunk) {
  while (HasFastStep(c, chunk)) DecodeFastStep(c, reinterpret_cast<const int*>(slots), chunk.symbols);
  uint32_t state[kLanes];
  for (uint32_t v = 0; v < kVectorsPerStep; ++v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(state + v * kVectorLanes), c.x[v]);
  }
  return FinishChunkChecked(state, slots, c.words, c.available, c.next, c.step, chunk);
}

UZ_AVX2 DecodeError DecodeAvx2(const uint32_t* slots, const ChunkToDecode& chunk) {
  uint32_t state[kLanes];
  uint64_t first_word = 0;
  if (DecodeError e = ReadChunkStates(chunk.bytes, chunk.size, state, first_word); e != DecodeError::kOk) return e;
  VectorChunk c = StartChunk(state, first_word, chunk);
  return FinishChunk(c, slots, chunk);
}

UZ_AVX2 void DecodeTwoAvx2(const uint32_t* slots, const ChunkToDecode& a, const ChunkToDecode& b,
                           DecodeError& a_result, DecodeError& b_result) {
  uint32_t a_state[kLanes], b_state[kLanes];
  uint64_t a_first = 0, b_first = 0;
  a_result = ReadChunkStates(a.bytes, a.size, a_state, a_first);
  b_result = ReadChunkStates(b.bytes, b.size, b_state, b_first);
  if (a_result != DecodeError::kOk || b_result != DecodeError::kOk) {
    if (a_result == DecodeError::kOk) a_result = DecodeAvx2(slots, a);
    if (b_result == DecodeError::kOk) b_result = DecodeAvx2(slots, b);
    return;
  }
  VectorChunk ca = StartChunk(a_state, a_first, a), cb = StartChunk(b_state, b_first, b);
  const int* table = reinterpret_cast<const int*>(slots);
  while (HasFastStep(ca, a) && HasFastStep(cb, b)) {
    DecodeFastStep(ca, table, a.symbols);
    DecodeFastStep(cb, table, b.symbols);
  }
  a_result = FinishChunk(ca, slots, a);
  b_result = FinishChunk(cb, slots, b);
}

}  // namespace

const ChunkCoder* Avx2ChunkCoder() {
  static constexpr ChunkCoder kCoder{EncodeAvx2, DecodeAvx2, DecodeTwoAvx2};
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
  }();
  return supported ? &kCoder : nullptr;
}

}  // namespace ucclzip::codec

#else

namespace ucclzip::codec {

const ChunkCoder* Avx2ChunkCoder() { return nullptr; }

}  // namespace ucclzip::codec

#endif
