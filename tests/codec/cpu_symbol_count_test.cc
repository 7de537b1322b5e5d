// Symbol counting: the SIMD hot-symbol counters (where this CPU has them) and SymbolCounter,
// which chooses among them and its tables window by window, count every symbol exactly, whatever
// the hot symbols, the data's shape, its changes and the sizes of the calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

// Symbols drawn evenly from [64, 64 + count): count alike, as fp16's exponent and top mantissa
// bits nearly are.
std::vector<uint8_t> Alike(uint64_t n, uint32_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> symbols(n);
  for (auto& s : symbols) s = static_cast<uint8_t>(64 + rng() % count);
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

// The hot counter SymbolCounter is given in the tests below: the one under test, recording how
// many symbols it was handed, so that a test sees which path counted.
HotSymbolCounter recorded_counter = nullptr;
uint64_t recorded_symbols = 0;
uint64_t RecordingCounter(const uint8_t* symbols, uint64_t n, const HotSymbols& hot, uint32_t* counts) {
  recorded_symbols += n;
  return recorded_counter(symbols, n, hot, counts);
}

// Adds `symbols` to a SymbolCounter in calls of the sizes `parts` cycles through, with `counter`
// for the hot symbols (null: the tables alone) and a flush every `flush_every` symbols. Sets
// `hot_symbols` to the symbols the hot counter took.
Histogram CountInParts(const std::vector<uint8_t>& symbols, const std::vector<uint64_t>& parts,
                       HotSymbolCounter counter, uint64_t flush_every, uint64_t& hot_symbols) {
  recorded_counter = counter;
  recorded_symbols = 0;
  Histogram histogram{};
  {
    SymbolCounter symbol_counter(histogram, counter == nullptr ? nullptr : RecordingCounter, flush_every);
    uint64_t at = 0;
    for (size_t i = 0; at < symbols.size(); ++i) {
      const uint64_t n = std::min<uint64_t>(parts[i % parts.size()], symbols.size() - at);
      symbol_counter.Add(symbols.data() + at, n);
      at += n;
    }
  }
  hot_symbols = recorded_symbols;
  return histogram;
}

TEST(SymbolCounter, CountsExactlyWhateverTheDataTheCallsTheCounterAndTheFlushes) {
  std::vector<std::pair<const char*, std::vector<uint8_t>>> inputs;
  inputs.emplace_back("Gaussian exponents", Exponents(300'000, 0.02f, 3));
  inputs.emplace_back("random bytes", RandomBytes(300'000, 4));
  inputs.emplace_back("one symbol", std::vector<uint8_t>(200'000, 77));
  inputs.emplace_back("64 symbols alike", Alike(200'000, 64, 5));  // more than the hot counter takes
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
  const std::vector<NamedCounter> counters = {
      {"AVX-512", Avx512HotSymbolCounter()}, {"AVX2", Avx2HotSymbolCounter()}, {"none: the tables", nullptr}};
  for (const NamedCounter& counter : counters) {
    if (counter.counter == nullptr && counter.name[0] == 'A') continue;  // this CPU lacks it
    for (uint64_t flush_every : {SymbolCounter::kFlushEvery, uint64_t{5'000}, uint64_t{1}}) {
      for (const auto& [name, symbols] : inputs) {
        for (const auto& parts : call_sizes) {
          SCOPED_TRACE(testing::Message() << name << ", calls of " << parts.front() << " symbols first, counter "
                                          << counter.name << ", flushed every " << flush_every);
          uint64_t hot = 0;
          EXPECT_EQ(CountInParts(symbols, parts, counter.counter, flush_every, hot), Naive(symbols));
        }
      }
    }
  }
}

// Which path counts: the hot counter nearly everything of a tensor's exponents, nothing of
// random bytes or of more symbols alike than it takes.
TEST(SymbolCounter, TakesTheHotCounterWhereAFewSymbolsTakeNearlyAll) {
  if (ChosenHotSymbolCounter() == nullptr) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2";
  const std::vector<uint8_t> exponents = Exponents(1'000'000, 0.02f, 6);
  uint64_t hot = 0;
  CountInParts(exponents, {4096}, ChosenHotSymbolCounter(), SymbolCounter::kFlushEvery, hot);
  EXPECT_GT(hot, exponents.size() * 9 / 10);
  for (const auto& symbols : {RandomBytes(300'000, 7), Alike(300'000, 64, 8)}) {
    CountInParts(symbols, {4096}, ChosenHotSymbolCounter(), SymbolCounter::kFlushEvery, hot);
    EXPECT_EQ(hot, 0u);
  }
}

}  // namespace
}  // namespace ucclzip::codec
