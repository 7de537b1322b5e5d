// Streams one chunk (its state area, then its 16-bit renormalisation words) through a small
// per-warp ring in shared memory. Windows are copied with cp.async several windows ahead of the
// reader, so the decoder's critical path reads shared memory, never global memory, whatever the
// chunk's size.
#pragma once

#include <cuda_pipeline.h>

#include <cstdint>

namespace ucclzip::codec::gpu {

class WordRing {
 public:
  static constexpr uint32_t kWindowBytes = 512;
  static constexpr uint32_t kWindows = 4;
  static constexpr uint32_t kRingBytes = kWindowBytes * kWindows;

  // `ring` is this warp's kRingBytes of shared memory; `words` the chunk's start (4-byte
  // aligned) and `word_count` how many u16 words the chunk holds. Called by the whole warp.
  __device__ WordRing(uint8_t* ring, const uint8_t* words, uint32_t word_count)
      : ring_(ring), base_(words - (reinterpret_cast<uintptr_t>(words) & 15)) {
    skip_bytes_ = static_cast<uint32_t>(words - base_);
    end_bytes_ = skip_bytes_ + 2 * word_count;
    total_windows_ = (end_bytes_ + kWindowBytes - 1) / kWindowBytes;
    Refill(0);
  }

  // Makes words [first, first + 32) readable (those within the chunk). Warp-uniform.
  __device__ __forceinline__ void Ensure(uint32_t first) { WaitFor(first + 31); }

  // Issues what the ring has room for, then makes words [first, first + span) readable, those
  // within the chunk: a word past its end reads as whatever the ring holds (the caller finds
  // out from its count of words read). span <= (kWindows - 1) * kWindowBytes / 2, so that the
  // span fits in the windows the ring can hold ahead of `first`.
  __device__ __forceinline__ void EnsureSpan(uint32_t first, uint32_t span) {
    Refill(first);
    WaitFor(first + span - 1);
  }

  // Waits until the word `last` (and all before it, within the chunk) has landed.
  __device__ __forceinline__ void WaitFor(uint32_t last) {
    const uint32_t last_byte = skip_bytes_ + 2 * last;
    const uint32_t needed = min(last_byte / kWindowBytes, total_windows_ - 1);
    if (needed < ready_windows_) return;
    __pipeline_wait_prior(issued_ - 1 - needed);  // groups issued after `needed` may stay in flight
    __syncwarp();
    ready_windows_ = needed + 1;
  }

  __device__ __forceinline__ uint16_t Word(uint32_t i) const {
    return reinterpret_cast<const uint16_t*>(ring_)[((skip_bytes_ >> 1) + i) % (kRingBytes / 2)];
  }

  // The i-th little-endian u32 from the first word (4-byte aligned, as the ring's start is).
  __device__ __forceinline__ uint32_t Word32(uint32_t i) const {
    return reinterpret_cast<const uint32_t*>(ring_)[((skip_bytes_ >> 2) + i) % (kRingBytes / 4)];
  }

  // Issues each window whose slot the reader has left: window w reuses the slot of window
  // w - kWindows, which is free once every word before `consumed` lies past it.
  __device__ __forceinline__ void Refill(uint32_t consumed) {
    const uint32_t position = skip_bytes_ + 2 * consumed;
    while (issued_ < total_windows_ && issued_ * kWindowBytes <= position + (kWindows - 1) * kWindowBytes) {
      Issue(issued_++);
    }
  }

 private:
  __device__ void Issue(uint32_t window) {
    // The slot held window - kWindows, whose words some lanes may have read just now: every lane
    // is past its reads before any copy into the slot is issued (the lanes of a warp need not
    // run in step). Issue is only reached with the whole warp (Refill is warp-uniform).
    __syncwarp();
    const uint32_t lane = threadIdx.x & 31;
    const uint32_t lo = window * kWindowBytes;
    const uint32_t hi = min(lo + kWindowBytes, end_bytes_);
    const uint32_t vector_hi = max(lo, min(hi, end_bytes_ & ~15u));  // never read past the chunk
    uint8_t* slot = ring_ + (window % kWindows) * kWindowBytes;
    for (uint32_t at = lo + lane * 16; at + 16 <= vector_hi; at += 32 * 16) __pipeline_memcpy_async(slot + (at - lo), base_ + at, 16);
    for (uint32_t at = vector_hi + lane * 4; at < hi; at += 32 * 4) __pipeline_memcpy_async(slot + (at - lo), base_ + at, 4);
    __pipeline_commit();
  }

  uint8_t* ring_;
  const uint8_t* base_;
  uint32_t skip_bytes_;
  uint32_t end_bytes_;
  uint32_t total_windows_;
  uint32_t issued_ = 0;
  uint32_t ready_windows_ = 0;
};

}  // namespace ucclzip::codec::gpu
