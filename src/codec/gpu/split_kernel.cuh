// Split stage: one pass over the input writes the raw plane (final from here on, so the pipeline
// may send it at once) and counts the symbols, per tile and for the whole frame. The last block
// to finish turns the frame's histogram into the global frequency table and the encoder's
// constants, picks the mode and writes the header; the tiles' own tables come next
// (tile_model_kernel.cu), once this table is known.
#pragma once

#include "codec/frame_format.h"
#include "codec/gpu/block_model.cuh"
#include "codec/gpu/device_workspace.h"
#include "codec/gpu/element_access.cuh"
#include "codec/rans_model.h"

namespace ucclzip::codec::gpu {

inline constexpr int kSplitThreads = kModelThreads;  // the last block builds the model
static_assert(kSplitThreads == kAlphabetSize, "a block flushes its counts one symbol per thread");

struct SplitArgs {
  const uint8_t* input;
  uint64_t count;
  uint8_t* frame;
  Layout layout;
  uint8_t dtype;
  DeviceWorkspace* workspace;
  ChunkScanState chunk_scan;
  uint32_t* tile_histograms;  // TileWorkspace::histograms
  uint64_t block_elements;    // each block splits a run of this many elements, a multiple of kSplitAlignment
};

// Block runs start on whole 16-byte vectors of every type (16 fp8 elements).
inline constexpr uint64_t kSplitAlignment = 16;

// The end of the elements of i's chunk whose raw parts go to the raw plane: the chunk's later
// ones ride in its lanes' states (frame_format.h, format version 3).
__device__ __forceinline__ uint64_t KeptEnd(const SplitArgs& args, uint64_t i) {
  const ChunkSpan chunk = ChunkSpanOf(args.layout, args.count, ChunkOf(args.layout, i));
  return chunk.first + chunk.kept;
}

template <typename Split>
__device__ void SplitOne(const SplitArgs& args, uint64_t i, typename Split::Bits v, uint32_t* warp_histogram) {
  if (i < KeptEnd(args, i)) StoreRaw<Split>(args.frame + args.layout.raw_offset, RawPlaneIndex(args.layout, i), Split::Raw(v));
  atomicAdd(&warp_histogram[Split::Symbol(v)], 1u);
}

// Builds the model from the global histogram; run by the last block only.
__device__ inline void BuildModel(const SplitArgs& args) {
  __shared__ ModelStorage storage;
  DeviceWorkspace* ws = args.workspace;
  const uint32_t s = threadIdx.x;
  const uint64_t count = __ldcg(&ws->histogram[s]);
  ws->histogram[s] = 0;  // ready for the next call

  const SymbolModel model = NormalizeSymbol(count, args.count, storage);
  const uint64_t cost_bound = BlockCostBoundQ16(count, model.freq, storage);
  const Mode mode = ChooseSplitMode(model.present, cost_bound, args.count, args.layout.num_chunks);
  const uint32_t start = BlockExclusiveSum(model.freq, storage);

  const bool rans = mode == Mode::kSplitRans;
  const uint32_t freq = rans ? model.freq : 0;
  reinterpret_cast<uint16_t*>(args.frame + args.layout.table_offset)[s] = static_cast<uint16_t>(freq);
  if (freq != 0) ws->symbols[s] = MakeEncoderSymbol(start, freq);
  // Zero the alignment gaps so that frames are byte-identical to the CPU encoder's.
  const uint64_t index_end = args.layout.tile_index_offset + 4ull * args.layout.num_tiles;
  for (uint64_t at = index_end + s; at < args.layout.raw_offset; at += kSplitThreads) args.frame[at] = 0;
  const uint64_t raw_end = args.layout.raw_offset + args.layout.raw_bytes;
  for (uint64_t at = raw_end + s; at < args.layout.coded_offset; at += kSplitThreads) args.frame[at] = 0;
  if (!rans) {  // the chunk and tile indexes are unused; keep them zero
    for (uint64_t at = args.layout.index_offset + s; at < index_end; at += kSplitThreads) args.frame[at] = 0;
  }
  if (s == 0) {
    const uint8_t constant = mode == Mode::kSplitConstant ? static_cast<uint8_t>(model.top_symbol) : 0;
    *reinterpret_cast<Header*>(args.frame) = MakeHeader(args.layout, args.dtype, args.count, mode, constant);
    ws->mode_word = static_cast<uint32_t>(mode) | (uint32_t{constant} << 8);
    ws->split_blocks_done = 0;
  }
}

// Splits elements [first, end), counting their symbols in the block's histograms.
template <typename Split, bool kAligned>
__device__ void SplitRun(const SplitArgs& args, uint64_t first, uint64_t end, uint32_t* warp_histogram) {
  using Bits = typename Split::Bits;
  if constexpr (kAligned) {
    // 16 bytes of input per thread and iteration; `first` starts a vector (a block's run starts on
    // kSplitAlignment, a tile on a multiple of it), and only the frame's last run ends inside one.
    constexpr uint32_t kPerVector = 16 / sizeof(Bits);
    static_assert(kSplitAlignment % kPerVector == 0);
    const uint64_t vector_end = end / kPerVector;
    const auto* in = reinterpret_cast<const uint4*>(args.input);
    // A vector lies wholly before its chunk's carried elements (one store at its place in the
    // raw plane, a multiple of kPerVector: 32 m is one too), wholly among them (no store), or,
    // in a partial last chunk only, across the border (element by element).
    static_assert((kLanes * CarriedSteps(Split::kRawWidth)) % kPerVector == 0);
    for (uint64_t v = first / kPerVector + threadIdx.x; v < vector_end; v += kSplitThreads) {
      const uint4 packed = in[v];
      Bits elements[kPerVector];
      memcpy(elements, &packed, 16);
      const uint64_t i = v * kPerVector;
      const uint64_t kept_end = KeptEnd(args, i);
      if (i + kPerVector <= kept_end) {
        StoreRawVector<Split, kPerVector>(args.frame + args.layout.raw_offset, RawPlaneIndex(args.layout, i), elements);
      } else {
#pragma unroll
        for (uint32_t j = 0; j < kPerVector; ++j) {
          if (i + j < kept_end) {
            StoreRaw<Split>(args.frame + args.layout.raw_offset, RawPlaneIndex(args.layout, i + j), Split::Raw(elements[j]));
          }
        }
      }
#pragma unroll
      for (uint32_t j = 0; j < kPerVector; ++j) atomicAdd(&warp_histogram[Split::Symbol(elements[j])], 1u);
    }
    for (uint64_t i = vector_end * kPerVector + threadIdx.x; i < end; i += kSplitThreads) {
      SplitOne<Split>(args, i, LoadElement<Split, true>(args.input, i), warp_histogram);
    }
  } else {
    for (uint64_t i = first + threadIdx.x; i < end; i += kSplitThreads) {
      SplitOne<Split>(args, i, LoadElement<Split, false>(args.input, i), warp_histogram);
    }
  }
}

// Adds the block's counts to `tile`'s histogram and the frame's, and sets them back to zero;
// thread s takes symbol s.
template <int kWarps>
__device__ void FlushCounts(const SplitArgs& args, uint32_t (&histograms)[kWarps][kAlphabetSize], uint64_t tile) {
  const uint32_t s = threadIdx.x;
  uint32_t total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    total += histograms[w][s];
    histograms[w][s] = 0;
  }
  if (total != 0) {
    atomicAdd(&args.tile_histograms[tile * kAlphabetSize + s], total);
    atomicAdd(&args.workspace->histogram[s], static_cast<unsigned long long>(total));
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

  // The block's run, cut where tiles begin: each part's counts go to the part's tile.
  const uint32_t tile_elements_log2 = TileElementsLog2(args.layout);
  const uint64_t end = min((blockIdx.x + 1) * args.block_elements, args.count);
  for (uint64_t first = blockIdx.x * args.block_elements; first < end;) {
    const uint64_t tile = first >> tile_elements_log2;
    const uint64_t part_end = min(end, (tile + 1) << tile_elements_log2);
    SplitRun<Split, kAligned>(args, first, part_end, warp_histogram);
    __syncthreads();  // the part is counted
    FlushCounts(args, histograms, tile);
    __syncthreads();  // the histograms are zero before the next part counts
    first = part_end;
  }
  // The encoder's chunk scan needs fresh states (CUB's scan tiles: one per encode block, a group
  // of chunks; a slot per chunk covers them); any block may set them.
  const uint64_t thread = blockIdx.x * uint64_t{kSplitThreads} + threadIdx.x;
  const uint64_t threads = gridDim.x * uint64_t{kSplitThreads};
  for (uint64_t t = thread; t < args.layout.num_chunks + ChunkScanState::TILE_STATUS_PADDING; t += threads) {
    InitChunkScanSlot(args.chunk_scan, static_cast<uint32_t>(t));
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last_block = atomicAdd(&args.workspace->split_blocks_done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!is_last_block) return;
  __threadfence();
  BuildModel(args);
}

}  // namespace ucclzip::codec::gpu
