// A frequency model built by one block, one symbol per thread: the split stage's global table
// (split_kernel.cuh) and every tile's own candidate table (tile_model_kernel.cu) normalise their
// histograms with these functions, so that both follow rans_model.h's NormalizeHistogram, the
// CPU reference's rule, to the bit.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cuda/functional>
#include <cuda/std/functional>

#include "codec/frame_format.h"
#include "codec/rans_model.h"

namespace ucclzip::codec::gpu {

inline constexpr int kModelThreads = kAlphabetSize;  // thread s models symbol s

// Shared memory of a block's model functions; each function leaves it free for the next.
struct ModelStorage {
  using Reduce64 = cub::BlockReduce<unsigned long long, kModelThreads>;
  using Scan32 = cub::BlockScan<uint32_t, kModelThreads>;
  union {
    typename Reduce64::TempStorage reduce;
    typename Scan32::TempStorage scan;
  } temp;
  unsigned long long result;
};

// The block's reduction by `op` of one value per thread, returned to every thread.
template <typename Op>
__device__ unsigned long long BlockAllReduce(unsigned long long value, Op op, ModelStorage& storage) {
  const unsigned long long reduced = ModelStorage::Reduce64(storage.temp.reduce).Reduce(value, op);
  if (threadIdx.x == 0) storage.result = reduced;
  __syncthreads();
  const unsigned long long all = storage.result;
  __syncthreads();  // every thread has read it, and the reduction is done with its storage
  return all;
}

// The block's exclusive prefix sum of one value per thread (symbol order).
__device__ inline uint32_t BlockExclusiveSum(uint32_t value, ModelStorage& storage) {
  uint32_t prefix;
  ModelStorage::Scan32(storage.temp.scan).ExclusiveSum(value, prefix);
  __syncthreads();  // the scan is done with its storage
  return prefix;
}

// One symbol of a normalised histogram, as the thread of that symbol sees it.
struct SymbolModel {
  uint32_t present;     // distinct symbols in the histogram
  uint32_t top_symbol;  // the most frequent, lowest value on ties
  uint32_t freq;        // this symbol's frequency; 0 for every symbol with fewer than two present
};

// NormalizeHistogram (rans_model.h) of a histogram of `total` symbols, in which symbol
// threadIdx.x occurs `count` times: NormalizedFrequency for each, the remainder to the most
// frequent. Called by the whole block.
__device__ inline SymbolModel NormalizeSymbol(uint64_t count, uint64_t total, ModelStorage& storage) {
  const uint32_t s = threadIdx.x;
  SymbolModel model;
  model.present = __syncthreads_count(count != 0);
  // The most frequent symbol, lowest value on ties: the largest (count, 255 - s).
  const unsigned long long key = (count << 8) | (kAlphabetSize - 1 - s);
  const unsigned long long best = BlockAllReduce(key, cuda::maximum<unsigned long long>(), storage);
  model.top_symbol = kAlphabetSize - 1 - static_cast<uint32_t>(best & 0xFF);
  const bool coded = model.present >= 2;  // one symbol has no table: its 2^12 does not fit a frequency
  model.freq = coded ? NormalizedFrequency(count, total, model.present) : 0;
  const unsigned long long sum = BlockAllReduce(model.freq, cuda::std::plus<unsigned long long>(), storage);
  if (coded && s == model.top_symbol) model.freq += kProbScale - static_cast<uint32_t>(sum);
  return model;
}

// SymbolCostBoundQ16 summed over the block's symbols that occur and have a frequency, returned
// to every thread.
__device__ inline uint64_t BlockCostBoundQ16(uint64_t count, uint32_t freq, ModelStorage& storage) {
  const unsigned long long cost = count != 0 && freq != 0 ? SymbolCostBoundQ16(count, freq) : 0;
  return BlockAllReduce(cost, cuda::std::plus<unsigned long long>(), storage);
}

}  // namespace ucclzip::codec::gpu
