// Helpers shared by the codec tests: the types and distributions every round trip covers.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor_gen.h"
#include "ucclzip/codec.h"
#include "ucclzip/types.h"

namespace ucclzip::testing {

inline const std::vector<DataType>& CompressibleTypes() {
  static const std::vector<DataType> types = {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32,
                                              DataType::kFloat8E4M3, DataType::kFloat8E5M2};
  return types;
}

inline const std::vector<Distribution>& TestDistributions() {
  static const std::vector<Distribution> dists = {
      {DistKind::kGaussian, 1.0},     {DistKind::kGaussian, 0.02},   {DistKind::kGaussian, 1e-4},
      {DistKind::kLaplace, 0.01},     {DistKind::kUniform, 1.0},     {DistKind::kStudentT3, 0.01},
      {DistKind::kRandomBytes, 0},    {DistKind::kSpecialValues, 0}, {DistKind::kConstant, 0.5}};
  return dists;
}

// Compresses on the CPU into a buffer of MaxFrameBytes, trimmed to the frame.
inline std::vector<uint8_t> CompressToVector(const std::vector<uint8_t>& tensor, DataType dtype,
                                             const CodecOptions& options = {}) {
  const uint64_t count = tensor.size() / ElementSize(dtype);
  std::vector<uint8_t> frame(MaxFrameBytes(dtype, count));
  auto size = CompressHost(tensor.data(), count, dtype, frame.data(), frame.size(), options);
  if (!size.ok()) return {};
  frame.resize(*size);
  return frame;
}

}  // namespace ucclzip::testing
