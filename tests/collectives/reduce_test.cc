// The reduction arithmetic: bf16, fp16 and fp8 combine in fp32 and round once to nearest even
// (compared with the test data generator's own rounding), NaN results are canonical, e4m3
// saturates, integers wrap and avg truncates; the device kernel gives the same bits as the CPU
// for every type, operator and kind of value (skipped without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codec/reduce_math.h"
#include "gpu_test.h"
#include "pipeline/reduce.h"
#include "tensor_gen.h"
#include "ucclzip/reduction.h"

namespace ucclzip::pipeline {
namespace {

namespace reduce = codec::reduce;
using testing::DistKind;
using testing::GenerateTensor;

float Widen(DataType dtype, const uint8_t* bits) {
  // Two bytes only for the 2-byte types: an fp8 tensor's last element has none after it
  // (ASan: a read one byte past the buffer).
  auto half = [bits] {
    uint16_t h;
    std::memcpy(&h, bits, 2);
    return h;
  };
  switch (dtype) {
    case DataType::kBFloat16: return reduce::Bf16ToFloat(half());
    case DataType::kFloat16: return reduce::MinifloatToFloat<5, 10, true>(half());
    case DataType::kFloat8E4M3: return reduce::MinifloatToFloat<4, 3, false>(*bits);
    default: return reduce::MinifloatToFloat<5, 2, true>(*bits);
  }
}

uint32_t Narrow(DataType dtype, float value) {
  switch (dtype) {
    case DataType::kBFloat16: return testing::FloatToBf16(value);
    case DataType::kFloat16: return testing::FloatToFp16(value);
    case DataType::kFloat8E4M3: return testing::FloatToFp8E4M3(value);
    default: return testing::FloatToFp8E5M2(value);
  }
}

// The value of a minifloat's bit pattern from its fields, in double (exact): the oracle for the
// branch-free widening; NaN where the type has one there.
double MinifloatValue(uint32_t bits, int exp_bits, int man_bits, bool has_inf) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const uint32_t exp_mask = (1u << exp_bits) - 1, man_mask = (1u << man_bits) - 1;
  const bool negative = (bits >> (exp_bits + man_bits)) & 1;
  const uint32_t exponent = (bits >> man_bits) & exp_mask, mantissa = bits & man_mask;
  double value;
  if (exponent == exp_mask && (has_inf || mantissa == man_mask)) {
    value = has_inf && mantissa == 0 ? INFINITY : NAN;
  } else if (exponent == 0) {
    value = std::ldexp(static_cast<double>(mantissa), 1 - bias - man_bits);
  } else {
    value = std::ldexp(static_cast<double>(mantissa | (1u << man_bits)), static_cast<int>(exponent) - bias - man_bits);
  }
  return negative ? -value : value;
}

// Every pattern of fp16 and both fp8s widens to its exact value (NaN to the quiet NaN with its
// sign), and fp32 narrows as the test data generator rounds: on every 251st fp32 pattern, and on
// each minifloat value, its neighbours one fp32 place away and the midpoints between values
// (where rounding to even decides).
template <int kExp, int kMan, bool kHasInf>
void CheckConversions(DataType dtype) {
  SCOPED_TRACE(DataTypeName(dtype));
  std::vector<float> probes;
  for (uint32_t bits = 0; bits < (1u << (1 + kExp + kMan)); ++bits) {
    const float widened = reduce::MinifloatToFloat<kExp, kMan, kHasInf>(bits);
    const double want = MinifloatValue(bits, kExp, kMan, kHasInf);
    if (std::isnan(want)) {
      const uint32_t sign = (bits >> (kExp + kMan)) << 31;
      ASSERT_EQ(reduce::FloatToBits(widened), 0x7FC00000u | sign) << bits;
      continue;
    }
    ASSERT_EQ(reduce::FloatToBits(widened), reduce::FloatToBits(static_cast<float>(want))) << bits;
    probes.insert(probes.end(), {widened, std::nextafter(widened, INFINITY), std::nextafter(widened, -INFINITY)});
    const float next = reduce::MinifloatToFloat<kExp, kMan, kHasInf>(bits + 1);
    if (std::isfinite(next) && std::signbit(next) == std::signbit(widened)) {
      probes.push_back(static_cast<float>((static_cast<double>(widened) + next) / 2));
    }
  }
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 251) probes.push_back(reduce::BitsToFloat(static_cast<uint32_t>(bits)));
  for (const float value : probes) {
    const uint32_t got = reduce::FloatToMinifloat<kExp, kMan, kHasInf>(value);
    if (std::isnan(value)) {
      ASSERT_TRUE(std::isnan(reduce::MinifloatToFloat<kExp, kMan, kHasInf>(got))) << value;
      ASSERT_EQ(got >> (kExp + kMan), 0u) << "NaN is positive";
      continue;
    }
    const uint32_t want = Narrow(dtype, value);
    // The generator rounds past the largest finite value into the patterns above it; overflow
    // is infinity (e4m3 saturates, which the generator does too).
    const auto widen = [](uint32_t fields) { return reduce::MinifloatToFloat<kExp, kMan, kHasInf>(fields); };
    if (!std::isfinite(widen(want))) {
      ASSERT_EQ(widen(got), std::copysign(INFINITY, value)) << std::hexfloat << value;
      continue;
    }
    ASSERT_EQ(got, want) << std::hexfloat << value;
  }
}

TEST(Reduce, MinifloatConversionsAreExactOnEveryPattern) {
  CheckConversions<5, 10, true>(DataType::kFloat16);
  CheckConversions<5, 2, true>(DataType::kFloat8E5M2);
  CheckConversions<4, 3, false>(DataType::kFloat8E4M3);
}

TEST(Reduce, NarrowTypesRoundOnceToNearestEvenLikeTheGenerator) {
  for (DataType dtype : {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat8E4M3, DataType::kFloat8E5M2}) {
    const size_t width = ElementSize(dtype);
    for (auto dist : {testing::Distribution{DistKind::kSpecialValues, 1}, testing::Distribution{DistKind::kGaussian, 300}}) {
      const uint64_t count = 20'000;
      std::vector<uint8_t> a = GenerateTensor(dtype, count, dist, 1), b = GenerateTensor(dtype, count, dist, 2);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
        std::vector<uint8_t> out(a.size());
        ReduceHost({dtype, op, op == ReduceOp::kAvg ? 3u : 1u}, a.data(), b.data(), out.data(), count);
        for (uint64_t i = 0; i < count; ++i) {
          const float x = Widen(dtype, &a[i * width]), y = Widen(dtype, &b[i * width]);
          // min takes -0 below +0 and max +0 above -0 (they compare equal).
          const float min = (y < x || (y == x && std::signbit(y))) ? y : x;
          const float max = (y > x || (y == x && !std::signbit(y))) ? y : x;
          float r = op == ReduceOp::kProd ? x * y : op == ReduceOp::kMin ? min : op == ReduceOp::kMax ? max : x + y;
          if (op == ReduceOp::kAvg) r /= 3;
          uint32_t got = 0;
          std::memcpy(&got, &out[i * width], width);
          if (std::isnan(x) || std::isnan(y) || std::isnan(r)) {
            EXPECT_TRUE(std::isnan(Widen(dtype, &out[i * width]))) << DataTypeName(dtype) << " element " << i;
            continue;
          }
          // Overflow is checked below: the generator's rounding is only meant for finite results.
          const float max_finite = dtype == DataType::kBFloat16   ? 3.3895314e38f
                                   : dtype == DataType::kFloat16  ? 65504.0f
                                   : dtype == DataType::kFloat8E4M3 ? 448.0f
                                                                  : 57344.0f;
          if (std::fabs(r) > max_finite) continue;
          ASSERT_EQ(got, Narrow(dtype, r)) << DataTypeName(dtype) << " " << ReduceOpName(op) << " " << x << " , " << y;
        }
      }
    }
  }
}

// A value of type T from its bits in `data` at element `i`.
template <typename T>
T Element(const std::vector<uint8_t>& data, uint64_t i) {
  T value;
  std::memcpy(&value, &data[i * sizeof(T)], sizeof(T));
  return value;
}

// `x op y` (then / divisor) by the header's rules, for fp32 and fp64 in their own type: NaN if
// either is, min and max ordering -0 below +0, any NaN result the canonical quiet NaN.
template <typename T>
T ExpectedFloat(ReduceOp op, T x, T y, uint32_t divisor) {
  T r;
  if (std::isnan(x) || std::isnan(y)) {
    r = std::numeric_limits<T>::quiet_NaN();
  } else if (op == ReduceOp::kMin || op == ReduceOp::kMax) {
    const bool x_first = x < y || (x == y && std::signbit(x));  // x is the minimum
    r = (op == ReduceOp::kMin) == x_first ? x : y;
  } else {
    r = op == ReduceOp::kProd ? x * y : x + y;
  }
  if (divisor != 1) r /= static_cast<T>(divisor);
  return std::isnan(r) ? std::numeric_limits<T>::quiet_NaN() : r;
}

// The same for an integer type: wrapping arithmetic, avg dividing the wrapped sum towards zero.
template <typename T>
T ExpectedInteger(ReduceOp op, T x, T y, uint32_t divisor) {
  using U = std::make_unsigned_t<T>;
  T r = op == ReduceOp::kMin    ? std::min(x, y)
        : op == ReduceOp::kMax  ? std::max(x, y)
        : op == ReduceOp::kProd ? static_cast<T>(static_cast<uint64_t>(static_cast<U>(x)) * static_cast<U>(y))
                                : static_cast<T>(static_cast<uint64_t>(static_cast<U>(x)) + static_cast<U>(y));
  if (divisor == 1) return r;
  if constexpr (std::is_signed_v<T>) return static_cast<T>(static_cast<int64_t>(r) / static_cast<int64_t>(divisor));
  return static_cast<T>(static_cast<uint64_t>(r) / divisor);
}

// The public ReduceOnHost on `a` and `b` against the operators above, element by element and bit
// for bit.
template <typename T>
void CheckWideType(DataType dtype, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, const std::string& what) {
  const uint64_t count = a.size() / sizeof(T);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
    const uint32_t divisor = op == ReduceOp::kAvg ? 3 : 1;
    std::vector<uint8_t> out(a.size());
    ASSERT_TRUE(ReduceOnHost(dtype, op, a.data(), b.data(), out.data(), count, divisor).ok());
    for (uint64_t i = 0; i < count; ++i) {
      const T x = Element<T>(a, i), y = Element<T>(b, i);
      T want;
      if constexpr (std::is_floating_point_v<T>) {
        want = ExpectedFloat(op, x, y, divisor);
      } else {
        want = ExpectedInteger(op, x, y, divisor);
      }
      const T got = Element<T>(out, i);
      ASSERT_EQ(std::memcmp(&got, &want, sizeof(T)), 0)
          << DataTypeName(dtype) << " " << ReduceOpName(op) << " " << what << " element " << i << ": " << +x << " , "
          << +y << " gave " << +got << ", not " << +want;
    }
  }
}

// fp32, fp64 and the integers round nothing, but their arithmetic is the oracle of every
// collective test (collective_reference.cc computes with ReduceOnHost), so it is checked here
// against the language's own operators: ordinary values, special ones and random bit patterns.
TEST(Reduce, WideTypesCombineInTheirOwnArithmetic) {
  const uint64_t count = 20'000;
  for (auto dist : {testing::Distribution{DistKind::kGaussian, 300}, testing::Distribution{DistKind::kSpecialValues, 1},
                    testing::Distribution{DistKind::kRandomBytes, 1}}) {
    const std::vector<uint8_t> a = GenerateTensor(DataType::kFloat32, count, dist, 11);
    const std::vector<uint8_t> b = GenerateTensor(DataType::kFloat32, count, dist, 12);
    CheckWideType<float>(DataType::kFloat32, a, b, dist.Name());
  }
  // fp64 has no generator but random bytes: Gaussians of several scales are made here.
  std::mt19937_64 rng(13);
  std::vector<uint8_t> gaussian(count * 8), other(count * 8);
  for (std::vector<uint8_t>* v : {&gaussian, &other}) {
    for (uint64_t i = 0; i < count; ++i) {
      const double value = std::normal_distribution<double>(0, i % 3 == 0 ? 1e-3 : i % 3 == 1 ? 1.0 : 1e6)(rng);
      std::memcpy(&(*v)[i * 8], &value, 8);
    }
  }
  CheckWideType<double>(DataType::kFloat64, gaussian, other, "gaussian");
  const testing::Distribution random{DistKind::kRandomBytes, 1};
  CheckWideType<double>(DataType::kFloat64, GenerateTensor(DataType::kFloat64, count, random, 14),
                        GenerateTensor(DataType::kFloat64, count, random, 15), random.Name());
  auto integers = [&](DataType dtype, auto zero) {
    using T = decltype(zero);
    CheckWideType<T>(dtype, GenerateTensor(dtype, count, random, 16), GenerateTensor(dtype, count, random, 17),
                     random.Name());
  };
  integers(DataType::kInt8, int8_t{0});
  integers(DataType::kUint8, uint8_t{0});
  integers(DataType::kInt32, int32_t{0});
  integers(DataType::kUint32, uint32_t{0});
  integers(DataType::kInt64, int64_t{0});
  integers(DataType::kUint64, uint64_t{0});
}

// The CPU loop built for AVX2 (where the CPU has it) gives the baseline build's bits: every type
// and operator, special values and ordinary ones, a count that leaves a vector's remainder.
TEST(Reduce, TheAvx2LoopGivesTheBaselinesBits) {
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "this CPU has no AVX2: only the baseline loop runs here";
  const uint64_t count = 10'007;
  for (uint8_t v = 0; IsValidDataType(v); ++v) {
    const auto dtype = static_cast<DataType>(v);
    for (auto dist : {testing::Distribution{DistKind::kSpecialValues, 1}, testing::Distribution{DistKind::kGaussian, 300},
                      testing::Distribution{DistKind::kRandomBytes, 1}}) {
      const std::vector<uint8_t> a = GenerateTensor(dtype, count, dist, 5), b = GenerateTensor(dtype, count, dist, 6);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
        const Combiner combiner{dtype, op, op == ReduceOp::kAvg ? 3u : 1u};
        std::vector<uint8_t> best(a.size()), baseline(a.size());
        ReduceHost(combiner, a.data(), b.data(), best.data(), count, HostLoop::kBest);
        ReduceHost(combiner, a.data(), b.data(), baseline.data(), count, HostLoop::kBaseline);
        ASSERT_EQ(best, baseline) << DataTypeName(dtype) << " " << ReduceOpName(op) << " " << dist.Name();
      }
    }
  }
}

// Two ranks that combine the same pair of partial results from opposite ends (recursive
// doubling) must get the same bits: every type and operator, swapped operands, special values
// (both zeros, NaN payloads, infinities) and random bit patterns.
TEST(Reduce, EveryOperatorGivesTheSameBitsWithItsOperandsSwapped) {
  const uint64_t count = 10'007;
  for (uint8_t v = 0; IsValidDataType(v); ++v) {
    const auto dtype = static_cast<DataType>(v);
    for (auto dist : {testing::Distribution{DistKind::kSpecialValues, 1}, testing::Distribution{DistKind::kRandomBytes, 1}}) {
      const std::vector<uint8_t> a = GenerateTensor(dtype, count, dist, 7), b = GenerateTensor(dtype, count, dist, 8);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
        const Combiner combiner{dtype, op, op == ReduceOp::kAvg ? 3u : 1u};
        std::vector<uint8_t> ab(a.size()), ba(a.size());
        ReduceHost(combiner, a.data(), b.data(), ab.data(), count);
        ReduceHost(combiner, b.data(), a.data(), ba.data(), count);
        ASSERT_EQ(ab, ba) << DataTypeName(dtype) << " " << ReduceOpName(op) << " " << dist.Name();
      }
    }
  }
  auto one = [](ReduceOp op, uint32_t a, uint32_t b) {
    uint32_t out = 0;
    ReduceHost({DataType::kFloat32, op, 1}, &a, &b, &out, 1);
    return out;
  };
  for (auto [a, b] : {std::pair{0x00000000u, 0x80000000u}, std::pair{0x80000000u, 0x00000000u}}) {
    EXPECT_EQ(one(ReduceOp::kMin, a, b), 0x80000000u);  // -0
    EXPECT_EQ(one(ReduceOp::kMax, a, b), 0x00000000u);  // +0
  }
}

// The public ReduceOnHost (ucclzip/reduction.h) on a tie of signed zeros: min gives -0 and max
// +0 whichever operand was received, as the header says (not "the received operand").
TEST(Reduce, PublicReduceOnHostOrdersSignedZerosWhicheverOperandIsReceived) {
  auto one = [](DataType dtype, ReduceOp op, uint32_t received, uint32_t local) {
    uint32_t out = 0;
    EXPECT_TRUE(ReduceOnHost(dtype, op, &received, &local, &out, 1).ok());
    return out;
  };
  for (auto [received, local] : {std::pair{0x00000000u, 0x80000000u}, std::pair{0x80000000u, 0x00000000u}}) {
    EXPECT_EQ(one(DataType::kFloat32, ReduceOp::kMin, received, local), 0x80000000u);
    EXPECT_EQ(one(DataType::kFloat32, ReduceOp::kMax, received, local), 0x00000000u);
  }
  for (auto [received, local] : {std::pair{0x0000u, 0x8000u}, std::pair{0x8000u, 0x0000u}}) {
    EXPECT_EQ(one(DataType::kBFloat16, ReduceOp::kMin, received, local) & 0xFFFF, 0x8000u);
    EXPECT_EQ(one(DataType::kBFloat16, ReduceOp::kMax, received, local) & 0xFFFF, 0x0000u);
  }
}

TEST(Reduce, CanonicalNaNSaturationWrappingAndTruncation) {
  auto one = [](DataType dtype, ReduceOp op, uint64_t a, uint64_t b, uint32_t divisor = 1) {
    uint64_t out = 0;
    ReduceHost({dtype, op, divisor}, &a, &b, &out, 1);
    return out;
  };
  EXPECT_EQ(one(DataType::kFloat32, ReduceOp::kSum, 0x7F800000u, 0xFF800000u), 0x7FC00000u);  // inf - inf
  EXPECT_EQ(one(DataType::kFloat32, ReduceOp::kMax, 0xFFC12345u, 0x3F800000u), 0x7FC00000u);  // NaN payload dropped
  EXPECT_EQ(one(DataType::kBFloat16, ReduceOp::kMin, 0x3F80, 0xFFC1), 0x7FC0u);
  EXPECT_EQ(one(DataType::kFloat16, ReduceOp::kSum, 0x7BFF, 0x7BFF), 0x7C00u);      // 65504 + 65504 = inf
  EXPECT_EQ(one(DataType::kFloat8E4M3, ReduceOp::kSum, 0x7E, 0x7E), 0x7Eu);         // 448 + 448 saturates
  EXPECT_EQ(one(DataType::kFloat8E5M2, ReduceOp::kSum, 0x7B, 0x7B), 0x7Cu);         // overflows to inf
  EXPECT_EQ(one(DataType::kFloat64, ReduceOp::kProd, 0x7FF0000000000000ull, 0), 0x7FF8000000000000ull);
  EXPECT_EQ(one(DataType::kInt32, ReduceOp::kSum, 0x7FFFFFFF, 1), 0x80000000u);
  EXPECT_EQ(one(DataType::kUint8, ReduceOp::kProd, 200, 3), uint64_t{(200 * 3) & 0xFF});
  EXPECT_EQ(static_cast<int64_t>(one(DataType::kInt64, ReduceOp::kAvg, uint64_t(-7), uint64_t(-1), 3)), -2);  // -8/3
  EXPECT_EQ(one(DataType::kUint8, ReduceOp::kAvg, 250, 9, 4096), 0u);  // a divisor wider than the type
}

TEST(Reduce, DeviceGivesTheHostsBits) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  for (uint8_t v = 0; IsValidDataType(v); ++v) {
    const auto dtype = static_cast<DataType>(v);
    const uint64_t count = 300'001;
    for (auto dist : {testing::Distribution{DistKind::kSpecialValues, 1}, testing::Distribution{DistKind::kGaussian, 1}}) {
      const std::vector<uint8_t> a = GenerateTensor(dtype, count, dist, 3), b = GenerateTensor(dtype, count, dist, 4);
      void *da, *db, *dout;
      UCCLZIP_CUDA_OK(cudaMalloc(&da, a.size() + 1));
      UCCLZIP_CUDA_OK(cudaMalloc(&db, a.size() + 1));
      UCCLZIP_CUDA_OK(cudaMalloc(&dout, a.size() + 1));
      // Unaligned by a byte, as user buffers may be.
      auto* a1 = static_cast<uint8_t*>(da) + 1;
      auto* b1 = static_cast<uint8_t*>(db) + 1;
      auto* o1 = static_cast<uint8_t*>(dout) + 1;
      UCCLZIP_CUDA_OK(cudaMemcpy(a1, a.data(), a.size(), cudaMemcpyHostToDevice));
      UCCLZIP_CUDA_OK(cudaMemcpy(b1, b.data(), b.size(), cudaMemcpyHostToDevice));
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
        const Combiner combiner{dtype, op, op == ReduceOp::kAvg ? 7u : 1u};
        std::vector<uint8_t> want(a.size()), got(a.size());
        ReduceHost(combiner, a.data(), b.data(), want.data(), count);
        ASSERT_TRUE(ReduceDevice(combiner, a1, b1, o1, count, nullptr).ok());
        UCCLZIP_CUDA_OK(cudaMemcpy(got.data(), o1, got.size(), cudaMemcpyDeviceToHost));
        ASSERT_EQ(got, want) << DataTypeName(dtype) << " " << ReduceOpName(op) << " " << dist.Name();
      }
      cudaFree(da);
      cudaFree(db);
      cudaFree(dout);
    }
  }
}

}  // namespace
}  // namespace ucclzip::pipeline
