// The codec's device-side state between the split, encode and decode kernels of one stream.
// Counters are left at zero by the kernel that consumes them, so no memset precedes a call.
#pragma once

#include <cub/agent/single_pass_scan_operators.cuh>

#include <cstddef>
#include <cstdint>

#include "codec/rans_model.h"

namespace ucclzip::codec::gpu {

// Decoupled look-back over the chunks' coded sizes (CUB's single-pass scan machinery).
using ChunkScanState = cub::ScanTileState<uint32_t>;

struct DeviceWorkspace {
  unsigned long long histogram[kAlphabetSize];  // zero between calls
  uint32_t split_blocks_done;                   // zero between calls
  uint32_t encode_ticket;                       // zero between calls
  uint32_t mode_word;                           // Mode | constant_symbol << 8, set by the split stage
  // The error words, side by side: GpuCodec::QueueStatusRead copies both to pinned host memory.
  uint32_t encode_error;  // non-zero if an encoder bound was violated
  uint32_t decode_error;  // first decode error word since last read
  EncoderSymbol symbols[kAlphabetSize];
};
static_assert(offsetof(DeviceWorkspace, decode_error) == offsetof(DeviceWorkspace, encode_error) + sizeof(uint32_t),
              "the error words are copied out together");

}  // namespace ucclzip::codec::gpu
