#include "tensor_gen.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ucclzip::testing {
namespace {

uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

// Rounds |value| to a float with `man_bits` mantissa bits and exponents down to `min_exp`
// (subnormals below), then returns the target's exponent/mantissa fields, or ~0u on overflow.
uint32_t RoundToMinifloat(float magnitude, int exp_bits, int man_bits, int bias) {
  if (magnitude == 0) return 0;
  int exp;
  std::frexp(magnitude, &exp);  // magnitude = m * 2^exp, m in [0.5, 1)
  const int min_exp = 1 - bias;
  const int e = std::max(exp - 1, min_exp);
  const double step = std::ldexp(1.0, e - man_bits);
  const double units = std::nearbyint(magnitude / step);  // round-half-even (default mode)
  uint64_t q = static_cast<uint64_t>(units);
  int biased = (e == min_exp && q < (uint64_t{1} << man_bits)) ? 0 : e + bias;
  if (q >= (uint64_t{2} << man_bits)) {  // rounding carried into the next binade
    q >>= 1;
    ++biased;
  }
  if (biased >= (1 << exp_bits)) return ~0u;
  const uint32_t mantissa = static_cast<uint32_t>(q) & ((1u << man_bits) - 1);
  return (static_cast<uint32_t>(biased) << man_bits) | mantissa;
}

}  // namespace

uint16_t FloatToBf16(float value) {
  uint32_t bits = FloatBits(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // keep it a NaN
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t FloatToFp16(float value) {
  const uint16_t sign = (FloatBits(value) >> 16) & 0x8000;
  if (std::isnan(value)) return sign | 0x7E00;
  const uint32_t fields = std::isinf(value) ? ~0u : RoundToMinifloat(std::fabs(value), 5, 10, 15);
  return sign | (fields == ~0u ? 0x7C00 : static_cast<uint16_t>(fields));
}

uint8_t FloatToFp8E4M3(float value) {
  const uint8_t sign = (FloatBits(value) >> 24) & 0x80;
  if (std::isnan(value)) return sign | 0x7F;
  uint32_t fields = std::isinf(value) ? ~0u : RoundToMinifloat(std::fabs(value), 4, 3, 7);
  if (fields == ~0u || fields > 0x7E) fields = 0x7E;  // saturate at 448; 0x7F is NaN
  return sign | static_cast<uint8_t>(fields);
}

uint8_t FloatToFp8E5M2(float value) {
  const uint8_t sign = (FloatBits(value) >> 24) & 0x80;
  if (std::isnan(value)) return sign | 0x7E;
  const uint32_t fields = std::isinf(value) ? ~0u : RoundToMinifloat(std::fabs(value), 5, 2, 15);
  return sign | (fields == ~0u ? 0x7C : static_cast<uint8_t>(fields));
}

std::string Distribution::Name() const {
  switch (kind) {
    case DistKind::kGaussian: return absl::StrCat("gaussian:", param);
    case DistKind::kLaplace: return absl::StrCat("laplace:", param);
    case DistKind::kUniform: return absl::StrCat("uniform:", param);
    case DistKind::kStudentT3: return absl::StrCat("student-t3:", param);
    case DistKind::kRandomBytes: return "random-bytes";
    case DistKind::kSpecialValues: return "special";
    case DistKind::kConstant: return absl::StrCat("constant:", param);
  }
  return "?";
}

absl::StatusOr<Distribution> ParseDistribution(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  Distribution dist;
  if (name == "random-bytes" || name == "special") {
    dist.kind = name == "special" ? DistKind::kSpecialValues : DistKind::kRandomBytes;
    return dist;
  }
  const std::pair<const char*, DistKind> kinds[] = {{"gaussian", DistKind::kGaussian},
                                                    {"laplace", DistKind::kLaplace},
                                                    {"uniform", DistKind::kUniform},
                                                    {"student-t3", DistKind::kStudentT3},
                                                    {"constant", DistKind::kConstant}};
  for (const auto& [kind_name, kind] : kinds) {
    if (name != kind_name) continue;
    dist.kind = kind;
    if (colon == std::string::npos || !absl::SimpleAtod(text.substr(colon + 1), &dist.param) ||
        !(dist.param > 0 || kind == DistKind::kConstant)) {
      return absl::InvalidArgumentError(absl::StrCat("--dist ", text, ": expected ", kind_name, ":<positive number>"));
    }
    return dist;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown --dist '", text, "' (gaussian:S, laplace:B, uniform:A, student-t3:S, random-bytes, special, constant:V)"));
}

namespace {

// Tensors are made in chunks of this many elements, chunk k from its own generator (chunk 0 from
// `seed` itself, so that a tensor of up to one chunk is what one generator makes), on as many
// threads as there are cores: on one thread a benchmark's 256 MB inputs and the references'
// copies of every rank's took most of a case's time.
constexpr uint64_t kChunkElements = uint64_t{1} << 20;

uint64_t ChunkSeed(uint64_t seed, uint64_t chunk) { return seed + chunk * 0x9E3779B97F4A7C15ull; }

// Elements [first, first + count) of the tensor into `out` (its first element), from `rng`.
void GenerateChunk(DataType dtype, const Distribution& dist, std::mt19937_64& rng, uint8_t* out, uint64_t first,
                   uint64_t count) {
  const size_t width = ElementSize(dtype);
  if (dist.kind == DistKind::kRandomBytes || !IsCompressibleType(dtype)) {
    for (uint64_t b = first * width; b < (first + count) * width; ++b) out[b] = static_cast<uint8_t>(rng());
    return;
  }
  // A mix of every IEEE special case with ordinary values around them.
  const float kInf = std::numeric_limits<float>::infinity();
  const auto special = [&](uint64_t i) -> float {
    switch (rng() % 8) {
      case 0: return (i & 1) ? kInf : -kInf;
      case 1: return (i & 1) ? 0.0f : -0.0f;
      case 2: return std::numeric_limits<float>::denorm_min() * static_cast<float>(rng() % 1000);
      case 3: return std::ldexp(1.0f, -14 - static_cast<int>(rng() % 12));  // fp16/bf16 subnormal range
      case 4: return std::numeric_limits<float>::max();
      default: return static_cast<float>(std::normal_distribution<double>(0, 1)(rng));
    }
  };
  std::normal_distribution<double> gaussian(0.0, dist.param);
  std::exponential_distribution<double> exponential(1.0 / dist.param);
  std::uniform_real_distribution<double> uniform(-dist.param, dist.param);
  std::student_t_distribution<double> student(3.0);
  for (uint64_t i = first; i < first + count; ++i) {
    float v = 0;
    switch (dist.kind) {
      case DistKind::kGaussian: v = static_cast<float>(gaussian(rng)); break;
      case DistKind::kLaplace: v = static_cast<float>((rng() & 1 ? 1 : -1) * exponential(rng)); break;
      case DistKind::kUniform: v = static_cast<float>(uniform(rng)); break;
      case DistKind::kStudentT3: v = static_cast<float>(dist.param * student(rng)); break;
      case DistKind::kConstant: v = static_cast<float>(dist.param); break;
      case DistKind::kSpecialValues: v = special(i); break;
      case DistKind::kRandomBytes: break;
    }
    uint8_t* dst = out + i * width;
    switch (dtype) {
      case DataType::kBFloat16: { uint16_t b = FloatToBf16(v); std::memcpy(dst, &b, 2); break; }
      case DataType::kFloat16: { uint16_t b = FloatToFp16(v); std::memcpy(dst, &b, 2); break; }
      case DataType::kFloat32: { uint32_t b = FloatBits(v); std::memcpy(dst, &b, 4); break; }
      case DataType::kFloat8E4M3: *dst = FloatToFp8E4M3(v); break;
      case DataType::kFloat8E5M2: *dst = FloatToFp8E5M2(v); break;
      default: break;
    }
  }
  if (dist.kind == DistKind::kSpecialValues && dtype != DataType::kFloat8E4M3) {
    // NaNs with payloads: every exponent bit set, arbitrary non-zero mantissa and sign, at
    // every seventh element from the fourth on.
    for (uint64_t i = first + (10 - first % 7) % 7; i < first + count; i += 7) {
      uint8_t* dst = out + i * width;
      switch (dtype) {
        case DataType::kBFloat16: { uint16_t b = 0x7F80 | (1 + rng() % 0x7F) | (rng() & 0x8000); std::memcpy(dst, &b, 2); break; }
        case DataType::kFloat16: { uint16_t b = 0x7C00 | (1 + rng() % 0x3FF) | (rng() & 0x8000); std::memcpy(dst, &b, 2); break; }
        case DataType::kFloat32: { uint32_t b = 0x7F800000u | (1 + rng() % 0x7FFFFF) | (rng() & 0x80000000u); std::memcpy(dst, &b, 4); break; }
        case DataType::kFloat8E5M2: *dst = static_cast<uint8_t>(0x7C | (1 + rng() % 3) | (rng() & 0x80)); break;
        default: break;
      }
    }
  }
}

}  // namespace

std::vector<uint8_t> GenerateTensor(DataType dtype, uint64_t count, const Distribution& dist, uint64_t seed) {
  std::vector<uint8_t> out(count * ElementSize(dtype));
  const uint64_t chunks = (count + kChunkElements - 1) / kChunkElements;
  std::atomic<uint64_t> next{0};
  const auto generate = [&] {
    for (uint64_t k; (k = next.fetch_add(1)) < chunks;) {
      std::mt19937_64 rng(ChunkSeed(seed, k));
      const uint64_t first = k * kChunkElements;
      GenerateChunk(dtype, dist, rng, out.data(), first, std::min(kChunkElements, count - first));
    }
  };
  const uint64_t threads = std::min<uint64_t>(std::max(std::thread::hardware_concurrency(), 1u), chunks);
  std::vector<std::thread> helpers;
  for (uint64_t t = 1; t < threads; ++t) helpers.emplace_back(generate);
  generate();
  for (std::thread& helper : helpers) helper.join();
  return out;
}

}  // namespace ucclzip::testing
