// Maps a DataType to its split traits (dtype_split.h), for code templated on them.
#pragma once

#include <type_traits>

#include "codec/dtype_split.h"
#include "ucclzip/types.h"

namespace ucclzip::codec {

// Calls visitor.template operator()<Split>() with the split traits of a compressible type and
// returns its result; `fallback()` for every other type.
template <typename Visitor, typename Fallback>
auto VisitSplit(DataType dtype, Visitor&& visitor, Fallback&& fallback) {
  switch (dtype) {
    case DataType::kBFloat16:
    case DataType::kFloat16: return visitor.template operator()<Split16>();
    case DataType::kFloat32: return visitor.template operator()<Split32>();
    case DataType::kFloat8E4M3:
    case DataType::kFloat8E5M2: return visitor.template operator()<Split8>();
    default: return fallback();
  }
}

// Calls visitor.template operator()<kType>() with a compressible type as a template argument
// and returns its result; `fallback()` for every other type.
template <typename Visitor, typename Fallback>
auto VisitCompressibleType(DataType dtype, Visitor&& visitor, Fallback&& fallback) {
  switch (dtype) {
    case DataType::kBFloat16: return visitor.template operator()<DataType::kBFloat16>();
    case DataType::kFloat16: return visitor.template operator()<DataType::kFloat16>();
    case DataType::kFloat32: return visitor.template operator()<DataType::kFloat32>();
    case DataType::kFloat8E4M3: return visitor.template operator()<DataType::kFloat8E4M3>();
    case DataType::kFloat8E5M2: return visitor.template operator()<DataType::kFloat8E5M2>();
    default: return fallback();
  }
}

// The split traits of a compressible type, at compile time: VisitSplit's choice.
template <DataType kType>
  requires(IsCompressibleType(kType))
using SplitOf = std::conditional_t<ElementSize(kType) == 1, Split8,
                                   std::conditional_t<ElementSize(kType) == 2, Split16, Split32>>;

// IEEE exponent field of each compressible type, for the entropy bound.
constexpr ExponentField ExponentFieldOf(DataType dtype) {
  switch (dtype) {
    case DataType::kBFloat16: return {7, 8};
    case DataType::kFloat16: return {10, 5};
    case DataType::kFloat32: return {23, 8};
    case DataType::kFloat8E4M3: return {3, 4};
    case DataType::kFloat8E5M2: return {2, 5};
    default: return {0, 0};
  }
}

}  // namespace ucclzip::codec
