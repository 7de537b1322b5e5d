// The reduction kernel: one element per thread per iteration of a grid-stride loop. It is
// memory-bound (three streams of one to eight bytes per element), so the element arithmetic
// can stay the scalar code that the CPU shares.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codec/reduce_math.h"
#include "pipeline/reduce.h"
#include "ucclzip/reduction.h"

namespace ucclzip::pipeline {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kMaxBlocks = 132 * 8;  // a few waves on an H200's 132 SMs

template <DataType kType>
__global__ void ReduceKernel(const uint8_t* a, const uint8_t* b, uint8_t* out, uint64_t count, ReduceOp op,
                             uint32_t divisor) {
  constexpr size_t kWidth = ElementSize(kType);
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count; i += uint64_t{gridDim.x} * blockDim.x) {
    codec::reduce::ReduceElement(kType, op, divisor, a + i * kWidth, b + i * kWidth, out + i * kWidth);
  }
}

using Kernel = void (*)(const uint8_t*, const uint8_t*, uint8_t*, uint64_t, ReduceOp, uint32_t);

Kernel KernelFor(DataType dtype) {
  switch (dtype) {
    case DataType::kBFloat16: return ReduceKernel<DataType::kBFloat16>;
    case DataType::kFloat16: return ReduceKernel<DataType::kFloat16>;
    case DataType::kFloat32: return ReduceKernel<DataType::kFloat32>;
    case DataType::kFloat64: return ReduceKernel<DataType::kFloat64>;
    case DataType::kFloat8E4M3: return ReduceKernel<DataType::kFloat8E4M3>;
    case DataType::kFloat8E5M2: return ReduceKernel<DataType::kFloat8E5M2>;
    case DataType::kInt8: return ReduceKernel<DataType::kInt8>;
    case DataType::kRaw:
    case DataType::kUint8: return ReduceKernel<DataType::kUint8>;
    case DataType::kInt32: return ReduceKernel<DataType::kInt32>;
    case DataType::kUint32: return ReduceKernel<DataType::kUint32>;
    case DataType::kInt64: return ReduceKernel<DataType::kInt64>;
    case DataType::kUint64: return ReduceKernel<DataType::kUint64>;
  }
  return nullptr;
}

}  // namespace

absl::Status ReduceDevice(const Combiner& combiner, const void* received, const void* local, void* out, uint64_t count,
                          cudaStream_t stream) {
  if (count == 0) return absl::OkStatus();
  Kernel kernel = KernelFor(combiner.dtype);
  if (kernel == nullptr) return absl::InvalidArgumentError("reduction of an invalid type");
  const uint64_t blocks = std::clamp<uint64_t>((count + kThreads - 1) / kThreads, 1, kMaxBlocks);
  kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<const uint8_t*>(received),
                                                                 static_cast<const uint8_t*>(local),
                                                                 static_cast<uint8_t*>(out), count, combiner.op,
                                                                 combiner.divisor);
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) {
    return absl::InternalError(absl::StrCat("launching the reduction of ", count, " elements of ",
                                            DataTypeName(combiner.dtype), ": ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
}

absl::Status PreloadReduceKernel() {
  for (uint8_t v = 0; IsValidDataType(v); ++v) {
    cudaFuncAttributes attributes;
    if (cudaError_t err = cudaFuncGetAttributes(&attributes, KernelFor(static_cast<DataType>(v))); err != cudaSuccess) {
      cudaGetLastError();  // reported here, not again by the caller's next launch check
      return absl::InternalError(absl::StrCat("loading the reduction kernels: ", cudaGetErrorString(err)));
    }
  }
  return absl::OkStatus();
}

}  // namespace ucclzip::pipeline

namespace ucclzip {

absl::Status ReduceOnDevice(DataType dtype, ReduceOp op, const void* received, const void* local, void* out,
                            uint64_t count, cudaStream_t stream, uint32_t divisor) {
  const pipeline::Combiner combiner{dtype, op, divisor};
  if (absl::Status s = pipeline::CheckReduceArguments("ReduceOnDevice", combiner, received, local, out, count); !s.ok()) {
    return s;
  }
  return pipeline::ReduceDevice(combiner, received, local, out, count, stream);
}

}  // namespace ucclzip
