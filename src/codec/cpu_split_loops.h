// The CPU codec's passes over elements: split into raw plane and symbols, count the symbols,
// and join them back. Each loop does one simple thing per element with no branch, so that the
// compiler vectorises it; the histogram runs over a block of symbols that is still in L1.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "codec/dtype_split.h"
#include "codec/frame_format.h"

namespace ucclzip::codec {

using Histogram = std::array<uint64_t, kAlphabetSize>;

template <typename Split>
typename Split::Bits LoadBits(const uint8_t* elements, uint64_t index) {
  typename Split::Bits value;
  std::memcpy(&value, elements + index * sizeof(value), sizeof(value));
  return value;
}

// symbols[i] = the symbol of element i, for i < n.
template <typename Split>
void ExtractSymbols(const uint8_t* elements, uint64_t n, uint8_t* symbols) {
  for (uint64_t i = 0; i < n; ++i) symbols[i] = static_cast<uint8_t>(Split::Symbol(LoadBits<Split>(elements, i)));
}

// Writes the raw parts of n elements (raw_plane[i * kRawWidth ...], little-endian) and their
// symbols.
template <typename Split>
void SplitElements(const uint8_t* elements, uint64_t n, uint8_t* raw_plane, uint8_t* symbols) {
  for (uint64_t i = 0; i < n; ++i) {
    const auto v = LoadBits<Split>(elements, i);
    const uint32_t raw = Split::Raw(v);
    for (uint32_t b = 0; b < Split::kRawWidth; ++b) raw_plane[i * Split::kRawWidth + b] = static_cast<uint8_t>(raw >> (8 * b));
    symbols[i] = static_cast<uint8_t>(Split::Symbol(v));
  }
}

// Element i = Join(raw part i, symbols[i]), for i < n.
template <typename Split>
void JoinElements(const uint8_t* raw_plane, const uint8_t* symbols, uint64_t n, uint8_t* elements) {
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t raw = 0;
    for (uint32_t b = 0; b < Split::kRawWidth; ++b) raw |= uint32_t{raw_plane[i * Split::kRawWidth + b]} << (8 * b);
    const typename Split::Bits v = Split::Join(raw, symbols[i]);
    std::memcpy(elements + i * sizeof(v), &v, sizeof(v));
  }
}

// Counts symbols into a Histogram. Four interleaved tables of 32-bit counters keep consecutive
// equal symbols (the common case: a few exponents dominate) from waiting on one another's
// increment; they are added to the histogram before they could overflow, and at the end.
class SymbolCounter {
 public:
  explicit SymbolCounter(Histogram& histogram) : histogram_(histogram) {}
  ~SymbolCounter() { Flush(); }
  SymbolCounter(const SymbolCounter&) = delete;
  SymbolCounter& operator=(const SymbolCounter&) = delete;

  void Add(const uint8_t* symbols, uint64_t n) {
    while (n > 0) {
      const uint64_t part = std::min<uint64_t>(n, kFlushEvery - pending_);
      AddPart(symbols, part);
      symbols += part;
      n -= part;
      pending_ += part;
      if (pending_ == kFlushEvery) Flush();
    }
  }

 private:
  static constexpr uint64_t kFlushEvery = uint64_t{1} << 31;

  void AddPart(const uint8_t* symbols, uint64_t n) {
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t eight;
      std::memcpy(&eight, symbols + i, 8);
      for (uint32_t j = 0; j < 8; ++j) ++counts_[j % 4][(eight >> (8 * j)) & 0xFF];
    }
    for (; i < n; ++i) ++counts_[0][symbols[i]];
  }

  void Flush() {
    for (uint32_t s = 0; s < kAlphabetSize; ++s) {
      histogram_[s] += uint64_t{counts_[0][s]} + counts_[1][s] + counts_[2][s] + counts_[3][s];
    }
    counts_ = {};
    pending_ = 0;
  }

  Histogram& histogram_;
  std::array<std::array<uint32_t, kAlphabetSize>, 4> counts_{};
  uint64_t pending_ = 0;
};

}  // namespace ucclzip::codec
