// The hot-symbol counters for AVX-512 (64 symbols a vector, each comparison a mask whose bits
// are counted) and AVX2 (32 symbols, the comparison's byte mask moved to a register). Compiled
// for their instructions function by function, so that the library still runs on CPUs without
// them (the counter is chosen after asking the CPU).
#include "codec/cpu_symbol_count.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <bit>

#define UZ_AVX2 __attribute__((target("avx2,popcnt,bmi")))
#define UZ_AVX512 __attribute__((target("avx512f,avx512bw,popcnt,bmi")))

namespace ucclzip::codec {
namespace {

// The vector's symbols whose bit in `cold` is set, one at a time.
inline void CountCold(const uint8_t* vector, uint64_t cold, uint32_t* counts) {
  for (; cold != 0; cold &= cold - 1) ++counts[vector[std::countr_zero(cold)]];
}

// Adds the hot symbols' matches and the tail's symbols, and returns the cold count.
inline uint64_t Finish(const uint8_t* symbols, uint64_t done, uint64_t n, const HotSymbols& hot,
                       const uint64_t (&matches)[kMaxHotSymbols], uint32_t* counts) {
  uint64_t hot_total = 0;
  for (uint32_t k = 0; k < hot.count; ++k) {
    counts[hot.symbols[k]] += static_cast<uint32_t>(matches[k]);
    hot_total += matches[k];
  }
  for (uint64_t i = done; i < n; ++i) ++counts[symbols[i]];
  return done - hot_total;  // the tail's symbols are not counted as cold: they are few
}

UZ_AVX512 uint64_t CountHotAvx512(const uint8_t* symbols, uint64_t n, const HotSymbols& hot, uint32_t* counts) {
  __m512i wanted[kMaxHotSymbols];
  for (uint32_t k = 0; k < hot.count; ++k) wanted[k] = _mm512_set1_epi8(static_cast<char>(hot.symbols[k]));
  uint64_t matches[kMaxHotSymbols] = {};
  uint64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i v = _mm512_loadu_si512(symbols + i);
    uint64_t any = 0;
#pragma GCC unroll 16
    for (uint32_t k = 0; k < kMaxHotSymbols; ++k) {
      if (k == hot.count) break;
      const uint64_t match = _mm512_cmpeq_epi8_mask(v, wanted[k]);
      matches[k] += std::popcount(match);
      any |= match;
    }
    CountCold(symbols + i, ~any, counts);
  }
  return Finish(symbols, i, n, hot, matches, counts);
}

UZ_AVX2 uint64_t CountHotAvx2(const uint8_t* symbols, uint64_t n, const HotSymbols& hot, uint32_t* counts) {
  __m256i wanted[kMaxHotSymbols];
  for (uint32_t k = 0; k < hot.count; ++k) wanted[k] = _mm256_set1_epi8(static_cast<char>(hot.symbols[k]));
  uint64_t matches[kMaxHotSymbols] = {};
  uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(symbols + i));
    uint32_t any = 0;
#pragma GCC unroll 16
    for (uint32_t k = 0; k < kMaxHotSymbols; ++k) {
      if (k == hot.count) break;
      const auto match = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, wanted[k])));
      matches[k] += std::popcount(match);
      any |= match;
    }
    CountCold(symbols + i, uint32_t{~any}, counts);
  }
  return Finish(symbols, i, n, hot, matches, counts);
}

bool CpuSupports(bool avx512) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi");
  return avx512 ? avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") : avx2;
}

}  // namespace

HotSymbolCounter Avx512HotSymbolCounter() {
  static const bool supported = CpuSupports(true);
  return supported ? CountHotAvx512 : nullptr;
}

HotSymbolCounter Avx2HotSymbolCounter() {
  static const bool supported = CpuSupports(false);
  return supported ? CountHotAvx2 : nullptr;
}

}  // namespace ucclzip::codec

#else

namespace ucclzip::codec {

HotSymbolCounter Avx512HotSymbolCounter() { return nullptr; }
HotSymbolCounter Avx2HotSymbolCounter() { return nullptr; }

}  // namespace ucclzip::codec

#endif

namespace ucclzip::codec {

HotSymbolCounter ChosenHotSymbolCounter() {
  static const HotSymbolCounter chosen =
      Avx512HotSymbolCounter() != nullptr ? Avx512HotSymbolCounter() : Avx2HotSymbolCounter();
  return chosen;
}

}  // namespace ucclzip::codec
