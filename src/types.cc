#include "ucclzip/types.h"

namespace ucclzip {

const char* DataTypeName(DataType type) {
  switch (type) {
    case DataType::kRaw: return "raw";
    case DataType::kBFloat16: return "bf16";
    case DataType::kFloat16: return "fp16";
    case DataType::kFloat32: return "fp32";
    case DataType::kFloat8E4M3: return "fp8e4m3";
    case DataType::kFloat8E5M2: return "fp8e5m2";
    case DataType::kInt8: return "int8";
    case DataType::kUint8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kUint32: return "uint32";
    case DataType::kInt64: return "int64";
    case DataType::kUint64: return "uint64";
    case DataType::kFloat64: return "fp64";
  }
  return "invalid";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
  }
  return "invalid";
}

}  // namespace ucclzip
