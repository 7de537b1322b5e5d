// Empirical entropy of a tensor's exponent field and symbol byte: the bounds the benchmark
// compares the codec's ratio against.
#include <array>
#include <cmath>
#include <cstring>

#include "codec/dtype_dispatch.h"
#include "ucclzip/codec.h"

namespace ucclzip {
namespace {

double EntropyBits(const std::array<uint64_t, 256>& histogram, uint64_t total) {
  double bits = 0;
  for (uint64_t c : histogram) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / static_cast<double>(total);
    bits -= p * std::log2(p);
  }
  return bits;
}

}  // namespace

EntropyReport MeasureEntropy(const void* input, uint64_t count, DataType dtype) {
  EntropyReport report{};
  const double element_bits = 8.0 * ElementSize(dtype);
  report.bound_ratio = report.symbol_bound_ratio = 1.0;
  // It has no error to return: a null input (which it read through) is measured as empty.
  if (count == 0 || input == nullptr || !IsCompressibleType(dtype)) return report;
  const codec::ExponentField field = codec::ExponentFieldOf(dtype);
  std::array<uint64_t, 256> exponents{}, symbols{};
  codec::VisitSplit(
      dtype,
      [&]<typename Split>() {
        const auto* in = static_cast<const uint8_t*>(input);
        for (uint64_t i = 0; i < count; ++i) {
          typename Split::Bits v;
          std::memcpy(&v, in + i * sizeof(v), sizeof(v));
          ++symbols[Split::Symbol(v)];
          ++exponents[(v >> field.shift) & ((1u << field.bits) - 1)];
        }
        return 0;
      },
      [] { return 0; });
  report.exponent_bits = EntropyBits(exponents, count);
  report.symbol_bits = EntropyBits(symbols, count);
  report.bound_ratio = element_bits / (element_bits - field.bits + report.exponent_bits);
  report.symbol_bound_ratio = element_bits / (element_bits - 8 + report.symbol_bits);
  return report;
}

}  // namespace ucclzip
