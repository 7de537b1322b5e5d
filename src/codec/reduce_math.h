// The element arithmetic of reductions, shared by the pipeline's CPU loop (reduce_host.cc) and
// CUDA kernel (reduce_device.cu) and by the GPU decoder that combines as it decodes
// (GpuCodec::DecompressAndCombine), so that every path gives the same bits. It lives in the
// codec, the lowest layer that uses it, because the codec may not depend on the pipeline.
//
// Rules (docs/COLLECTIVES.md): bf16, fp16 and fp8 are widened to fp32 exactly, combined in
// fp32 and rounded once, to nearest even (fp8 e4m3 saturates at +-448, as it has no infinity;
// the others overflow to infinity). fp32 and fp64 combine in their own type. Any NaN result is
// the type's canonical quiet NaN (sign clear), because CPUs and GPUs propagate NaN payloads
// differently. min and max return NaN if either operand is NaN, and order -0 below +0, so that
// every operator gives the same bits with its operands swapped. Integers wrap on overflow; avg
// divides the wrapped sum, truncating towards zero.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "codec/host_device.h"
#include "ucclzip/types.h"

namespace ucclzip::codec::reduce {

// The bits of one type read as another of the same size.
template <typename To, typename From>
UZ_HD To BitCast(From value) {
  static_assert(sizeof(To) == sizeof(From));
  To out;
  memcpy(&out, &value, sizeof(To));
  return out;
}
UZ_HD float BitsToFloat(uint32_t bits) { return BitCast<float>(bits); }
UZ_HD uint32_t FloatToBits(float value) { return BitCast<uint32_t>(value); }

// The conversions below have no branches (selects only), so that a loop over them vectorises:
// with the branchy ones before, an fp16 reduction ran at 0.2 GB/s on the CPU. They rely on
// IEEE fp32 arithmetic with subnormals (no flush to zero: neither the host build nor nvcc's
// default flushes).

// A minifloat with `kExp` exponent and `kMan` mantissa bits (bias 2^(kExp-1)-1) to fp32, exactly.
// `kHasInf`: the all-ones exponent is infinity/NaN (IEEE style); else only S.1111.111 is NaN (e4m3).
template <int kExp, int kMan, bool kHasInf>
UZ_HD float MinifloatToFloat(uint32_t bits) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr uint32_t kExpMask = (1u << kExp) - 1, kManMask = (1u << kMan) - 1;
  const uint32_t sign = (bits >> (kExp + kMan)) & 1;
  const uint32_t magnitude = bits & ((1u << (kExp + kMan)) - 1);
  const uint32_t exponent = magnitude >> kMan, mantissa = magnitude & kManMask;
  // The fields moved to fp32's places read as 2^(kBias - 127) times the value, normal or
  // subnormal (then an fp32 subnormal), so one exact multiply gives the value.
  const float scale = BitsToFloat(uint32_t(127 + 127 - kBias) << 23);  // 2^(127 - kBias)
  const uint32_t finite = FloatToBits(BitsToFloat(magnitude << (23 - kMan)) * scale);
  const bool special = exponent == kExpMask && (kHasInf || mantissa == kManMask);
  const uint32_t special_bits = (kHasInf && mantissa == 0) ? 0x7F800000u : 0x7FC00000u;
  return BitsToFloat((special ? special_bits : finite) | (sign << 31));
}

// fp32 to the minifloat, round to nearest even. Overflow gives infinity where the type has it,
// else the largest finite value; NaN gives the canonical NaN (positive).
template <int kExp, int kMan, bool kHasInf>
UZ_HD uint32_t FloatToMinifloat(float value) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr uint32_t kExpMask = (1u << kExp) - 1, kManMask = (1u << kMan) - 1;
  // Largest finite magnitude's fields: e4m3 reserves S.1111.111 for NaN.
  constexpr uint32_t kMaxFinite = kHasInf ? ((kExpMask - 1) << kMan) | kManMask : (kExpMask << kMan) | (kManMask - 1);
  constexpr uint32_t kInfinity = kHasInf ? kExpMask << kMan : kMaxFinite;
  constexpr uint32_t kNaN = kHasInf ? (kExpMask << kMan) | (1u << (kMan - 1)) : (kExpMask << kMan) | kManMask;
  constexpr int kDrop = 23 - kMan;
  const uint32_t bits = FloatToBits(value);
  const uint32_t sign = (bits >> 31) << (kExp + kMan);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  // Normal in the target (or overflowing): rebiased, then 23 - kMan bits dropped, rounding to
  // even. (Below the target's normal range this wraps; that lane takes the subnormal result.)
  const uint32_t rebiased = magnitude - (uint32_t(127 - kBias) << 23);
  const uint32_t normal = (rebiased + ((1u << (kDrop - 1)) - 1) + ((rebiased >> kDrop) & 1)) >> kDrop;
  // Subnormal in the target (or zero): adding a float whose last place is the target's smallest
  // subnormal rounds to nearest even in the FPU; its bits less the magic's are the fields (the
  // smallest normal's, 1 << kMan, where it rounds up into the normal range).
  constexpr uint32_t kMagicBits = uint32_t((127 - kBias) + kDrop + 1) << 23;
  const uint32_t subnormal = FloatToBits(BitsToFloat(magnitude) + BitsToFloat(kMagicBits)) - kMagicBits;
  const bool below_normal = magnitude < (uint32_t(127 - kBias + 1) << 23);
  uint32_t fields = below_normal ? subnormal : normal;
  fields = fields > kMaxFinite ? kInfinity : fields;  // infinity itself lands here too
  return magnitude > 0x7F800000u ? kNaN : sign | fields;
}

UZ_HD float Bf16ToFloat(uint16_t bits) { return BitsToFloat(uint32_t{bits} << 16); }
UZ_HD uint16_t FloatToBf16(float value) {
  uint32_t bits = FloatToBits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  bits += 0x7FFFu + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

// Whether a float or double has its sign bit set (-0 included).
template <typename T>
UZ_HD bool SignBit(T value) {
  if constexpr (sizeof(T) == 8) {
    return (BitCast<uint64_t>(value) >> 63) != 0;
  } else {
    return (FloatToBits(value) >> 31) != 0;
  }
}

// Combines two values of a floating-point type held as T (float or double). Every operator
// gives the same bits with its operands swapped: min takes -0 below +0 and max +0 above -0 (as
// IEEE 754-2019's minimum and maximum do), so that two ranks that combine the same pair from
// opposite ends agree (recursive doubling, docs/COLLECTIVES.md).
template <typename T>
UZ_HD T Combine(ReduceOp op, T a, T b) {
  if (a != a || b != b) return a + b;  // NaN; canonicalised by the caller
  switch (op) {
    case ReduceOp::kProd: return a * b;
    case ReduceOp::kMin: return (b < a || (b == a && SignBit(b))) ? b : a;
    case ReduceOp::kMax: return (b > a || (b == a && !SignBit(b))) ? b : a;
    default: return a + b;  // kSum, kAvg
  }
}

// Combines two integers of type T (wrapping: the arithmetic is done unsigned).
template <typename T, typename U>
UZ_HD T CombineInteger(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kProd: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case ReduceOp::kMin: return b < a ? b : a;
    case ReduceOp::kMax: return b > a ? b : a;
    default: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  }
}

template <typename T, typename U>
UZ_HD void ReduceInteger(const uint8_t* a, const uint8_t* b, uint8_t* out, ReduceOp op, uint32_t divisor) {
  T x, y;
  memcpy(&x, a, sizeof(T));
  memcpy(&y, b, sizeof(T));
  T r = CombineInteger<T, U>(op, x, y);
  if (divisor != 1) {
    // Divided in 64 bits: the divisor (a world size) may not fit T.
    if constexpr (std::is_signed_v<T>) {
      r = static_cast<T>(static_cast<int64_t>(r) / static_cast<int64_t>(divisor));
    } else {
      r = static_cast<T>(static_cast<uint64_t>(r) / divisor);
    }
  }
  memcpy(out, &r, sizeof(T));
}

// Element `a op b` (then / divisor) of `dtype`, bytes in and out (any alignment). `out` may be
// `a` or `b`.
UZ_HD void ReduceElement(DataType dtype, ReduceOp op, uint32_t divisor, const uint8_t* a, const uint8_t* b, uint8_t* out) {
  switch (dtype) {
    case DataType::kFloat64: {
      uint64_t x, y;
      memcpy(&x, a, 8);
      memcpy(&y, b, 8);
      double r = Combine(op, BitCast<double>(x), BitCast<double>(y));
      if (divisor != 1) r = r / static_cast<double>(divisor);
      const uint64_t bits = r != r ? 0x7FF8000000000000ull : BitCast<uint64_t>(r);
      memcpy(out, &bits, 8);
      return;
    }
    case DataType::kFloat32: {
      uint32_t x, y;
      memcpy(&x, a, 4);
      memcpy(&y, b, 4);
      float r = Combine(op, BitsToFloat(x), BitsToFloat(y));
      if (divisor != 1) r = r / static_cast<float>(divisor);
      const uint32_t bits = r != r ? 0x7FC00000u : FloatToBits(r);
      memcpy(out, &bits, 4);
      return;
    }
    case DataType::kBFloat16:
    case DataType::kFloat16: {
      uint16_t x, y;
      memcpy(&x, a, 2);
      memcpy(&y, b, 2);
      const bool bf16 = dtype == DataType::kBFloat16;
      float fx = bf16 ? Bf16ToFloat(x) : MinifloatToFloat<5, 10, true>(x);
      float fy = bf16 ? Bf16ToFloat(y) : MinifloatToFloat<5, 10, true>(y);
      float r = Combine(op, fx, fy);
      if (divisor != 1) r = r / static_cast<float>(divisor);
      const uint16_t bits = bf16 ? FloatToBf16(r) : static_cast<uint16_t>(FloatToMinifloat<5, 10, true>(r));
      memcpy(out, &bits, 2);
      return;
    }
    case DataType::kFloat8E4M3:
    case DataType::kFloat8E5M2: {
      const bool e4m3 = dtype == DataType::kFloat8E4M3;
      float fx = e4m3 ? MinifloatToFloat<4, 3, false>(*a) : MinifloatToFloat<5, 2, true>(*a);
      float fy = e4m3 ? MinifloatToFloat<4, 3, false>(*b) : MinifloatToFloat<5, 2, true>(*b);
      float r = Combine(op, fx, fy);
      if (divisor != 1) r = r / static_cast<float>(divisor);
      *out = static_cast<uint8_t>(e4m3 ? FloatToMinifloat<4, 3, false>(r) : FloatToMinifloat<5, 2, true>(r));
      return;
    }
    case DataType::kInt8: return ReduceInteger<int8_t, uint8_t>(a, b, out, op, divisor);
    case DataType::kRaw:
    case DataType::kUint8: return ReduceInteger<uint8_t, uint8_t>(a, b, out, op, divisor);
    case DataType::kInt32: return ReduceInteger<int32_t, uint32_t>(a, b, out, op, divisor);
    case DataType::kUint32: return ReduceInteger<uint32_t, uint32_t>(a, b, out, op, divisor);
    case DataType::kInt64: return ReduceInteger<int64_t, uint64_t>(a, b, out, op, divisor);
    case DataType::kUint64: return ReduceInteger<uint64_t, uint64_t>(a, b, out, op, divisor);
  }
}

}  // namespace ucclzip::codec::reduce
