// How each element type is split into one coded byte (the symbol) and a raw remainder.
//
// 16-bit floats: the symbol is bits 14..7 -- bf16's whole exponent; fp16's 5 exponent bits plus
// its top 3 mantissa bits, which are far from uniform on real weights. The raw byte is the sign
// and the low 7 bits. fp32: the symbol is the exponent, the raw part the sign and 23 mantissa
// bits (3 bytes). fp8: the whole byte is the symbol and there is no raw plane.
#pragma once

#include <cstdint>

#include "codec/host_device.h"

namespace ucclzip::codec {

struct Split16 {
  using Bits = uint16_t;
  static constexpr uint32_t kRawWidth = 1;
  UZ_HD static uint32_t Symbol(Bits v) { return (v >> 7) & 0xFF; }
  UZ_HD static uint32_t Raw(Bits v) { return ((v >> 8) & 0x80) | (v & 0x7F); }
  UZ_HD static Bits Join(uint32_t raw, uint32_t symbol) {
    return static_cast<Bits>(((raw & 0x80) << 8) | (symbol << 7) | (raw & 0x7F));
  }
};

struct Split32 {
  using Bits = uint32_t;
  static constexpr uint32_t kRawWidth = 3;
  UZ_HD static uint32_t Symbol(Bits v) { return (v >> 23) & 0xFF; }
  UZ_HD static uint32_t Raw(Bits v) { return ((v >> 8) & 0x800000) | (v & 0x7FFFFF); }
  UZ_HD static Bits Join(uint32_t raw, uint32_t symbol) {
    return ((raw & 0x800000) << 8) | (symbol << 23) | (raw & 0x7FFFFF);
  }
};

struct Split8 {
  using Bits = uint8_t;
  static constexpr uint32_t kRawWidth = 0;
  UZ_HD static uint32_t Symbol(Bits v) { return v; }
  UZ_HD static uint32_t Raw(Bits) { return 0; }
  UZ_HD static Bits Join(uint32_t, uint32_t symbol) { return static_cast<Bits>(symbol); }
};

// The exponent field alone, for the entropy bound the benchmarks report (bound_ratio).
struct ExponentField {
  uint32_t shift;
  uint32_t bits;
};

}  // namespace ucclzip::codec
