// Test and benchmark tensors: Gaussians of any sigma, heavy tails, uniform values, random bytes
// and IEEE special values, in every element type. Never all zeros.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ucclzip/types.h"

namespace ucclzip::testing {

enum class DistKind { kGaussian, kLaplace, kUniform, kStudentT3, kRandomBytes, kSpecialValues, kConstant };

struct Distribution {
  DistKind kind = DistKind::kGaussian;
  double param = 1.0;  // sigma, Laplace b, uniform half-width, t scale, or the constant
  std::string Name() const;
};

// Parses "gaussian:SIGMA", "laplace:B", "uniform:A", "student-t3:SCALE", "random-bytes",
// "special" or "constant:VALUE".
absl::StatusOr<Distribution> ParseDistribution(const std::string& text);

// `count` elements of `dtype`, little-endian, deterministic for a given seed (on any number of
// cores: tensors are made in chunks, each from its own generator).
std::vector<uint8_t> GenerateTensor(DataType dtype, uint64_t count, const Distribution& dist, uint64_t seed);

// Rounds a float to the nearest bf16/fp16/fp8 bit pattern (round-to-nearest-even; fp8 e4m3
// saturates to +-448 as the OCP spec's saturating conversion does).
uint16_t FloatToBf16(float value);
uint16_t FloatToFp16(float value);
uint8_t FloatToFp8E4M3(float value);
uint8_t FloatToFp8E5M2(float value);

}  // namespace ucclzip::testing
