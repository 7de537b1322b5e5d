// Definitions of the launchers in launch.h, included once per split by instantiate_*.cu.
#pragma once

#include <algorithm>

#include "codec/gpu/combine_kernel.cuh"
#include "codec/gpu/decode_kernel.cuh"
#include "codec/gpu/encode_kernel.cuh"
#include "codec/gpu/launch.h"
#include "codec/gpu/split_kernel.cuh"

namespace ucclzip::codec::gpu {

inline bool IsAligned(const void* p, size_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

// Elements each block of the split stage takes, an equal run of whole vectors: enough blocks to
// fill the GPU, each thread with a few 16-byte vectors.
template <typename Split>
uint64_t SplitBlockElements(uint64_t count, int sm_count) {
  const uint64_t vectors = DivCeil(count * sizeof(typename Split::Bits), 16);
  const uint64_t wanted = DivCeil(vectors, uint64_t{kSplitThreads} * 4);
  const uint64_t blocks = std::clamp<uint64_t>(wanted, 1, uint64_t(sm_count) * 8);
  return DivCeil(DivCeil(count, blocks), kSplitAlignment) * kSplitAlignment;
}

template <typename Split, bool kAligned>
cudaError_t LaunchCompressAs(const CompressLaunch& launch) {
  const uint64_t block_elements = SplitBlockElements<Split>(launch.count, launch.sm_count);
  const auto blocks = static_cast<int>(DivCeil(launch.count, block_elements));
  const SplitArgs split{launch.input,     launch.count,      launch.frame,            launch.layout, launch.dtype,
                        launch.workspace, launch.chunk_scan, launch.tiles.histograms, block_elements};
  SplitKernel<Split, kAligned><<<blocks, kSplitThreads, 0, launch.stream>>>(split);
  // Checked here: a dependent launch below reports only its own launch, and the encoder after a
  // split that never ran codes with the last call's mode and tables over the last call's frame.
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  if (launch.split_done != nullptr) {
    if (cudaError_t err = cudaEventRecord(launch.split_done, launch.stream); err != cudaSuccess) return err;
  }
  if (cudaError_t err = LaunchTileModel(launch); err != cudaSuccess) return err;
  const EncodeArgs encode{launch.input,      launch.count,   launch.frame, launch.layout, launch.workspace,
                          launch.chunk_scan, launch.scratch, launch.tiles};
  const auto groups = static_cast<uint32_t>(DivCeil(launch.layout.num_chunks, kEncodeWarps));
  return LaunchAfterPriorKernel(launch.dependent_launch, EncodeKernel<Split, kAligned>, groups, 32 * kEncodeWarps,
                                launch.stream, encode);
}

template <typename Split>
cudaError_t LaunchCompress(const CompressLaunch& launch) {
  return IsAligned(launch.input, 16) ? LaunchCompressAs<Split, true>(launch) : LaunchCompressAs<Split, false>(launch);
}

inline DecodeArgs DecodeArgsOf(const DecompressLaunch& launch) {
  return {launch.frame,  launch.frame_capacity, launch.dtype,     launch.element_size, launch.splittable,
          launch.output, launch.count,          launch.error_word};
}

// Grid of a decode: enough warps for the most chunks the shortest lanes could give, capped at a
// few resident blocks per multiprocessor (the warps loop over the chunks).
inline int DecodeBlocks(const DecompressLaunch& launch) {
  const uint64_t max_chunks = DivCeil(launch.count, uint64_t{kLanes} * kMinLaneSymbols);
  const uint64_t wanted = std::max<uint64_t>(DivCeil(max_chunks, kDecodeWarps), 1);
  return static_cast<int>(std::min<uint64_t>(wanted, uint64_t(launch.sm_count) * 8));
}

template <typename Split, bool kAligned>
cudaError_t LaunchDecompressAs(const DecompressLaunch& launch) {
  DecodeKernel<Split, kAligned><<<DecodeBlocks(launch), kDecodeThreads, kDecodeSharedBytes, launch.stream>>>(
      DecodeArgsOf(launch));
  return cudaGetLastError();
}

template <typename Split>
cudaError_t LaunchDecompress(const DecompressLaunch& launch) {
  return IsAligned(launch.output, sizeof(typename Split::Bits)) ? LaunchDecompressAs<Split, true>(launch)
                                                                : LaunchDecompressAs<Split, false>(launch);
}

template <DataType kType>
cudaError_t LaunchDecompressAndCombine(const CombineLaunch& launch) {
  const DecompressLaunch& decode = launch.decode;
  constexpr size_t kWidth = ElementSize(kType);
  const auto kernel = IsAligned(decode.output, kWidth) && IsAligned(launch.combine.local, kWidth)
                          ? DecodeCombineKernel<kType, true>
                          : DecodeCombineKernel<kType, false>;
  kernel<<<DecodeBlocks(decode), kDecodeThreads, kDecodeSharedBytes, decode.stream>>>(DecodeArgsOf(decode),
                                                                                      launch.combine);
  return cudaGetLastError();
}

template <DataType kType>
cudaError_t PreloadCombineKernels() {
  for (cudaError_t err : {cudaFuncSetAttribute(DecodeCombineKernel<kType, true>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(kDecodeSharedBytes)),
                          cudaFuncSetAttribute(DecodeCombineKernel<kType, false>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(kDecodeSharedBytes))}) {
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

template <typename Split>
cudaError_t PreloadKernels() {
  cudaFuncAttributes attributes;
  for (cudaError_t err : {cudaFuncGetAttributes(&attributes, SplitKernel<Split, true>),
                          cudaFuncGetAttributes(&attributes, SplitKernel<Split, false>),
                          cudaFuncGetAttributes(&attributes, EncodeKernel<Split, true>),
                          cudaFuncGetAttributes(&attributes, EncodeKernel<Split, false>),
                          cudaFuncSetAttribute(DecodeKernel<Split, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(kDecodeSharedBytes)),
                          cudaFuncSetAttribute(DecodeKernel<Split, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(kDecodeSharedBytes))}) {
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

#define UCCLZIP_INSTANTIATE_CODEC_LAUNCHERS(Split)                               \
  template cudaError_t LaunchCompress<Split>(const CompressLaunch& launch);     \
  template cudaError_t LaunchDecompress<Split>(const DecompressLaunch& launch); \
  template cudaError_t PreloadKernels<Split>();

#define UCCLZIP_INSTANTIATE_COMBINE_LAUNCHERS(kType)                                    \
  template cudaError_t LaunchDecompressAndCombine<kType>(const CombineLaunch& launch); \
  template cudaError_t PreloadCombineKernels<kType>();

}  // namespace ucclzip::codec::gpu
