// A stored frame on the GPU: the header, then the elements verbatim.
#include <algorithm>

#include "codec/gpu/launch.h"

namespace ucclzip::codec::gpu {
namespace {

__global__ void StoredCompressKernel(const uint8_t* input, uint64_t bytes, uint8_t* frame, Header header) {
  const uint64_t thread = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  const uint64_t threads = gridDim.x * uint64_t{blockDim.x};
  if (thread == 0) *reinterpret_cast<Header*>(frame) = header;
  uint8_t* out = frame + header.raw_offset;  // 16-byte aligned
  uint64_t done = 0;
  if (reinterpret_cast<uintptr_t>(input) % 16 == 0) {
    for (uint64_t v = thread; v < bytes / 16; v += threads) reinterpret_cast<uint4*>(out)[v] = reinterpret_cast<const uint4*>(input)[v];
    done = bytes & ~uint64_t{15};
  }
  for (uint64_t i = done + thread; i < bytes; i += threads) out[i] = input[i];
}

}  // namespace

cudaError_t LaunchStoredCompress(const CompressLaunch& launch) {
  const Header header = MakeHeader(launch.layout, launch.dtype, launch.count, Mode::kStored, 0);
  const uint64_t wanted = DivCeil(std::max<uint64_t>(launch.layout.raw_bytes, 1), 256 * 16 * 4);
  const int blocks = static_cast<int>(std::min<uint64_t>(wanted, uint64_t(launch.sm_count) * 8));
  StoredCompressKernel<<<blocks, 256, 0, launch.stream>>>(launch.input, launch.layout.raw_bytes, launch.frame, header);
  if (launch.split_done != nullptr) {
    if (cudaError_t err = cudaEventRecord(launch.split_done, launch.stream); err != cudaSuccess) return err;
  }
  return cudaGetLastError();
}

cudaError_t PreloadStoredKernel() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, StoredCompressKernel);
}

}  // namespace ucclzip::codec::gpu
