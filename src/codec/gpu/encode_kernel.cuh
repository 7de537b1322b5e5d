// Encode stage: one warp codes one chunk of 32 interleaved rANS lanes, running backwards over
// its symbols, with its tile's table (the global one, or the tile's own); a block's warps code
// consecutive chunks of one tile, and load its table once. Renormalisation words go to a
// per-chunk scratch area in emission order; a block's place in the frame comes from a decoupled
// look-back over the blocks' sizes (CUB), each chunk's from the chunks before it in the block,
// and the words are then written reversed, in the order the decoder reads them. The first chunk
// of a tile with its own table also places the table, just before itself: its size counts the
// table's bytes too.
#pragma once

#include <cub/agent/single_pass_scan_operators.cuh>

#include <cuda/functional>
#include <cuda/std/functional>

#include "codec/chunk_states.h"
#include "codec/frame_format.h"
#include "codec/gpu/dependent_launch.cuh"
#include "codec/gpu/device_workspace.h"
#include "codec/gpu/element_access.cuh"
#include "codec/rans_model.h"

namespace ucclzip::codec::gpu {

struct EncodeArgs {
  const uint8_t* input;
  uint64_t count;
  uint8_t* frame;
  Layout layout;
  DeviceWorkspace* workspace;
  ChunkScanState chunk_scan;
  uint16_t* scratch;  // >= count words: a chunk emits at most one word per symbol
  TileWorkspace tiles;  // the tiles' own tables, from the tile model
};

using ChunkPrefixOp = cub::TilePrefixCallbackOp<uint32_t, cuda::std::plus<uint32_t>, ChunkScanState>;

// Chunks per block, one warp each: consecutive chunks of one tile (a tile holds a multiple of
// this many), which share one load of the tile's table and one look-back for their place.
inline constexpr uint32_t kEncodeWarps = 4;
static_assert((1u << kMinTileChunksLog2) % kEncodeWarps == 0, "a block's chunks lie in one tile");

// Stores `value` at words[index] where `store` holds, as one predicated instruction: written as
// a branch (which the compiler chose for the plain `if`), it closes the coder's step to the
// scheduler, and the steps of a batch then run one instruction after another, each waiting for
// the last. The address is one wide multiply-add of the 32-bit index onto the 64-bit base (the
// compiler, left to itself, rebuilt the chunk's base from the scratch area's at every step:
// five instructions of the step's 23). The caller orders the store with later reads by a
// __syncwarp.
__device__ __forceinline__ void StoreWordIf(bool store, uint16_t* words, uint32_t index, uint16_t value) {
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  .reg .u64 address;\n"
      "  setp.ne.u32 p, %0, 0;\n"
      "  mad.wide.u32 address, %1, 2, %2;\n"
      "  @p st.global.u16 [address], %3;\n"
      "}\n" ::"r"(static_cast<uint32_t>(store)),
      "r"(index), "l"(words), "h"(value));
}

template <typename Split, bool kAligned>
__device__ void StoreSymbols(const EncodeArgs& args, uint64_t first, uint64_t chunk_count) {
  uint8_t* symbols = args.frame + args.layout.coded_offset;
  for (uint64_t e = threadIdx.x % 32; e < chunk_count; e += 32) {
    symbols[first + e] = static_cast<uint8_t>(Split::Symbol(LoadElement<Split, kAligned>(args.input, first + e)));
  }
}

// The raw parts that lane `lane` of the chunk of `chunk_count` elements from `first` carries in
// its start state (frame_format.h's LaneStartState), read from the input.
template <typename Split, bool kAligned>
__device__ uint32_t CarriedRaw(const EncodeArgs& args, uint64_t first, uint64_t chunk_count, uint32_t lane) {
  const uint32_t lane_elements = LaneElements(chunk_count, lane);
  const uint32_t carried = min(lane_elements, args.layout.carried_steps);
  uint32_t packed = 0;
  for (uint32_t t = 0; t < carried; ++t) {
    const uint64_t e = first + uint64_t{lane_elements - 1 - t} * kLanes + lane;
    packed |= Split::Raw(LoadElement<Split, kAligned>(args.input, e)) << (t * 8 * Split::kRawWidth);
  }
  return packed;
}

// Modes 1 and 2 have no lanes: the chunk's carried raw parts go to the coded area, after the
// stored symbols (mode 1) or alone (mode 2), at CarriedIndex.
template <typename Split, bool kAligned>
__device__ void StoreCarriedRaw(const EncodeArgs& args, Mode mode, uint64_t first, uint64_t chunk_count) {
  uint8_t* out = args.frame + args.layout.coded_offset + (mode == Mode::kSplitStored ? args.count : 0);
  const uint64_t kept = chunk_count - ChunkCarried(chunk_count, args.layout.carried_steps);
  for (uint64_t e = kept + threadIdx.x % 32; e < chunk_count; e += 32) {
    const uint32_t raw = Split::Raw(LoadElement<Split, kAligned>(args.input, first + e));
    StoreRaw<Split>(out, CarriedIndex(args.layout, first + e, chunk_count), raw);
  }
}

// Written by the warp of a tile's first chunk, at `place` in the coded area: the tile's own table
// of `table_bytes` (none if 0) and the tile's index entry.
__device__ inline void PlaceTileTable(const EncodeArgs& args, uint32_t tile, uint32_t table_bytes, uint64_t place,
                                      uint8_t* coded) {
  const uint32_t lane = threadIdx.x % 32;
  const auto* staged = reinterpret_cast<const uint32_t*>(args.tiles.tables + uint64_t{tile} * kMaxTileTableBytes);
  auto* out = reinterpret_cast<uint32_t*>(coded + place);  // table sizes and places are multiples of 4
  for (uint32_t i = lane; i < table_bytes / 4; i += 32) out[i] = staged[i];
  if (lane == 0) {
    reinterpret_cast<uint32_t*>(args.frame + args.layout.tile_index_offset)[tile] =
        table_bytes != 0 ? static_cast<uint32_t>(place / 4) : kGlobalTableTile;
  }
}

template <typename Split, bool kAligned>
__global__ void __launch_bounds__(32 * kEncodeWarps) EncodeKernel(EncodeArgs args) {
  WaitForPriorKernel();  // the tile model's tables (and, before it, the split kernel's output)
  __shared__ EncoderSymbol symbols[kAlphabetSize];
  __shared__ typename ChunkPrefixOp::TempStorage prefix_storage;
  __shared__ uint32_t group_smem;
  __shared__ uint32_t chunk_units[kEncodeWarps];  // what each chunk adds to the coded area, in 4-byte units
  __shared__ uint32_t group_place_units;
  __shared__ uint32_t state_areas[kEncodeWarps][kChunkMaxStateWords + 1];  // + 1: a placement's empty high word
  DeviceWorkspace* ws = args.workspace;
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const uint32_t num_chunks = args.layout.num_chunks;
  const uint32_t num_groups = static_cast<uint32_t>(DivCeil(num_chunks, kEncodeWarps));
  // Groups of chunks are taken in launch order, so every group's predecessors are running or
  // done and the look-back always makes progress.
  if (threadIdx.x == 0) {
    group_smem = atomicAdd(&ws->encode_ticket, 1u);
    if (group_smem == num_groups - 1) ws->encode_ticket = 0;  // every ticket is taken: reset for the next call
  }
  __syncthreads();
  const uint32_t group = group_smem;
  const uint32_t chunk = group * kEncodeWarps + warp;
  // A warp past the last chunk codes an empty one, and takes part only in the block's barriers.
  const bool has_chunk = chunk < num_chunks;
  const uint64_t chunk_elements = uint64_t{kLanes} * args.layout.lane_symbols;
  const uint64_t first = has_chunk ? chunk * chunk_elements : args.count;
  const uint64_t chunk_count = min(chunk_elements, args.count - first);
  const Mode mode = static_cast<Mode>(ws->mode_word & 0xFF);
  if (mode == Mode::kSplitStored || mode == Mode::kSplitConstant) {
    if (mode == Mode::kSplitStored) StoreSymbols<Split, kAligned>(args, first, chunk_count);
    return StoreCarriedRaw<Split, kAligned>(args, mode, first, chunk_count);
  }
  if (mode != Mode::kSplitRans) return;

  using Bits = typename Split::Bits;
  const int full_steps = static_cast<int>(chunk_count / kLanes);
  const uint32_t tail_lanes = static_cast<uint32_t>(chunk_count % kLanes);
  const uint8_t* lane_input = args.input + (first + lane) * sizeof(Bits);
  auto load = [&](int k) { return LoadElement<Split, kAligned>(lane_input, uint64_t(k) * kLanes); };
  constexpr int kBatch = 16;
  auto load_batch = [&](int batch_end, Bits (&batch)[kBatch]) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) batch[j] = load(batch_end - 1 - j);
  };
  // The first whole batch (the coder runs backwards: the last one of the chunk) loads while the
  // table does.
  const int batches_end = full_steps - full_steps % kBatch;
  Bits current[kBatch], next[kBatch];
  if (batches_end > 0) load_batch(batches_end, current);

  // The lane's start state carries the raw parts of its last elements (loaded beside the table).
  const uint32_t carried_raw =
      args.layout.carried_steps == 0 ? 0 : CarriedRaw<Split, kAligned>(args, first, chunk_count, lane);

  const uint32_t tile = (group * kEncodeWarps) >> args.layout.tile_chunks_log2;
  const uint32_t tile_table_bytes = args.tiles.table_bytes[tile];  // 0: the tile codes with the global table
  const EncoderSymbol* table =
      tile_table_bytes != 0 ? args.tiles.symbols + uint64_t{tile} * kAlphabetSize : ws->symbols;
  for (uint32_t s = threadIdx.x; s < kAlphabetSize; s += blockDim.x) symbols[s] = table[s];
  __syncthreads();

  uint16_t* words = args.scratch + first;
  const uint32_t higher_lanes = ~0u << lane << 1;  // lanes above this one write first in a step
  uint32_t x = LaneStartState(carried_raw, args.layout.carried_steps);
  uint32_t emitted = 0;
  // One step of the 32 lanes: renormalise (emitting 16 bits) where needed, then code. The word
  // is stored from the state as it was, after the next state is made, not before the state's
  // register is shifted in place: a store reads its register late, and that shift waited on it
  // (the step's largest stall in Nsight Compute's samples at 16 MB; without it, bf16 compress
  // ran 8-9 % faster at 1 and 16 MB, RESULTS.md, session 45).
  auto code_step = [&](bool active, Bits value) {
    const EncoderSymbol sym = symbols[Split::Symbol(value)];
    const uint32_t before = x;
    const bool emit = active && before >= sym.renorm_limit;
    const uint32_t ballot = __ballot_sync(~0u, emit);
    const uint32_t slot = emitted + __popc(ballot & higher_lanes);
    x = emit ? before >> 16 : before;
    emitted += __popc(ballot);
    if (active) x = EncodeStep(x, sym);
    StoreWordIf(emit, words, slot, static_cast<uint16_t>(before));
  };
  // First the chunk's last, partial step, then the full steps after the last whole batch, then
  // whole batches, each coded while the next one's elements load, so that memory latency stays
  // off the coder's critical path.
  if (tail_lanes != 0) {
    const bool active = lane < tail_lanes;
    code_step(active, active ? load(full_steps) : Bits{0});
  }
  int end = full_steps;
  for (; end > batches_end; --end) code_step(true, load(end - 1));
  for (; end > 0; end -= kBatch) {
    if (end > kBatch) load_batch(end - kBatch, next);
#pragma unroll
    for (int j = 0; j < kBatch; ++j) code_step(true, current[j]);
#pragma unroll
    for (int j = 0; j < kBatch; ++j) current[j] = next[j];
  }
  // The final states go to the warp's state area in shared memory (chunk_states.h): first the
  // codes, from which each lane finds where its bits go, as a decoder finds where they are.
  uint32_t* area = state_areas[warp];
  for (uint32_t i = lane; i < kChunkMaxStateWords + 1; i += 32) area[i] = 0;
  __syncwarp();
  atomicOr(&area[lane / 8], StateCode(x) << 4 * (lane % 8));
  __syncwarp();
  const LaneStatePlacement placement = PlaceLaneState(x, lane, CodesBelow(area, lane));
  const uint32_t state_bytes = ChunkStateBytes(CodesBelow(area, kLanes));
  atomicOr(&area[placement.word], placement.low);
  if (placement.high != 0) atomicOr(&area[placement.word + 1], placement.high);
  // The state area and the words, padded to a whole 4 bytes with a zero word.
  const uint32_t padded_words = emitted + ((state_bytes / 2 + emitted) & 1);
  const uint32_t chunk_bytes = state_bytes + 2 * padded_words;
  const bool starts_tile = (chunk & ((1u << args.layout.tile_chunks_log2) - 1)) == 0;
  const uint32_t placed_table_bytes = starts_tile ? tile_table_bytes : 0;  // placed before this chunk
  const uint32_t scanned_bytes = placed_table_bytes + chunk_bytes;
  // The look-back sums 4-byte units, as the index counts them (both sizes are multiples of 4): in
  // bytes its u32 wrapped past 4 GiB of coded symbols, which frames of more than 2^32 elements
  // may hold (kMaxFrameCount), and placed chunks over earlier ones.
  if (lane == 0) chunk_units[warp] = has_chunk ? scanned_bytes / 4 : 0;
  __syncthreads();
  // The group's place comes from one look-back over the groups (CUB's scan tiles: one per
  // group), run by the first warp; each chunk's from its predecessors in the group.
  if (warp == 0) {
    uint32_t group_units = 0;
    for (uint32_t w = 0; w < kEncodeWarps; ++w) group_units += chunk_units[w];
    if (group == 0) {
      if (lane == 0) {
        args.chunk_scan.SetInclusive(0, group_units);
        group_place_units = 0;
      }
    } else {
      ChunkPrefixOp prefix(args.chunk_scan, prefix_storage, cuda::std::plus<uint32_t>(), group);
      prefix(group_units);
      __syncwarp();
      if (lane == 0) group_place_units = prefix.GetExclusivePrefix();
    }
  }
  __syncthreads();
  if (!has_chunk) return;
  uint32_t place_units = group_place_units;  // of the table placed before the chunk, if any, else of the chunk
  for (uint32_t w = 0; w < warp; ++w) place_units += chunk_units[w];
  const uint64_t place = uint64_t{place_units} * 4;
  // The mode decision bounds the total below the capacity (and a tile's own table only lowers
  // the bound); a violation is recorded, not written.
  if (place + scanned_bytes > args.layout.coded_capacity) {
    if (lane == 0) atomicExch(&ws->encode_error, 1u);
    return;
  }
  uint8_t* coded = args.frame + args.layout.coded_offset;
  if (starts_tile) PlaceTileTable(args, tile, placed_table_bytes, place, coded);
  const uint64_t offset = place + placed_table_bytes;
  uint8_t* out = coded + offset;
  if (lane == 0) {
    reinterpret_cast<uint32_t*>(args.frame + args.layout.index_offset)[chunk] = static_cast<uint32_t>(offset / 4);
  }
  // The scratch words written by other lanes, and the state area's bits, are visible from here
  // on; the compiler, which does not see StoreWordIf's stores, keeps the reads below after it.
  asm volatile("" ::: "memory");
  __syncwarp();
  const auto* area_halves = reinterpret_cast<const uint16_t*>(area);
  for (uint32_t i = lane; i < state_bytes / 2; i += 32) reinterpret_cast<uint16_t*>(out)[i] = area_halves[i];
  uint16_t* out_words = reinterpret_cast<uint16_t*>(out + state_bytes);
  // Reversed copy, kCopyBatch loads in flight per lane: the scratch words sit in L2.
  constexpr uint32_t kCopyBatch = 8;
  for (uint32_t base = 0; base < padded_words; base += 32 * kCopyBatch) {
    uint16_t batch[kCopyBatch];
#pragma unroll
    for (uint32_t i = 0; i < kCopyBatch; ++i) {
      const uint32_t j = base + i * 32 + lane;
      batch[i] = j < emitted ? words[emitted - 1 - j] : 0;
    }
#pragma unroll
    for (uint32_t i = 0; i < kCopyBatch; ++i) {
      const uint32_t j = base + i * 32 + lane;
      if (j < padded_words) out_words[j] = batch[i];
    }
  }
  if (chunk == num_chunks - 1 && lane == 0) {
    auto* header = reinterpret_cast<Header*>(args.frame);
    header->coded_bytes = offset + chunk_bytes;
    header->frame_bytes = args.layout.coded_offset + header->coded_bytes;
  }
}

}  // namespace ucclzip::codec::gpu
