// Host-side launchers of the codec kernels, one instantiation per split (instantiate_*.cu), so
// that the kernels compile in parallel and gpu_codec.cu stays free of kernel code.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "codec/dtype_split.h"
#include "codec/frame_format.h"
#include "codec/gpu/device_workspace.h"
#include "ucclzip/types.h"

namespace ucclzip::codec::gpu {

struct CompressLaunch {
  const uint8_t* input;
  uint64_t count;
  uint8_t dtype;
  uint8_t* frame;
  Layout layout;
  DeviceWorkspace* workspace;
  ChunkScanState chunk_scan;
  uint16_t* scratch;
  TileWorkspace tiles;
  int sm_count;
  cudaStream_t stream;
  cudaEvent_t split_done;  // may be null
  bool dependent_launch;   // the tile model and encode kernels as dependents (dependent_launch.cuh)
};

struct DecompressLaunch {
  const uint8_t* frame;
  uint64_t frame_capacity;
  uint8_t dtype;
  uint32_t element_size;
  bool splittable;
  uint8_t* output;
  uint64_t count;
  uint32_t* error_word;
  int sm_count;
  cudaStream_t stream;
};

// What decompress-and-combine adds to a decode (also the kernel's argument): the decode's
// output receives decoded op local, then / divisor.
struct CombineArgs {
  const uint8_t* local;
  ReduceOp op;
  uint32_t divisor;
};

struct CombineLaunch {
  DecompressLaunch decode;
  CombineArgs combine;
};

// Split modes: the split kernel, the tile model, then the encode kernel.
template <typename Split>
cudaError_t LaunchCompress(const CompressLaunch& launch);

// The tile model (tile_model_kernel.cu): which tiles code with a table of their own.
cudaError_t LaunchTileModel(const CompressLaunch& launch);

// Any frame whose type uses this split; stored-only types use Split8 with splittable = false.
template <typename Split>
cudaError_t LaunchDecompress(const DecompressLaunch& launch);

// Any frame of the compressible type kType, each element combined with the caller's as it is
// decoded (instantiate_combine*.cu).
template <DataType kType>
cudaError_t LaunchDecompressAndCombine(const CombineLaunch& launch);

// A stored frame: header and a copy of the elements.
cudaError_t LaunchStoredCompress(const CompressLaunch& launch);

// Loads the kernels of a split (and sets their launch attributes) on the current device now.
// CUDA loads modules lazily by default, and loading at a kernel's first launch may synchronise
// the whole context: if a kernel already running waits for work that this launch feeds (as the
// pipeline's stream waits do), that would never return.
template <typename Split>
cudaError_t PreloadKernels();
template <DataType kType>
cudaError_t PreloadCombineKernels();
cudaError_t PreloadStoredKernel();
cudaError_t PreloadTileModelKernel();

// Whether the compress kernels may be launched as dependents on the current device: it is
// Hopper or later, and the kernels were compiled for it (their PTX for sm_90 or later, so that
// they wait for the kernel before them; a build for an older device, run on a newer one through
// its PTX, would not).
cudaError_t DependentLaunchAllowed(bool* allowed);

}  // namespace ucclzip::codec::gpu
