// Expands a validated frequency table into the decoder's 4096 slot entries.
#pragma once

#include <cstdint>

#include "codec/frame_format.h"
#include "codec/rans_model.h"

namespace ucclzip::codec {

// `slots` receives kProbScale entries; `freqs` must have passed CheckTable.
inline void BuildDecodeTable(const uint16_t* freqs, uint32_t* slots) {
  uint32_t start = 0;
  for (uint32_t s = 0; s < kAlphabetSize; ++s) {
    for (uint32_t i = 0; i < freqs[s]; ++i) slots[start + i] = MakeDecoderEntry(s, freqs[s], i);
    start += freqs[s];
  }
}

}  // namespace ucclzip::codec
