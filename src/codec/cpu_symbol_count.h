// Counting symbols where a few of them take nearly all, as a tensor's exponents do: SIMD compares
// a vector of symbols with each hot symbol and counts the matches, and the symbols that match
// none are counted one at a time. Which symbols are hot decides only the speed; the counts are
// exact whatever they are.
#pragma once

#include <array>
#include <cstdint>

namespace ucclzip::codec {

inline constexpr uint32_t kMaxHotSymbols = 16;

struct HotSymbols {
  std::array<uint8_t, kMaxHotSymbols> symbols{};
  uint32_t count = 0;  // 1 to kMaxHotSymbols
};

// Adds to counts[s] how often s occurs among symbols[0, n), and returns how many of the n were
// not hot.
using HotSymbolCounter = uint64_t (*)(const uint8_t* symbols, uint64_t n, const HotSymbols& hot, uint32_t* counts);

// The AVX-512 counter where this CPU runs it, else the AVX2 one; null where it has neither.
HotSymbolCounter ChosenHotSymbolCounter();
// Each of them, or null where this CPU lacks its instructions.
HotSymbolCounter Avx512HotSymbolCounter();
HotSymbolCounter Avx2HotSymbolCounter();

}  // namespace ucclzip::codec
