// Tile model: between the split and the encode kernels, one block per tile decides whether the
// tile codes with the global table or with a table of its own (format v2), from the tile's
// histogram, by the CPU reference's rule: its own table normalised like the global one
// (block_model.cuh), taken when TileTablePays. A tile that takes it gets the encoder's constants
// and the table's bytes (WriteTileTable's format) for the encode kernel to place in the frame.
#include "codec/frame_format.h"
#include "codec/gpu/block_model.cuh"
#include "codec/gpu/dependent_launch.cuh"
#include "codec/gpu/launch.h"
#include "codec/rans_model.h"

namespace ucclzip::codec::gpu {
namespace {

struct TileModelArgs {
  const uint8_t* frame;  // its global table, as the split stage wrote it
  uint64_t count;
  Layout layout;
  const DeviceWorkspace* workspace;  // the mode the split stage chose
  TileWorkspace tiles;
};

// Elements of `tile`: a whole tile's, but for the last tile, which may be shorter.
__device__ uint64_t ElementsOfTile(const TileModelArgs& args, uint32_t tile) {
  const uint64_t tile_elements = TileElements(args.layout);
  return min(tile_elements, args.count - tile * tile_elements);
}

// Stores the tile's own table, one symbol `freq` per thread, for the encoder (its constants)
// and for the frame (its bytes, as WriteTileTable writes them: the bitmap of the `present`
// symbols, their frequencies in symbol order, a zero pad word if `present` is odd).
__device__ void StoreOwnTable(const TileModelArgs& args, uint32_t tile, uint32_t freq, uint32_t present,
                              ModelStorage& storage) {
  const uint32_t s = threadIdx.x;
  const bool listed = freq != 0;
  // One scan gives the symbol's first slot (low half: the frequencies sum to 2^12 < 2^16) and its
  // rank among the present symbols (high half), which places its frequency in the table.
  const uint32_t prefix = BlockExclusiveSum(freq | uint32_t{listed} << 16, storage);
  const uint32_t start = prefix & 0xFFFF, rank = prefix >> 16;
  if (listed) args.tiles.symbols[uint64_t{tile} * kAlphabetSize + s] = MakeEncoderSymbol(start, freq);
  uint8_t* table = args.tiles.tables + uint64_t{tile} * kMaxTileTableBytes;
  // A warp's ballot is the bitmap's 32 bits of its symbols, in the order of a little-endian word.
  const uint32_t bitmap_word = __ballot_sync(~0u, listed);
  if (s % 32 == 0) reinterpret_cast<uint32_t*>(table)[s / 32] = bitmap_word;
  auto* freqs = reinterpret_cast<uint16_t*>(table + kTileBitmapBytes);
  if (listed) freqs[rank] = static_cast<uint16_t>(freq);
  if (s == 0) {
    if (present % 2 != 0) freqs[present] = 0;
    args.tiles.table_bytes[tile] = TileTableBytes(present);
  }
}

__global__ void __launch_bounds__(kModelThreads) TileModelKernel(TileModelArgs args) {
  WaitForPriorKernel();  // the split kernel's histograms, table and mode
  __shared__ ModelStorage storage;
  const uint32_t tile = blockIdx.x, s = threadIdx.x;
  uint32_t* histogram = args.tiles.histograms + uint64_t{tile} * kAlphabetSize;
  const uint32_t count = histogram[s];
  histogram[s] = 0;  // ready for the next call, whatever the mode
  // Tiles matter only in rANS mode, which the split stage has chosen on the device.
  if (static_cast<Mode>(args.workspace->mode_word & 0xFF) != Mode::kSplitRans) return;

  const SymbolModel own = NormalizeSymbol(count, ElementsOfTile(args, tile), storage);
  const uint32_t global_freq = reinterpret_cast<const uint16_t*>(args.frame + args.layout.table_offset)[s];
  const uint64_t own_cost = BlockCostBoundQ16(count, own.freq, storage);
  const uint64_t global_cost = BlockCostBoundQ16(count, global_freq, storage);
  if (TileTablePays(own_cost, own.present, global_cost)) {
    StoreOwnTable(args, tile, own.freq, own.present, storage);
  } else if (s == 0) {
    args.tiles.table_bytes[tile] = 0;
  }
}

}  // namespace

cudaError_t LaunchTileModel(const CompressLaunch& launch) {
  const TileModelArgs args{launch.frame, launch.count, launch.layout, launch.workspace, launch.tiles};
  return LaunchAfterPriorKernel(launch.dependent_launch, TileModelKernel, launch.layout.num_tiles, kModelThreads,
                                launch.stream, args);
}

cudaError_t PreloadTileModelKernel() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, TileModelKernel);
}

// Every codec kernel is compiled with the same architectures, so the tile model's PTX version
// stands for the encode kernels' too.
cudaError_t DependentLaunchAllowed(bool* allowed) {
  *allowed = false;
  int device = 0, major = 0;
  cudaFuncAttributes attributes;
  for (cudaError_t err : {cudaGetDevice(&device), cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
                          cudaFuncGetAttributes(&attributes, TileModelKernel)}) {
    if (err != cudaSuccess) return err;
  }
  *allowed = major >= 9 && attributes.ptxVersion >= 90;
  return cudaSuccess;
}

}  // namespace ucclzip::codec::gpu
