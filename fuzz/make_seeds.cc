// Writes the fuzzer's seed corpus: valid frames of every mode and type (prefixed with the
// fuzzer's decode selector byte), from small deterministic tensors. Whenever the frame format
// changes, regenerate fuzz/corpus with the fuzzer's build (scripts/fuzz makes it):
//   cmake --build build-fuzz --target make_seeds && build-fuzz/make_seeds fuzz/corpus
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "ucclzip/codec.h"

namespace {

using ucclzip::DataType;

// At 32-symbol lanes a tile holds 65536 elements: the tiled pattern has two tiles, the second
// short, whose values lie 30 binades below the first's, so that each takes a table of its own.
constexpr uint32_t kLaneSymbols = 32;
constexpr uint64_t kTileElements = 65536;

enum class Pattern { kTiny, kNarrow, kRandom, kTiled };  // stored; rANS; stored symbols; own tables
constexpr Pattern kPatterns[] = {Pattern::kTiny, Pattern::kNarrow, Pattern::kRandom, Pattern::kTiled};

uint64_t CountOf(Pattern pattern) {
  switch (pattern) {
    case Pattern::kTiny: return 100;
    case Pattern::kTiled: return kTileElements + 4096;
    default: return 5000;
  }
}

// Elements of `width` bytes: the top bytes of floats of a few binades, or random bytes.
std::vector<uint8_t> MakeTensor(size_t width, Pattern pattern) {
  const uint64_t count = CountOf(pattern);
  std::vector<uint8_t> tensor(count * width);
  uint32_t state = 12345 + static_cast<uint32_t>(pattern);
  for (uint64_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    const int binade = static_cast<int>(state % 7) - 4 - (pattern == Pattern::kTiled && i >= kTileElements ? 30 : 0);
    const float v = std::ldexp(1.0f + (state >> 9) / 8388608.0f, binade);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (size_t b = 0; b < width; ++b) {
      tensor[i * width + b] = pattern == Pattern::kRandom ? static_cast<uint8_t>(state >> (8 * b))
                                                          : static_cast<uint8_t>(bits >> (8 * (4 - width + b)));
    }
  }
  return tensor;
}

// Tiles of a rANS frame with tables of their own.
uint32_t OwnTableTiles(const std::vector<uint8_t>& frame, DataType type, uint64_t count) {
  const ucclzip::codec::Layout layout =
      ucclzip::codec::ComputeLayout(ucclzip::ElementSize(type), true, count, kLaneSymbols);
  uint32_t own = 0;
  for (uint32_t t = 0; t < layout.num_tiles; ++t) {
    own += ucclzip::codec::TileEntry(frame.data(), layout, t) != ucclzip::codec::kGlobalTableTile;
  }
  return own;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: make_seeds DIR\n"), 2;
  int written = 0;
  for (DataType type : {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32, DataType::kFloat8E4M3,
                        DataType::kFloat8E5M2, DataType::kInt32}) {
    for (Pattern pattern : kPatterns) {
      const bool compressible = ucclzip::IsCompressibleType(type);
      if (pattern == Pattern::kTiled && !compressible) continue;  // stored like the others
      const uint64_t count = CountOf(pattern);
      const std::vector<uint8_t> tensor = MakeTensor(ucclzip::ElementSize(type), pattern);
      std::vector<uint8_t> frame(ucclzip::MaxFrameBytes(type, count));
      auto bytes = ucclzip::CompressHost(tensor.data(), count, type, frame.data(), frame.size(),
                                         {.lane_symbols = kLaneSymbols});
      if (!bytes.ok()) return std::fprintf(stderr, "%s\n", bytes.status().ToString().c_str()), 1;
      if (pattern == Pattern::kTiled && OwnTableTiles(frame, type, count) != 2) {
        return std::fprintf(stderr, "%s: the tiled seed lost its tiles' own tables\n", ucclzip::DataTypeName(type)), 1;
      }
      const std::string name = std::string(argv[1]) + "/frame-" + ucclzip::DataTypeName(type) + "-" +
                               std::to_string(static_cast<int>(pattern));
      std::ofstream out(name, std::ios::binary);
      out.put(0);  // selects the decode path
      out.write(reinterpret_cast<const char*>(frame.data()), static_cast<std::streamsize>(*bytes));
      if (!out) return std::fprintf(stderr, "cannot write %s\n", name.c_str()), 1;
      ++written;
    }
  }
  std::printf("wrote %d seeds\n", written);
  return 0;
}
