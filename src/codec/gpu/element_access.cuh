// Element and raw-plane access for the GPU kernels. User buffers may sit at any byte address
// (kAligned = false reads and writes them byte by byte); frames are 16-byte aligned.
#pragma once

#include <cstdint>

#include "codec/gpu/device_workspace.h"

namespace ucclzip::codec::gpu {

template <typename Split, bool kAligned>
__device__ __forceinline__ typename Split::Bits LoadElement(const uint8_t* base, uint64_t i) {
  using Bits = typename Split::Bits;
  if constexpr (kAligned) {
    return reinterpret_cast<const Bits*>(base)[i];
  } else {
    Bits v = 0;
#pragma unroll
    for (uint32_t b = 0; b < sizeof(Bits); ++b) v |= static_cast<Bits>(Bits{base[i * sizeof(Bits) + b]} << (8 * b));
    return v;
  }
}

template <typename Split, bool kAligned>
__device__ __forceinline__ void StoreElement(uint8_t* base, uint64_t i, typename Split::Bits v) {
  using Bits = typename Split::Bits;
  if constexpr (kAligned) {
    reinterpret_cast<Bits*>(base)[i] = v;
  } else {
#pragma unroll
    for (uint32_t b = 0; b < sizeof(Bits); ++b) base[i * sizeof(Bits) + b] = static_cast<uint8_t>(v >> (8 * b));
  }
}

template <typename Split>
__device__ __forceinline__ void StoreRaw(uint8_t* raw_plane, uint64_t i, uint32_t raw) {
  if constexpr (Split::kRawWidth > 0) {
#pragma unroll
    for (uint32_t b = 0; b < Split::kRawWidth; ++b) raw_plane[i * Split::kRawWidth + b] = static_cast<uint8_t>(raw >> (8 * b));
  }
}

template <typename Split>
__device__ __forceinline__ uint32_t LoadRaw(const uint8_t* raw_plane, uint64_t i) {
  uint32_t raw = 0;
  if constexpr (Split::kRawWidth > 0) {
#pragma unroll
    for (uint32_t b = 0; b < Split::kRawWidth; ++b) raw |= uint32_t{raw_plane[i * Split::kRawWidth + b]} << (8 * b);
  }
  return raw;
}

// Raw parts of kN consecutive elements starting at a multiple of kN, in as few stores as the
// alignment allows (8 bytes for 16-bit types, three words for fp32).
template <typename Split, uint32_t kN>
__device__ __forceinline__ void StoreRawVector(uint8_t* raw_plane, uint64_t first, const typename Split::Bits* v) {
  if constexpr (Split::kRawWidth == 1) {
    uint64_t packed = 0;
#pragma unroll
    for (uint32_t j = 0; j < kN; ++j) packed |= uint64_t{Split::Raw(v[j])} << (8 * j);
    static_assert(kN == 8, "16-bit types split 8 elements per 16-byte vector");
    *reinterpret_cast<uint64_t*>(raw_plane + first) = packed;
  } else if constexpr (Split::kRawWidth == 3) {
    static_assert(kN == 4, "fp32 splits 4 elements per 16-byte vector");
    uint32_t r[4];
#pragma unroll
    for (uint32_t j = 0; j < 4; ++j) r[j] = Split::Raw(v[j]);
    uint32_t* out = reinterpret_cast<uint32_t*>(raw_plane + first * 3);
    out[0] = r[0] | (r[1] << 24);
    out[1] = (r[1] >> 8) | (r[2] << 16);
    out[2] = (r[2] >> 16) | (r[3] << 8);
  }
}

// Resets slot `t` of the chunk scan (t counts CUB's warp of padding slots first).
__device__ __forceinline__ void InitChunkScanSlot(ChunkScanState state, uint32_t t) {
  ChunkScanState::TileDescriptor descriptor{};
  descriptor.status = t < ChunkScanState::TILE_STATUS_PADDING ? cub::SCAN_TILE_OOB : cub::SCAN_TILE_INVALID;
  state.d_tile_descriptors[t] = *reinterpret_cast<ChunkScanState::TxnWord*>(&descriptor);
}

}  // namespace ucclzip::codec::gpu
