// Split stage: one pass over the input writes the raw plane (final from here on, so the pipeline
// may send it at once) and counts the symbols. The last block to finish turns the histogram into
// the frame's frequency table and the encoder's constants, picks the mode and writes the header.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cuda/functional>
#include <cuda/std/functional>

#include "codec/frame_format.h"
#include "codec/gpu/device_workspace.h"
#include "codec/gpu/element_access.cuh"
#include "codec/rans_model.h"

namespace ucclzip::codec::gpu {

inline constexpr int kSplitThreads = 256;
static_assert(kSplitThreads == kAlphabetSize, "the model is built one symbol per thread");

struct SplitArgs {
  const uint8_t* input;
  uint64_t count;
  uint8_t* frame;
  Layout layout;
  uint8_t dtype;
  DeviceWorkspace* workspace;
  ChunkScanState chunk_scan;
};

template <typename Split>
__device__ void SplitOne(const SplitArgs& args, uint64_t i, typename Split::Bits v, uint32_t* warp_histogram) {
  StoreRaw<Split>(args.frame + args.layout.raw_offset, i, Split::Raw(v));
  atomicAdd(&warp_histogram[Split::Symbol(v)], 1u);
}

// Builds the model from the global histogram; run by the last block only.
template <typename Split>
__device__ void BuildModel(const SplitArgs& args) {
  using Reduce64 = cub::BlockReduce<unsigned long long, kSplitThreads>;
  using Scan32 = cub::BlockScan<uint32_t, kSplitThreads>;
  __shared__ union {
    typename Reduce64::TempStorage reduce;
    typename Scan32::TempStorage scan;
  } temp;
  __shared__ unsigned long long broadcast;
  __shared__ uint32_t top_symbol;
  DeviceWorkspace* ws = args.workspace;
  const uint32_t s = threadIdx.x;
  const uint64_t count = __ldcg(&ws->histogram[s]);
  ws->histogram[s] = 0;  // ready for the next call

  const uint32_t present = __syncthreads_count(count != 0);
  // Most frequent symbol, lowest index on ties: maximise (count, 255 - s).
  const unsigned long long key = (count << 8) | (255 - s);
  const unsigned long long best = Reduce64(temp.reduce).Reduce(key, cuda::maximum<unsigned long long>());
  if (s == 0) top_symbol = 255 - static_cast<uint32_t>(best & 0xFF);
  __syncthreads();

  uint32_t freq = present >= 2 ? NormalizedFrequency(count, args.count, present) : 0;
  const unsigned long long freq_sum = Reduce64(temp.reduce).Sum(freq);
  if (s == 0) broadcast = freq_sum;
  __syncthreads();
  if (s == top_symbol && present >= 2) freq += kProbScale - static_cast<uint32_t>(broadcast);
  __syncthreads();
  const unsigned long long cost = count != 0 && freq != 0 ? SymbolCostBoundQ16(count, freq) : 0;
  const unsigned long long cost_sum = Reduce64(temp.reduce).Sum(cost);
  if (s == 0) broadcast = cost_sum;
  __syncthreads();
  const Mode mode = ChooseSplitMode(present, broadcast, args.count, args.layout.num_chunks);
  uint32_t start;
  Scan32(temp.scan).ExclusiveSum(freq, start);

  const bool rans = mode == Mode::kSplitRans;
  reinterpret_cast<uint16_t*>(args.frame + args.layout.table_offset)[s] = rans ? static_cast<uint16_t>(freq) : 0;
  if (rans && freq != 0) ws->symbols[s] = MakeEncoderSymbol(start, freq);
  // Zero the alignment gaps so that frames are byte-identical to the CPU encoder's.
  const uint64_t index_end = args.layout.index_offset + 4ull * args.layout.num_chunks;
  for (uint64_t at = index_end + s; at < args.layout.raw_offset; at += kSplitThreads) args.frame[at] = 0;
  const uint64_t raw_end = args.layout.raw_offset + args.layout.raw_bytes;
  for (uint64_t at = raw_end + s; at < args.layout.coded_offset; at += kSplitThreads) args.frame[at] = 0;
  if (!rans) {  // the index is unused; keep it zero
    for (uint64_t at = args.layout.index_offset + s; at < index_end; at += kSplitThreads) args.frame[at] = 0;
  }
  if (s == 0) {
    const uint8_t constant = mode == Mode::kSplitConstant ? static_cast<uint8_t>(top_symbol) : 0;
    *reinterpret_cast<Header*>(args.frame) = MakeHeader(args.layout, args.dtype, args.count, mode, constant);
    ws->mode_word = static_cast<uint32_t>(mode) | (uint32_t{constant} << 8);
    ws->split_blocks_done = 0;
  }
}

template <typename Split, bool kAligned>
__global__ void __launch_bounds__(kSplitThreads) SplitKernel(SplitArgs args) {
  constexpr int kWarps = kSplitThreads / 32;
  __shared__ uint32_t histograms[kWarps][kAlphabetSize];  // one per warp: fewer same-address atomics
  __shared__ bool is_last_block;
  for (int i = threadIdx.x; i < kWarps * kAlphabetSize; i += kSplitThreads) (&histograms[0][0])[i] = 0;
  __syncthreads();
  uint32_t* warp_histogram = histograms[threadIdx.x / 32];

  const uint64_t thread = blockIdx.x * uint64_t{kSplitThreads} + threadIdx.x;
  const uint64_t threads = gridDim.x * uint64_t{kSplitThreads};
  using Bits = typename Split::Bits;
  if constexpr (kAligned) {
    // 16 bytes of input per thread and iteration.
    constexpr uint32_t kPerVector = 16 / sizeof(Bits);
    const uint64_t vectors = args.count / kPerVector;
    const auto* in = reinterpret_cast<const uint4*>(args.input);
    for (uint64_t v = thread; v < vectors; v += threads) {
      const uint4 packed = in[v];
      Bits elements[kPerVector];
      memcpy(elements, &packed, 16);
      StoreRawVector<Split, kPerVector>(args.frame + args.layout.raw_offset, v * kPerVector, elements);
#pragma unroll
      for (uint32_t j = 0; j < kPerVector; ++j) atomicAdd(&warp_histogram[Split::Symbol(elements[j])], 1u);
    }
    for (uint64_t i = vectors * kPerVector + thread; i < args.count; i += threads) {
      SplitOne<Split>(args, i, LoadElement<Split, true>(args.input, i), warp_histogram);
    }
  } else {
    for (uint64_t i = thread; i < args.count; i += threads) {
      SplitOne<Split>(args, i, LoadElement<Split, false>(args.input, i), warp_histogram);
    }
  }
  // The encoder's chunk scan needs fresh tile states; any block may set them.
  for (uint64_t t = thread; t < args.layout.num_chunks + ChunkScanState::TILE_STATUS_PADDING; t += threads) {
    InitChunkScanSlot(args.chunk_scan, static_cast<uint32_t>(t));
  }
  __syncthreads();
  for (int s = threadIdx.x; s < kAlphabetSize; s += kSplitThreads) {
    uint32_t total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += histograms[w][s];
    if (total != 0) atomicAdd(&args.workspace->histogram[s], static_cast<unsigned long long>(total));
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last_block = atomicAdd(&args.workspace->split_blocks_done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!is_last_block) return;
  __threadfence();
  BuildModel<Split>(args);
}

}  // namespace ucclzip::codec::gpu
