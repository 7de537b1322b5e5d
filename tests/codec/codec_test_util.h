// Helpers shared by the codec tests: the types and distributions every round trip covers, and
// what they ask of a frame.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "codec/frame_checks.h"
#include "codec/frame_format.h"
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

// Stores `value` as one element of a compressible type.
inline void StoreFloat(DataType dtype, float value, uint8_t* element) {
  switch (dtype) {
    case DataType::kBFloat16: { const uint16_t b = FloatToBf16(value); std::memcpy(element, &b, 2); break; }
    case DataType::kFloat16: { const uint16_t b = FloatToFp16(value); std::memcpy(element, &b, 2); break; }
    case DataType::kFloat32: { const auto b = std::bit_cast<uint32_t>(value); std::memcpy(element, &b, 4); break; }
    case DataType::kFloat8E4M3: *element = FloatToFp8E4M3(value); break;
    case DataType::kFloat8E5M2: *element = FloatToFp8E5M2(value); break;
    default: break;
  }
}

// A tensor whose statistics change along it, as a checkpoint's tensors laid end to end do:
// blocks of `block` elements cycling through Gaussians of sigma 0.002, 0.02, 0.2 and 1, a
// layer-norm-like block of values near 1.0, then the `extra` distributions.
inline std::vector<uint8_t> MixedScaleTensor(DataType dtype, uint64_t count, uint64_t block, uint64_t seed,
                                             const std::vector<Distribution>& extra = {}) {
  static const std::vector<Distribution> gaussians = {{DistKind::kGaussian, 0.002}, {DistKind::kGaussian, 0.02},
                                                      {DistKind::kGaussian, 0.2}, {DistKind::kGaussian, 1.0}};
  const uint64_t kinds = gaussians.size() + 1 + extra.size();
  const size_t width = ElementSize(dtype);
  std::vector<uint8_t> tensor(count * width);
  for (uint64_t first = 0, k = 0; first < count; first += block, ++k) {
    const uint64_t n = std::min(block, count - first);
    const uint64_t kind = k % kinds;
    if (kind == gaussians.size()) {  // layer-norm weights: 1 + N(0, 0.05)
      std::mt19937_64 rng(seed + k);
      std::normal_distribution<float> near_one(1.0f, 0.05f);
      for (uint64_t i = 0; i < n; ++i) StoreFloat(dtype, near_one(rng), &tensor[(first + i) * width]);
      continue;
    }
    const Distribution& dist = kind < gaussians.size() ? gaussians[kind] : extra[kind - gaussians.size() - 1];
    const std::vector<uint8_t> part = GenerateTensor(dtype, n, dist, seed + k);
    std::memcpy(&tensor[first * width], part.data(), part.size());
  }
  return tensor;
}

// Tiles of a sound frame that code with a table of their own (0 unless the frame is rANS-coded).
inline uint32_t TilesWithOwnTables(const std::vector<uint8_t>& frame) {
  const absl::StatusOr<FrameInfo> info = ReadFrameInfo(frame.data(), frame.size());
  EXPECT_TRUE(info.ok()) << info.status();
  if (!info.ok() || info->mode != FrameMode::kSplitRans) return 0;
  const codec::Layout layout = codec::ComputeLayout(ElementSize(info->dtype), true, info->count, info->lane_symbols);
  uint32_t own = 0;
  for (uint32_t t = 0; t < layout.num_tiles; ++t) {
    own += codec::TileEntry(frame.data(), layout, t) != codec::kGlobalTableTile;
  }
  return own;
}

}  // namespace ucclzip::testing
