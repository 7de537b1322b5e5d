// Symbol counting: the SIMD hot-symbol counters (where this CPU has them) and SymbolCounter,
// which chooses among them and its tables window by window, count every symbol exactly, whatever
// the hot symbols, the data's shape, its changes and the sizes of the calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "codec/cpu_split_loops.h"
#include "codec/cpu_symbol_count.h"

namespace ucclzip::codec {
namespace {

Histogram Naive(const std::vector<uint8_t>& symbols) {
  Histogram histogram{};
  for (uint8_t s : symbols) ++histogram[s];
  return histogram;
}

// bf16 exponents of a Gaussian of standard deviation sigma: a dozen symbols take nearly all.
std::vector<uint8_t> Exponents(uint64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<uint8_t> symbols(n);
  for (auto& s : symbols) {
    const float v = normal(rng);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    s = static_cast<uint8_t>((bits >> 23) & 0xFF);
  }
  return symbols;
}

std::vector<uint8_t> RandomBytes(uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> symbols(n);
  for (auto& s : symbols) s = static_cast<uint8_t>(rng());
  return symbols;
}

struct NamedCounter {
  const char* name;
  HotSymbolCounter counter;
};

class HotSymbolCounterTest : public ::testing::TestWithParam<NamedCounter> {
 protected:
  void SetUp() override {
    if (GetParam().counter == nullptr) GTEST_SKIP() << "this CPU lacks the " << GetParam().name << " instructions";
  }
};

TEST_P(HotSymbolCounterTest, CountsEverySymbolAndReportsTheColdOnes) {
  const std::vector<uint8_t> exponents = Exponents(10'000, 0.02f, 1);
  const std::vector<uint8_t> random = RandomBytes(10'000, 2);
  for (const auto* data : {&exponents, &random}) {
    for (uint32_t hot_count : {1u, 5u, 12u, kMaxHotSymbols}) {
      for (uint64_t n : {0ull, 1ull, 31ull, 32ull, 63ull, 64ull, 65ull, 4095ull, 4096ull, 10'000ull}) {
        SCOPED_TRACE(testing::Message() << "hot " << hot_count << ", n " << n);
        const std::vector<uint8_t> symbols(data->begin(), data->begin() + n);
        HotSymbols hot;
        hot.count = hot_count;
        for (uint32_t k = 0; k < hot_count; ++k) hot.symbols[k] = static_cast<uint8_t>(120 + 3 * k);
        std::vector<uint32_t> counts(kAlphabetSize, 7);  // the counter adds to what is there
        const uint64_t cold = GetParam().counter(symbols.data(), n, hot, counts.data());
        const Histogram expected = Naive(symbols);
        for (uint32_t s = 0; s < kAlphabetSize; ++s) ASSERT_EQ(counts[s], expected[s] + 7) << "symbol " << s;
        // Cold: the symbols of whole vectors that are not hot (the tail is counted apart).
        const uint64_t vector = GetParam().counter == Avx512HotSymbolCounter() ? 64 : 32;
        const uint64_t whole = n - n % vector;
        const uint64_t expected_cold = static_cast<uint64_t>(std::count_if(
            symbols.begin(), symbols.begin() + whole, [&](uint8_t s) {
              return std::find(hot.symbols.begin(), hot.symbols.begin() + hot_count, s) ==
                     hot.symbols.begin() + hot_count;
            }));
        EXPECT_EQ(cold, expected_cold);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, HotSymbolCounterTest,
                         ::testing::Values(NamedCounter{"AVX-512", Avx512HotSymbolCounter()},
                                           NamedCounter{"AVX2", Avx2HotSymbolCounter()}),
                         [](const auto& info) { return info.index == 0 ? "Avx512" : "Avx2"; });

// Adds `symbols` to a SymbolCounter in calls of the sizes `parts` cycles through.
Histogram CountInParts(const std::vector<uint8_t>& symbols, const std::vector<uint64_t>& parts) {
  Histogram histogram{};
  {
    SymbolCounter counter(histogram);
    uint64_t at = 0;
    for (size_t i = 0; at < symbols.size(); ++i) {
      const uint64_t n = std::min<uint64_t>(parts[i % parts.size()], symbols.size() - at);
      counter.Add(symbols.data() + at, n);
      at += n;
    }
  }
  return histogram;
}

TEST(SymbolCounter, CountsExactlyWhateverTheDataAndTheCalls) {
  std::vector<std::pair<const char*, std::vector<uint8_t>>> inputs;
  inputs.emplace_back("Gaussian exponents", Exponents(300'000, 0.02f, 3));
  inputs.emplace_back("random bytes", RandomBytes(300'000, 4));
  inputs.emplace_back("one symbol", std::vector<uint8_t>(200'000, 77));
  // fp16-like: 64 symbols nearly alike, more than the hot counter takes.
  std::vector<uint8_t> spread = RandomBytes(200'000, 5);
  for (auto& s : spread) s = static_cast<uint8_t>(64 + s % 64);
  inputs.emplace_back("64 symbols alike", spread);
  // Tensors of other scales end to end, each shorter than a window: the sample's hot symbols go
  // stale within the window.
  std::vector<uint8_t> changing;
  for (uint32_t t = 0; t < 12; ++t) {
    const std::vector<uint8_t> part = t % 3 == 2 ? RandomBytes(9'000 + 1'000 * t, t)
                                                 : Exponents(9'000 + 1'000 * t, std::pow(10.0f, -4.0f + t % 5), t);
    changing.insert(changing.end(), part.begin(), part.end());
  }
  inputs.emplace_back("tensors of changing scale", changing);
  const std::vector<std::vector<uint64_t>> call_sizes = {{4096}, {1}, {1000, 1, 63, 5000}, {1 << 20}, {1023, 1025}};
  for (const auto& [name, symbols] : inputs) {
    for (const auto& parts : call_sizes) {
      SCOPED_TRACE(testing::Message() << name << ", calls of " << parts.front() << " symbols first");
      EXPECT_EQ(CountInParts(symbols, parts), Naive(symbols));
    }
  }
}

}  // namespace
}  // namespace ucclzip::codec
