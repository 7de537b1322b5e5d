// The CPU codec's passes over elements: split into raw plane and symbols, count the symbols,
// and join them back. Each loop does one simple thing per element with no branch, so that the
// compiler vectorises it; the histogram runs over a block of symbols that is still in L1.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "codec/cpu_symbol_count.h"
#include "codec/dtype_split.h"
#include "codec/frame_format.h"

// A loop compiled twice, for the baseline (SSE2) and for AVX2, the CPU choosing at load time
// (an ifunc): with AVX2, fp32 (3-byte raw parts) compressed about 1.4x and decompressed 1.7x
// faster on one core (RESULTS.md, session 46). GCC only: clang (14, the fuzzer's) does not clone
// templates. Not under the sanitizers, which instrument the resolver that the loader runs before
// they are set up (ThreadSanitizer then crashes with eager binding).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define UZ_ALSO_FOR_AVX2 __attribute__((target_clones("avx2", "default")))
#else
#define UZ_ALSO_FOR_AVX2
#endif

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
UZ_ALSO_FOR_AVX2 void ExtractSymbols(const uint8_t* elements, uint64_t n, uint8_t* symbols) {
  for (uint64_t i = 0; i < n; ++i) symbols[i] = static_cast<uint8_t>(Split::Symbol(LoadBits<Split>(elements, i)));
}

// Writes the raw parts of n elements (raw_plane[i * kRawWidth ...], little-endian) and their
// symbols.
template <typename Split>
UZ_ALSO_FOR_AVX2 void SplitElements(const uint8_t* elements, uint64_t n, uint8_t* raw_plane, uint8_t* symbols) {
  for (uint64_t i = 0; i < n; ++i) {
    const auto v = LoadBits<Split>(elements, i);
    const uint32_t raw = Split::Raw(v);
    for (uint32_t b = 0; b < Split::kRawWidth; ++b) raw_plane[i * Split::kRawWidth + b] = static_cast<uint8_t>(raw >> (8 * b));
    symbols[i] = static_cast<uint8_t>(Split::Symbol(v));
  }
}

// Element i = Join(raw part i, symbols[i]), for i < n.
template <typename Split>
UZ_ALSO_FOR_AVX2 void JoinElements(const uint8_t* raw_plane, const uint8_t* symbols, uint64_t n, uint8_t* elements) {
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t raw = 0;
    for (uint32_t b = 0; b < Split::kRawWidth; ++b) raw |= uint32_t{raw_plane[i * Split::kRawWidth + b]} << (8 * b);
    const typename Split::Bits v = Split::Join(raw, symbols[i]);
    std::memcpy(elements + i * sizeof(v), &v, sizeof(v));
  }
}

// Counts symbols into a Histogram. Where a few symbols take nearly all (a tensor's exponents),
// a window's hot symbols are counted by SIMD compares (cpu_symbol_count.h); otherwise, and on
// CPUs without the instructions, by four interleaved tables of 32-bit counters, which keep
// consecutive equal symbols from waiting on one another's increment. The counters are added to
// the histogram every `flush_every` symbols, before they could overflow, and at the end. A null
// hot counter leaves every window to the tables (tests choose both, and the flush).
class SymbolCounter {
 public:
  static constexpr uint64_t kFlushEvery = uint64_t{1} << 31;

  explicit SymbolCounter(Histogram& histogram, HotSymbolCounter hot_counter = ChosenHotSymbolCounter(),
                         uint64_t flush_every = kFlushEvery)
      : histogram_(histogram),
        hot_counter_(hot_counter),
        flush_every_(std::clamp<uint64_t>(flush_every, 1, kFlushEvery)) {}
  ~SymbolCounter() { Flush(); }
  SymbolCounter(const SymbolCounter&) = delete;
  SymbolCounter& operator=(const SymbolCounter&) = delete;

  void Add(const uint8_t* symbols, uint64_t n) {
    while (n > 0) {
      if (window_left_ == 0) {
        const uint64_t sampled = StartWindow(symbols, n);
        symbols += sampled;
        n -= sampled;
        continue;
      }
      const uint64_t part = std::min({n, flush_every_ - pending_, window_left_, kHotPart});
      if (hot_.count != 0) {
        // A hot set gone stale (the data changed within the window) ends the window early: its
        // symbols would be counted one at a time.
        if (hot_counter_(symbols, part, hot_, counts_[0].data()) > part / 8) window_left_ = part;
      } else {
        AddToTables(symbols, part);
      }
      symbols += part;
      n -= part;
      window_left_ -= part;
      pending_ += part;
      if (pending_ == flush_every_) Flush();
    }
  }

 private:
  // Every window's first kSampleSymbols symbols choose its hot symbols; the hot counter takes at
  // most kHotPart symbols a call, so that a stale hot set is seen soon.
  static constexpr uint64_t kWindowSymbols = uint64_t{1} << 16;
  static constexpr uint64_t kSampleSymbols = 1024;
  static constexpr uint64_t kHotPart = 4096;

  // Counts the window's sample (at most n symbols) and chooses the hot symbols from it: the
  // fewest of its most frequent ones that leave at most 1/512 of it uncovered, if at most
  // kMaxHotSymbols do, else the kMaxHotSymbols most frequent if they leave at most 1/128. A cold
  // symbol costs about as much as a compare of every hot one with a whole vector (a mispredicted
  // branch), so that more symbols alike (fp16's exponent and top mantissa bits, random bytes)
  // are counted faster by the tables. Returns the symbols taken.
  uint64_t StartWindow(const uint8_t* symbols, uint64_t n) {
    const uint64_t sampled = std::min({n, kSampleSymbols, flush_every_ - pending_});
    std::array<uint32_t, kAlphabetSize> sample{};
    for (uint64_t i = 0; i < sampled; ++i) ++sample[symbols[i]];
    std::array<uint8_t, kAlphabetSize> order;
    for (uint32_t s = 0; s < kAlphabetSize; ++s) {
      order[s] = static_cast<uint8_t>(s);
      counts_[0][s] += sample[s];
    }
    std::partial_sort(order.begin(), order.begin() + kMaxHotSymbols, order.end(),
                      [&](uint8_t a, uint8_t b) { return sample[a] > sample[b]; });
    hot_.count = 0;
    uint64_t covered = 0;
    for (uint32_t k = 0; k < kMaxHotSymbols && covered + sampled / 512 < sampled; ++k) {
      hot_.symbols[k] = order[k];
      covered += sample[order[k]];
      hot_.count = k + 1;
    }
    if (hot_counter_ == nullptr || covered + sampled / 128 < sampled) hot_.count = 0;
    window_left_ = kWindowSymbols;
    pending_ += sampled;
    if (pending_ == flush_every_) Flush();
    return sampled;
  }

  void AddToTables(const uint8_t* symbols, uint64_t n) {
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
  const HotSymbolCounter hot_counter_;
  const uint64_t flush_every_;
  HotSymbols hot_;
  uint64_t window_left_ = 0;
};

}  // namespace ucclzip::codec
