// Writes the fuzzer's seed corpus: valid frames of every mode and type (prefixed with the
// fuzzer's decode selector byte), from small deterministic tensors.
#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "ucclzip/codec.h"

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: make_seeds DIR\n"), 2;
  using ucclzip::DataType;
  int written = 0;
  for (DataType type : {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32, DataType::kFloat8E4M3,
                        DataType::kFloat8E5M2, DataType::kInt32}) {
    for (int pattern = 0; pattern < 3; ++pattern) {
      const size_t width = ucclzip::ElementSize(type);
      const uint64_t count = pattern == 0 ? 100 : 5000;
      std::vector<uint8_t> tensor(count * width);
      uint32_t state = 12345 + pattern;
      for (uint64_t i = 0; i < count; ++i) {
        state = state * 1664525u + 1013904223u;
        // pattern 1: values of a narrow range (rANS); pattern 2: random bytes (stored symbols).
        float v = std::ldexp(1.0f + (state >> 9) / 8388608.0f, static_cast<int>(state % 7) - 4);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        for (size_t b = 0; b < width; ++b) {
          tensor[i * width + b] = pattern == 2 ? static_cast<uint8_t>(state >> (8 * b)) : static_cast<uint8_t>(bits >> (8 * (4 - width + b)));
        }
      }
      std::vector<uint8_t> frame(ucclzip::MaxFrameBytes(type, count));
      auto bytes = ucclzip::CompressHost(tensor.data(), count, type, frame.data(), frame.size(), {.lane_symbols = 32});
      if (!bytes.ok()) return std::fprintf(stderr, "%s\n", bytes.status().ToString().c_str()), 1;
      std::ofstream out(std::string(argv[1]) + "/frame-" + ucclzip::DataTypeName(type) + "-" + std::to_string(pattern),
                        std::ios::binary);
      out.put(0);  // selects the decode path
      out.write(reinterpret_cast<const char*>(frame.data()), static_cast<std::streamsize>(*bytes));
      ++written;
    }
  }
  std::printf("wrote %d seeds\n", written);
  return 0;
}
