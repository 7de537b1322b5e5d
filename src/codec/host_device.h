// Lets the codec's shared arithmetic compile both as CUDA device code and as plain C++ (the CPU
// reference, the fuzzer and host-only tools never see a CUDA compiler).
#pragma once

#if defined(__CUDACC__)
#define UZ_HD __host__ __device__ __forceinline__
#else
#define UZ_HD inline
#endif

#include <cstdint>

namespace ucclzip::codec {

UZ_HD uint32_t CountLeadingZeros(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __clz(x);
#else
  return x == 0 ? 32 : __builtin_clz(x);
#endif
}

}  // namespace ucclzip::codec
