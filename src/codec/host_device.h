// Lets the codec's shared arithmetic compile both as CUDA device code and as plain C++ (the CPU
// reference, the fuzzer and host-only tools never see a CUDA compiler).
#pragma once

#if defined(__CUDACC__)
#define UZ_HD __host__ __device__ __forceinline__
#else
#define UZ_HD inline
#endif
