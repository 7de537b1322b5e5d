// Element types and reduction operators shared by every ucclzip API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ucclzip {

// Element type of a buffer. bf16, fp16, fp32 and fp8 are compressed (IsCompressibleType); every
// other type, fp64 included, travels (and is framed) uncompressed. The numeric values are part
// of the frame format: never renumber.
enum class DataType : uint8_t {
  kRaw = 0,         // opaque bytes, element size 1
  kBFloat16 = 1,
  kFloat16 = 2,
  kFloat32 = 3,
  kFloat8E4M3 = 4,
  kFloat8E5M2 = 5,
  kInt8 = 6,
  kUint8 = 7,
  kInt32 = 8,
  kUint32 = 9,
  kInt64 = 10,
  kUint64 = 11,
  kFloat64 = 12,
};

// How the reducing collectives combine elements. kAvg is the sum divided by the world size on
// the last hop; docs/COLLECTIVES.md gives the order and rounding of each.
enum class ReduceOp : uint8_t { kSum = 0, kProd = 1, kMin = 2, kMax = 3, kAvg = 4 };

constexpr bool IsValidReduceOp(uint8_t value) { return value <= static_cast<uint8_t>(ReduceOp::kAvg); }

// "sum", "prod", "min", "max", "avg".
const char* ReduceOpName(ReduceOp op);

// Size of one element in bytes.
constexpr size_t ElementSize(DataType type) {
  switch (type) {
    case DataType::kRaw:
    case DataType::kFloat8E4M3:
    case DataType::kFloat8E5M2:
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kBFloat16:
    case DataType::kFloat16:
      return 2;
    case DataType::kFloat32:
    case DataType::kInt32:
    case DataType::kUint32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

// True for the values a DataType may hold; frames and user input are checked with it.
constexpr bool IsValidDataType(uint8_t value) { return value <= static_cast<uint8_t>(DataType::kFloat64); }

// True for the types whose exponents the codec entropy-codes.
constexpr bool IsCompressibleType(DataType type) {
  return type == DataType::kBFloat16 || type == DataType::kFloat16 || type == DataType::kFloat32 ||
         type == DataType::kFloat8E4M3 || type == DataType::kFloat8E5M2;
}

// Short lower-case name ("bf16", "fp32", ...), as the benchmarks and error messages print it.
const char* DataTypeName(DataType type);

}  // namespace ucclzip
