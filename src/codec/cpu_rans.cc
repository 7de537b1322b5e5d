// The portable chunk coder, one lane at a time, and the choice among it and the SIMD coders.
#include "codec/cpu_rans.h"

namespace ucclzip::codec {
namespace {

uint16_t* EncodePortable(const uint8_t* symbols, uint32_t n, const EncoderTable& table, uint32_t* state,
                         uint16_t* words_end) {
  uint16_t* out = words_end;
  for (uint32_t e = n; e-- > 0;) EncodeLaneStep(state[e % kLanes], table.symbols[symbols[e]], out);
  return out;
}

DecodeError DecodePortable(const uint32_t* slots, const ChunkToDecode& chunk) {
  uint32_t state[kLanes];
  uint64_t next = 0;
  if (DecodeError e = ReadChunkStates(chunk.bytes, chunk.size, state, next); e != DecodeError::kOk) return e;
  const uint8_t* words = chunk.bytes;
  const uint64_t available = chunk.size / 2;
  const uint32_t n = chunk.n;
  uint8_t* symbols = chunk.symbols;
  uint32_t k = 0;
  // A step reads at most one word per lane: with 32 words left it needs no bound check.
  for (; k < n / kLanes && available - next >= kLanes; ++k) {
    uint8_t* out = symbols + k * kLanes;
    for (uint32_t lane = 0; lane < kLanes; ++lane) {
      uint32_t x = state[lane];
      const uint32_t entry = slots[x & (kProbScale - 1)];
      x = DecodeStep(x, entry);
      out[lane] = static_cast<uint8_t>(EntrySymbol(entry));
      // Branch-free (the data decides, at random); arithmetic rather than a select, which the
      // compiler would turn back into a branch.
      const uint32_t refill = x < kStateLow;
      uint16_t word;
      std::memcpy(&word, words + 2 * next, 2);
      state[lane] = (x << (refill * 16)) | (word & (0u - refill));
      next += refill;
    }
  }
  return FinishChunkChecked(state, slots, words, available, next, k, chunk);
}

void DecodeTwoPortable(const uint32_t* slots, const ChunkToDecode& a, const ChunkToDecode& b, DecodeError& a_result,
                       DecodeError& b_result) {
  a_result = DecodePortable(slots, a);
  b_result = DecodePortable(slots, b);
}

}  // namespace

const ChunkCoder& PortableChunkCoder() {
  static constexpr ChunkCoder kCoder{EncodePortable, DecodePortable, DecodeTwoPortable};
  return kCoder;
}

const ChunkCoder& ChosenChunkCoder() {
  static const ChunkCoder& chosen = Avx512ChunkCoder() != nullptr ? *Avx512ChunkCoder()
                                    : Avx2ChunkCoder() != nullptr ? *Avx2ChunkCoder()
                                                                  : PortableChunkCoder();
  return chosen;
}

}  // namespace ucclzip::codec
