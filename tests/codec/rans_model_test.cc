// The coder's arithmetic: the reciprocal division is exact, the fixed-point log2 is a lower
// bound, and the normalised table always sums to 2^12.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "codec/rans_model.h"

namespace ucclzip::codec {
namespace {

TEST(RansModel, EncodeStepEqualsTheDivisionFormula) {
  std::mt19937 rng(1);
  for (uint32_t freq = 1; freq < kProbScale; ++freq) {
    const uint32_t start = rng() % (kProbScale - freq + 1);
    const EncoderSymbol sym = MakeEncoderSymbol(start, freq);
    // Every x the coder can meet: [2^15, renorm_limit), edges first.
    const uint32_t lo = kStateLow, hi = sym.renorm_limit;
    for (uint32_t i = 0; i < 600; ++i) {
      uint32_t x = i < 100 ? lo + i : i < 200 ? hi - (i - 99) : lo + rng() % (hi - lo);
      const uint32_t expected = (x / freq) * kProbScale + x % freq + start;
      ASSERT_EQ(EncodeStep(x, sym), expected) << "freq " << freq << " x " << x;
    }
  }
}

TEST(RansModel, DecodeStepInvertsEncodeStep) {
  for (uint32_t freq : {1u, 2u, 3u, 100u, 2047u, 4095u}) {
    const uint32_t start = kProbScale - freq;
    const EncoderSymbol sym = MakeEncoderSymbol(start, freq);
    for (uint32_t x = kStateLow; x < sym.renorm_limit; x += 997) {
      const uint32_t y = EncodeStep(x, sym);
      const uint32_t slot = y & (kProbScale - 1);
      ASSERT_EQ(DecodeStep(y, MakeDecoderEntry(7, freq, slot - start)), x);
    }
  }
}

TEST(RansModel, Log2FloorQ16IsATightLowerBound) {
  for (uint32_t v = 1; v < (1u << 16); ++v) {
    const double exact = std::log2(static_cast<double>(v)) * 65536.0;
    const uint32_t q = Log2FloorQ16(v);
    ASSERT_LE(q, exact + 1e-6) << v;
    ASSERT_GE(q + 2, exact) << v;
  }
}

TEST(RansModel, NormalisedFrequenciesSumToTheScale) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    uint64_t counts[256] = {}, total = 0;
    const uint32_t symbols = 2 + rng() % 255;
    for (uint32_t i = 0; i < symbols; ++i) {
      counts[rng() % 256] += 1 + (rng() % 4 == 0 ? rng() % 1000000 : rng() % 10);
    }
    uint32_t present = 0, most = 0;
    for (int s = 0; s < 256; ++s) {
      total += counts[s];
      present += counts[s] != 0;
      if (counts[s] > counts[most]) most = s;
    }
    uint32_t sum = 0;
    for (int s = 0; s < 256; ++s) {
      const uint32_t f = NormalizedFrequency(counts[s], total, present);
      EXPECT_EQ(f == 0, counts[s] == 0);
      sum += f;
    }
    ASSERT_LE(sum, kProbScale);
    ASSERT_GE(sum + present, kProbScale);  // the remainder given to the top symbol is small
    ASSERT_LE(NormalizedFrequency(counts[most], total, present) + kProbScale - sum, kProbScale - 1);
  }
}

}  // namespace
}  // namespace ucclzip::codec
