// Decode stage, in one kernel for every mode. Each block checks the header against what the
// caller expects before touching anything else; in rANS mode it checks the global table, then
// decodes a run of groups of kDecodeWarps consecutive chunks, one chunk per warp (its words
// streamed through a shared-memory ring), joining symbols with the raw plane as they go. The
// 4096-entry slot table in shared memory holds the table of the group's tile (the global one or
// the tile's own, read and checked when the block first needs it). Any check that fails records
// an error word and stops the work that depended on it.
//
// Every decoded element goes through a store (DecodeFrame's `Store`): StoreDecoded writes it to
// the output, which is DecodeKernel; combine_kernel.cuh's store combines it with the caller's
// element first, which fuses a reduction into the decode.
#pragma once

#include <cuda_pipeline.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "codec/chunk_states.h"
#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "codec/gpu/element_access.cuh"
#include "codec/gpu/word_ring.cuh"
#include "codec/rans_model.h"

namespace ucclzip::codec::gpu {

inline constexpr int kDecodeThreads = 128;
inline constexpr int kDecodeWarps = kDecodeThreads / 32;
inline constexpr size_t kDecodeSharedBytes = kProbScale * 4 + kDecodeWarps * WordRing::kRingBytes;

struct DecodeArgs {
  const uint8_t* frame;
  uint64_t frame_capacity;
  uint8_t dtype;
  uint32_t element_size;
  bool splittable;  // false for types that are only ever stored
  uint8_t* output;
  uint64_t count;
  uint32_t* error_word;
};

__device__ __forceinline__ void RecordError(uint32_t* error_word, uint32_t error) {
  atomicCAS(error_word, 0u, error);
}

// A store takes element i as `store(i, bits, operand)`, where `operand = store.Load(i)` is what
// it needs of the element besides its bits, loaded ahead by the decoder (with the raw parts of
// the next steps, so that its latency hides behind this step's decoding); `store.At(first)` is
// the store for the elements from `first` on, as one lane addresses them; `store.Stored(...)`
// handles a stored frame's elements.
template <typename Split, bool kAligned>
struct StoreDecoded {
  using Bits = typename Split::Bits;
  struct Operand {};  // nothing: the element is stored as decoded
  uint8_t* output;

  __device__ __forceinline__ StoreDecoded At(uint64_t first) const { return {output + first * sizeof(Bits)}; }
  __device__ __forceinline__ Operand Load(uint64_t) const { return {}; }
  __device__ __forceinline__ void operator()(uint64_t i, Bits v, Operand) const {
    StoreElement<Split, kAligned>(output, i, v);
  }
  // Copies a stored frame's elements; raw_offset is 16-byte aligned in the (aligned) frame, so
  // the copies are of 16 bytes where the output is aligned too. Byte-wise: stored-only types of
  // any width share Split8's kernel.
  __device__ __forceinline__ void Stored(const uint8_t* frame, const Header& h, uint64_t thread,
                                         uint64_t threads) const {
    uint64_t done = 0;
    if ((reinterpret_cast<uintptr_t>(output) & 15) == 0) {
      const auto* src = reinterpret_cast<const uint4*>(frame + h.raw_offset);
      auto* dst = reinterpret_cast<uint4*>(output);
      for (uint64_t v = thread; v < h.raw_bytes / 16; v += threads) dst[v] = src[v];
      done = h.raw_bytes & ~uint64_t{15};
    }
    for (uint64_t i = done + thread; i < h.raw_bytes; i += threads) output[i] = frame[h.raw_offset + i];
  }
};

template <typename Split, typename Store>
__device__ void DecodeChunk(const DecodeArgs& args, const Header& h, const Layout& layout, const uint32_t* slots,
                            uint8_t* ring_memory, uint32_t chunk, const Store& store) {
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t chunk_elements = uint64_t{kLanes} << h.lane_symbols_log2;
  // Lane 0 reads the extent and the warp takes its word for it: every lane then takes the same
  // branches (and reaches the same warp-wide calls) whatever the frame's bytes do.
  uint32_t begin = 0, end = 0;
  const bool located = __shfl_sync(~0u, lane == 0 && LocateChunk(args.frame, layout, h.coded_bytes, chunk, begin, end), 0);
  begin = __shfl_sync(~0u, begin, 0);
  end = __shfl_sync(~0u, end, 0);
  if (!located) {
    if (lane == 0) RecordError(args.error_word, MakeErrorWord(DecodeError::kBadIndex, chunk));
    return;
  }
  // The ring streams the whole chunk, its state area first: the states come from shared memory
  // once the first window lands, and words are counted from the chunk's start, so that the pad
  // word's rule (an odd count) needs no offset.
  const uint8_t* chunk_data = args.frame + h.coded_offset + uint64_t{begin} * 4;
  const uint32_t available = (end - begin) * 2;
  WordRing words(ring_memory, chunk_data, available);
  words.WaitFor(kChunkMaxStateBytes / 2 - 1);  // the state area lies in the first window
  uint32_t codes[kStateCodeWords];
#pragma unroll
  for (uint32_t w = 0; w < kStateCodeWords; ++w) codes[w] = words.Word32(w);
  const uint32_t code_sum = CodesBelow(codes, kLanes);
  const uint32_t state_bytes = ChunkStateBytes(code_sum);
  // Every lane reads the same bytes, so the verdict is the warp's.
  if (state_bytes > 2 * available || (words.Word(state_bytes / 2 - 1) & StatePadMask(code_sum)) != 0) {
    if (lane == 0) RecordError(args.error_word, MakeErrorWord(DecodeError::kCorruptStream, chunk));
    __pipeline_wait_prior(0);  // leave no copy in flight into memory the next chunk reuses
    return;
  }
  struct RingWords {
    const WordRing& ring;
    __device__ uint32_t operator[](uint32_t i) const { return ring.Word32(i); }
  };
  uint32_t x = ReadLaneState(RingWords{words}, lane, CodesBelow(codes, lane));
  const uint32_t lower_lanes = (1u << lane) - 1;
  const uint64_t first = chunk * chunk_elements;
  const uint64_t chunk_count = min(chunk_elements, h.count - first);
  const uint8_t* lane_raw = args.frame + h.raw_offset + (RawPlaneIndex(layout, first) + lane) * Split::kRawWidth;
  const Store lane_store = store.At(first + lane);
  const int full_steps = static_cast<int>(chunk_count / kLanes);
  const int steps = static_cast<int>(DivCeil(chunk_count, kLanes));
  const uint32_t tail_lanes = static_cast<uint32_t>(chunk_count % kLanes);
  // The lane's last `carried` steps take their raw parts from its end state (format version 3):
  // their symbols wait in `carried_symbols`, the last one lowest, and are joined after the loop.
  const uint32_t lane_steps = LaneElements(chunk_count, lane);
  const uint32_t carried = min(lane_steps, layout.carried_steps);
  const int kept_steps = static_cast<int>(lane_steps - carried);
  uint32_t carried_symbols = 0;
  uint32_t consumed = state_bytes / 2;
  // One step of the 32 lanes. kChecked: some lanes may be past the chunk's end, and the ring is
  // topped up and the chunk's bounds checked at every step; returns false on a read past the
  // chunk. Otherwise the caller has made the batch's words readable: a lane reads the word it
  // would take if it were the step's first to refill (consumed + lane) before its state is
  // known, and the lane that refills takes its own word from the lane its rank names, with a
  // shuffle, so that no address arithmetic or shared-memory load sits between the ballot and the
  // next state. A corrupt chunk may read past its words there; it then reads stale ring bytes
  // (never outside the ring) and fails the end-of-chunk check.
  using Operand = typename Store::Operand;
  auto decode_step = [&]<bool kChecked>(int k, uint32_t raw, Operand operand) -> bool {
    const bool active = !kChecked || k < full_steps || lane < tail_lanes;
    const uint32_t candidate = kChecked ? 0 : words.Word(consumed + lane);
    const uint32_t entry = slots[x & (kProbScale - 1)];
    uint32_t next = DecodeStep(x, entry);
    const bool refill = active && next < kStateLow;
    const uint32_t ballot = __ballot_sync(~0u, refill);
    const uint32_t rank = __popc(ballot & lower_lanes);
    if constexpr (kChecked) {
      if (ballot != 0) {
        if (consumed + __popc(ballot) > available) return false;
        words.Ensure(consumed);
      }
      if (refill) next = (next << 16) | words.Word(consumed + rank);
    } else {
      const uint32_t word = __shfl_sync(~0u, candidate, rank);
      if (refill) next = (next << 16) | word;
    }
    consumed += __popc(ballot);
    if constexpr (kChecked) words.Refill(consumed);
    if (active) {
      x = next;
      if (k < kept_steps) {
        lane_store(uint64_t(k) * kLanes, Split::Join(raw, EntrySymbol(entry)), operand);
      } else {
        carried_symbols = carried_symbols << 8 | EntrySymbol(entry);
      }
    }
    return true;
  };
  // Batches of kBatch steps; the raw parts (and the store's operands) of the next batch load
  // while this one decodes. A batch that lies within the full steps runs unchecked, even where
  // it might read past the chunk's words (a sound chunk never does): only the last chunk's last
  // batch, with lanes past the frame's end, pays the checks of every step.
  constexpr int kBatch = 8;
  auto load_batch = [&](int k0, uint32_t (&batch)[kBatch], Operand (&operands)[kBatch]) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int k = k0 + j;
      const bool kept = k < kept_steps;  // an element of the lane whose raw part is in the plane
      batch[j] = kept ? LoadRaw<Split>(lane_raw, uint64_t(k) * kLanes) : 0;
      operands[j] = kept ? lane_store.Load(uint64_t(k) * kLanes) : Operand{};
    }
  };
  uint32_t raw[kBatch], next_raw[kBatch];
  Operand operands[kBatch], next_operands[kBatch];
  load_batch(0, raw, operands);
  bool corrupt = false;
  for (int k0 = 0; k0 < steps && !corrupt; k0 += kBatch) {
    load_batch(k0 + kBatch, next_raw, next_operands);
    if (k0 + kBatch <= full_steps) {
      words.EnsureSpan(consumed, kBatch * kLanes);
#pragma unroll
      for (int j = 0; j < kBatch; ++j) decode_step.template operator()<false>(k0 + j, raw[j], operands[j]);
    } else {
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (k0 + j >= steps || corrupt) break;
        corrupt = !decode_step.template operator()<true>(k0 + j, raw[j], operands[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) raw[j] = next_raw[j], operands[j] = next_operands[j];
  }
  // A sound chunk ends where the encoder began, with every word read but the pad.
  bool padded = false;
  if (!corrupt && consumed + 1 == available && (consumed & 1)) {
    words.Ensure(consumed);
    padded = words.Word(consumed) == 0;
  }
  __pipeline_wait_prior(0);  // leave no copy in flight into memory the next chunk reuses
  __syncwarp();
  constexpr uint32_t kRawBits = 8 * Split::kRawWidth;
  if (corrupt || !__all_sync(~0u, IsLaneStartState(x, carried, kRawBits, layout.carried_steps)) ||
      !(consumed == available || padded)) {
    if (lane == 0) RecordError(args.error_word, MakeErrorWord(DecodeError::kCorruptStream, chunk));
    return;
  }
  // The carried elements, from the raw parts the end state holds.
  for (uint32_t t = 0; t < carried; ++t) {
    const uint64_t at = uint64_t(lane_steps - 1 - t) * kLanes;
    const uint32_t raw = (x >> (t * kRawBits)) & ((1u << kRawBits) - 1);
    lane_store(at, Split::Join(raw, (carried_symbols >> (8 * t)) & 0xFF), lane_store.Load(at));
  }
}

// Fills the slot table from a checked frequency table. One scan gives each symbol its first
// slot and each present symbol its rank among them; warp w then expands present symbols w, w+4,
// ..., so that a warp's loop runs once per present symbol (a few dozen at most in weights), not
// once per symbol of the alphabet, each a dependent shared load and branch.
__device__ inline void BuildSlots(const uint16_t* freqs, uint32_t* slots) {
  using Scan = cub::BlockScan<uint32_t, kDecodeThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ uint32_t starts[kAlphabetSize];
  __shared__ uint8_t present[kAlphabetSize];
  __shared__ uint32_t present_count;
  // Slots in the high half, present symbols in the low one: a checked table's slots sum to
  // kProbScale and its symbols to at most 256, so neither half carries into the other.
  static_assert(kProbScale < (1u << 16) && kAlphabetSize < (1u << 16));
  uint32_t local[2], prefix[2], total;
  for (int j = 0; j < 2; ++j) {
    const uint32_t f = freqs[2 * threadIdx.x + j];
    local[j] = f << 16 | (f != 0);
  }
  Scan(scan).ExclusiveSum(local, prefix, total);
  for (int j = 0; j < 2; ++j) {
    const uint32_t s = 2 * threadIdx.x + j;
    starts[s] = prefix[j] >> 16;
    if (local[j] != 0) present[prefix[j] & 0xFFFF] = static_cast<uint8_t>(s);
  }
  if (threadIdx.x == 0) present_count = total & 0xFFFF;
  __syncthreads();
  const uint32_t lane = threadIdx.x & 31;
  for (uint32_t p = threadIdx.x / 32; p < present_count; p += kDecodeWarps) {
    const uint32_t s = present[p];
    const uint32_t f = freqs[s], start = starts[s];
    for (uint32_t i = lane; i < f; i += 32) slots[start + i] = MakeDecoderEntry(s, f, i);
  }
  __syncthreads();
}

// The block's sum of one value per thread, returned to every thread.
__device__ inline uint32_t DecodeBlockSum(uint32_t value) {
  using Reduce = cub::BlockReduce<uint32_t, kDecodeThreads>;
  __shared__ typename Reduce::TempStorage storage;
  __shared__ uint32_t result;
  const uint32_t sum = Reduce(storage).Sum(value);
  if (threadIdx.x == 0) result = sum;
  __syncthreads();
  const uint32_t all = result;
  __syncthreads();  // every thread has read it, and the reduction is done with its storage
  return all;
}

// This thread's two symbols of the global table (s and s + kDecodeThreads), as read from the
// frame, before they are checked.
struct GlobalTableEntries {
  uint32_t f0 = 0, f1 = 0;
};
__device__ inline GlobalTableEntries ReadGlobalTableEntries(const uint8_t* frame) {
  static_assert(2 * kDecodeThreads == kAlphabetSize);
  const auto* table = reinterpret_cast<const uint16_t*>(frame + kHeaderBytes);
  return {table[threadIdx.x], table[threadIdx.x + kDecodeThreads]};
}

// Puts the global table's entries, read by every thread, into `freqs` and checks the table as
// CheckTable does (frame_checks.h). Called by the whole block; the verdict goes to every thread.
__device__ inline bool CheckGlobalTable(GlobalTableEntries entries, uint16_t* freqs) {
  const uint32_t s0 = threadIdx.x, s1 = threadIdx.x + kDecodeThreads;
  const uint32_t f0 = entries.f0, f1 = entries.f1;
  freqs[s0] = static_cast<uint16_t>(f0);
  freqs[s1] = static_cast<uint16_t>(f1);
  const uint32_t present = __syncthreads_count(f0 != 0) + __syncthreads_count(f1 != 0);
  return DecodeBlockSum(f0 + f1) == kProbScale && present >= 2;
}

// Reads and checks the global table (a block that had other tables in `freqs` since).
__device__ inline bool LoadGlobalTable(const uint8_t* frame, uint16_t* freqs) {
  return CheckGlobalTable(ReadGlobalTableEntries(frame), freqs);
}

// Reads the own table of `tile` into `freqs` and checks it by ReadTileTable's rules
// (frame_checks.h). The block first copies the table's bytes into shared memory, and every
// decision is then made from that copy: the frame is untrusted, and a verdict that threads
// reached from their own reads of global memory could differ between them and leave some of
// them at a barrier that the others never reach. Called by the whole block; the verdict goes to
// every thread. Whatever the index holds, nothing is read outside [0, coded_bytes) of the coded
// area.
__device__ inline bool ReadOwnTable(const uint8_t* frame, const Layout& layout, uint64_t coded_bytes, uint32_t tile,
                                    uint16_t* freqs) {
  __shared__ uint64_t span[2];  // the table's offset in the coded area, and where its tile's first chunk begins
  __shared__ __align__(4) uint8_t bytes[kMaxTileTableBytes];
  if (threadIdx.x == 0) {
    span[0] = uint64_t{TileEntry(frame, layout, tile)} * 4;
    span[1] = uint64_t{ChunkEntry(frame, layout, tile << layout.tile_chunks_log2)} * 4;
  }
  __syncthreads();
  const uint64_t at = span[0], chunk_at = span[1];
  // (The next call's thread 0 rewrites the span only after a barrier of the caller's.)
  if (at + kTileBitmapBytes > chunk_at || chunk_at > coded_bytes) return false;
  const uint32_t size = static_cast<uint32_t>(min(chunk_at - at, uint64_t{kMaxTileTableBytes}));
  const uint8_t* table = frame + layout.coded_offset + at;
  for (uint32_t i = threadIdx.x; i < size; i += kDecodeThreads) bytes[i] = table[i];
  __syncthreads();
  // The bitmap as little-endian words: symbol s at bit s % 32 of word s / 32.
  const auto* bitmap = reinterpret_cast<const uint32_t*>(bytes);
  constexpr uint32_t kBitmapWords = kTileBitmapBytes / 4;
  uint32_t present = 0;
  for (uint32_t w = 0; w < kBitmapWords; ++w) present += __popc(bitmap[w]);
  bool sound = true;
  uint32_t sum = 0;
  for (uint32_t s = threadIdx.x; s < kAlphabetSize; s += kDecodeThreads) {
    const uint32_t word = bitmap[s / 32], bit = s % 32;
    uint32_t freq = 0;
    if ((word >> bit) & 1) {
      uint32_t rank = __popc(word & ((1u << bit) - 1));
      for (uint32_t w = 0; w < s / 32; ++w) rank += __popc(bitmap[w]);
      const uint32_t word_at = kTileBitmapBytes + 2 * rank;
      if (word_at + 2 <= size) {
        freq = bytes[word_at] | bytes[word_at + 1] << 8;
        sound = sound && freq != 0;
      } else {
        sound = false;
      }
    }
    freqs[s] = static_cast<uint16_t>(freq);
    sum += freq;
  }
  sound = __syncthreads_and(sound);
  sum = DecodeBlockSum(sum);
  if (!sound || present < 2 || sum != kProbScale || at + TileTableBytes(present) != chunk_at) return false;
  // An odd count's pad word lies inside the table, whose size has just been checked.
  return present % 2 == 0 || (bytes[kTileBitmapBytes + 2 * present] | bytes[kTileBitmapBytes + 2 * present + 1]) == 0;
}

// Puts the table of `tile`'s chunks in the slot table: the global table, or the tile's own, read
// and checked first (the global table only if `freqs` do not hold it, checked, already). Called
// by the whole block between groups; false, with the error recorded (detail: the tile + 1, as
// the CPU decoder gives it), if the own table is refused.
__device__ inline bool LoadTable(const uint8_t* frame, const Layout& layout, uint64_t coded_bytes, uint32_t tile,
                                 bool global, bool freqs_hold_global, uint16_t* freqs, uint32_t* slots,
                                 uint32_t* error_word) {
  __syncthreads();  // every warp is done with the slots (and freqs) of the table before
  const bool sound = global ? freqs_hold_global || LoadGlobalTable(frame, freqs)
                            : ReadOwnTable(frame, layout, coded_bytes, tile, freqs);
  if (!sound) {
    if (threadIdx.x == 0) RecordError(error_word, MakeErrorWord(DecodeError::kBadTable, tile + 1));
    return false;
  }
  __syncthreads();  // freqs are complete
  BuildSlots(freqs, slots);
  return true;
}

// The rANS chunks of a checked frame: each block decodes a run of groups of kDecodeWarps
// consecutive chunks, one chunk per warp. A group lies in one tile (a tile is a power of two of
// at least kDecodeWarps chunks), and consecutive groups mostly share their tile's table, which
// the slot table then keeps: the block loads a table only when its groups' table changes.
template <typename Split, typename Store>
__device__ void DecodeTiles(const DecodeArgs& args, const Header& h, const Layout& layout, uint16_t* freqs,
                            uint8_t* shared, const Store& store) {
  static_assert((kDecodeWarps & (kDecodeWarps - 1)) == 0 && kDecodeWarps <= (1 << kMinTileChunksLog2),
                "a group of chunks never straddles tiles");
  constexpr uint32_t kNoTable = kGlobalTableTile - 1;  // no tile has this number
  uint32_t* slots = reinterpret_cast<uint32_t*>(shared);
  uint8_t* ring = shared + kProbScale * 4 + (threadIdx.x / 32) * WordRing::kRingBytes;
  // Runs of equal length from the first block on, so that the blocks with work are consecutive
  // and spread over every multiprocessor: the grid is sized for the shortest lanes and often
  // has several times as many blocks as groups, and runs spread evenly over it (H200 run s13-3)
  // left every fourth multiprocessor with all the work of a 16 MB frame.
  // In 32 bits (a u32 count of chunks): a 64-bit division would sit on every block's setup path.
  const uint32_t num_groups = (layout.num_chunks + kDecodeWarps - 1) / kDecodeWarps;
  const uint32_t groups_per_block = (num_groups + gridDim.x - 1) / gridDim.x;
  const uint32_t first_group = static_cast<uint32_t>(min(uint64_t{num_groups}, uint64_t{blockIdx.x} * groups_per_block));
  const uint32_t end_group = min(num_groups, first_group + groups_per_block);
  // The table in the slots: kGlobalTableTile, the tile whose own table it is, or kNoTable (a
  // refused table leaves none, so each group of its tile is refused in turn). Every thread
  // decides from the same shared copy of the index entry, so every thread takes the same
  // branches to LoadTable.
  uint32_t loaded = kNoTable;
  bool freqs_hold_global = true;  // DecodeFrame has read and checked the global table into them
  // Each group's tile entry, read by thread 0 for the whole block (see ReadOwnTable), in two
  // places taken in turn: a group's barrier is passed only once every thread is done with the
  // place the next group's entry goes to.
  __shared__ uint32_t entries[2];
  for (uint32_t group = first_group; group < end_group; ++group) {
    const uint32_t first_chunk = group * kDecodeWarps;
    const uint32_t tile = first_chunk >> layout.tile_chunks_log2;
    if (threadIdx.x == 0) entries[group & 1] = TileEntry(args.frame, layout, tile);
    __syncthreads();
    const bool global = entries[group & 1] == kGlobalTableTile;
    const uint32_t table = global ? kGlobalTableTile : tile;
    if (table != loaded) {
      const bool sound =
          LoadTable(args.frame, layout, h.coded_bytes, tile, global, freqs_hold_global, freqs, slots, args.error_word);
      loaded = sound ? table : kNoTable;
      freqs_hold_global = global && sound;
    }
    const uint32_t chunk = first_chunk + threadIdx.x / 32;
    if (loaded != kNoTable && chunk < layout.num_chunks) DecodeChunk<Split>(args, h, layout, slots, ring, chunk, store);
  }
}

// The body of a decode kernel: checks, then every element of the frame through `store`.
template <typename Split, typename Store>
__device__ __forceinline__ void DecodeFrame(const DecodeArgs& args, const Store& store) {
  extern __shared__ __align__(16) uint8_t shared[];
  __shared__ Header h;
  __shared__ Layout layout;  // split frames
  __shared__ uint16_t freqs[kAlphabetSize];
  __shared__ uint32_t verdict;
  // Every thread reads its part of the global table while thread 0 reads the header, so that a
  // rANS frame's setup waits on one round trip to memory, not two. The bytes are the caller's
  // (within frame_capacity); they count only once the header has shown a rANS frame, which
  // puts its table there.
  const GlobalTableEntries table =
      args.frame_capacity >= kHeaderBytes + kTableBytes ? ReadGlobalTableEntries(args.frame) : GlobalTableEntries{};
  if (threadIdx.x == 0) {
    verdict = static_cast<uint32_t>(DecodeError::kTruncated);
    if (args.frame_capacity >= kHeaderBytes) {
      h = *reinterpret_cast<const Header*>(args.frame);
      const DecodeError e =
          CheckHeader(h, args.frame_capacity, args.dtype, args.count, args.element_size, args.splittable);
      verdict = MakeErrorWord(e, e == DecodeError::kBadVersion ? h.version : 0);  // the version, as the CPU names it
      if (verdict == 0 && static_cast<Mode>(h.mode) != Mode::kStored) {
        layout = ComputeLayout(args.element_size, true, h.count, 1u << h.lane_symbols_log2);
      }
    }
  }
  __syncthreads();
  const bool rans = verdict == 0 && static_cast<Mode>(h.mode) == Mode::kSplitRans;
  if (rans && !CheckGlobalTable(table, freqs) && threadIdx.x == 0) {
    verdict = static_cast<uint32_t>(DecodeError::kBadTable);
  }
  __syncthreads();
  if (verdict != 0) {
    if (threadIdx.x == 0) RecordError(args.error_word, verdict);
    return;
  }
  if (rans) return DecodeTiles<Split>(args, h, layout, freqs, shared, store);
  const uint64_t thread = blockIdx.x * uint64_t{kDecodeThreads} + threadIdx.x;
  const uint64_t threads = gridDim.x * uint64_t{kDecodeThreads};
  const Mode mode = static_cast<Mode>(h.mode);
  if (mode == Mode::kStored) {
    store.Stored(args.frame, h, thread, threads);
    return;
  }
  const uint8_t* raw_plane = args.frame + h.raw_offset;
  const uint8_t* symbols = args.frame + h.coded_offset;
  // Modes 1 and 2 keep the carried raw parts in the coded area, after any stored symbols.
  const uint8_t* carried_raw = symbols + (mode == Mode::kSplitStored ? h.count : 0);
  for (uint64_t i = thread; i < h.count; i += threads) {
    const uint32_t symbol = mode == Mode::kSplitConstant ? h.constant_symbol : symbols[i];
    const ChunkSpan chunk = ChunkSpanOf(layout, h.count, ChunkOf(layout, i));
    const uint32_t raw = i < chunk.first + chunk.kept ? LoadRaw<Split>(raw_plane, RawPlaneIndex(layout, i))
                                                      : LoadRaw<Split>(carried_raw, CarriedIndex(layout, i, chunk.n));
    store(i, Split::Join(raw, symbol), store.Load(i));
  }
}

// Decompress: the decoded elements to args.output.
template <typename Split, bool kAligned>
__global__ void __launch_bounds__(kDecodeThreads, 8) DecodeKernel(DecodeArgs args) {
  DecodeFrame<Split>(args, StoreDecoded<Split, kAligned>{args.output});
}

}  // namespace ucclzip::codec::gpu
