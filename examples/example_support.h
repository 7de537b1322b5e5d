// What the examples share: joining the communicator the launcher describes (scripts/ucclzip-run,
// torchrun, mpirun), bf16 tensors drawn like trained weights, and failing with a message.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "ucclzip/bootstrap.h"
#include "ucclzip/communicator.h"

namespace example {

// Prints the status and exits, naming the rank.
inline void Check(const absl::Status& status, int rank, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, status.ToString().c_str());
  std::exit(1);
}

inline std::unique_ptr<ucclzip::Communicator> Join(ucclzip::CompressionMode compression = ucclzip::CompressionMode::kAuto) {
  absl::StatusOr<ucclzip::BootstrapConfig> bootstrap = ucclzip::BootstrapConfigFromEnvironment();
  Check(bootstrap.status(), -1, "bootstrap from the environment (start under scripts/ucclzip-run -n N)");
  ucclzip::CommunicatorConfig config{.bootstrap = *bootstrap};
  config.options.compression = compression;
  absl::StatusOr<std::unique_ptr<ucclzip::Communicator>> comm = ucclzip::Communicator::Create(config);
  Check(comm.status(), bootstrap->rank, "creating the communicator");
  return std::move(*comm);
}

// bf16 bits of a Gaussian of `sigma` (rounded to nearest even), as trained weights look.
inline std::vector<uint16_t> GaussianBf16(size_t count, float sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> gaussian(0.0f, sigma);
  std::vector<uint16_t> out(count);
  for (auto& v : out) {
    float x = gaussian(rng);
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    v = static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
  }
  return out;
}

// The float a bf16's bits stand for (exactly: bf16 is float's upper half).
inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float x;
  std::memcpy(&x, &wide, 4);
  return x;
}

// A flag's text from argv: "--name=value", else `fallback`.
inline const char* TextFlag(int argc, char** argv, const char* name, const char* fallback) {
  const size_t length = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--", 2) == 0 && std::strncmp(argv[i] + 2, name, length) == 0 && argv[i][2 + length] == '=') {
      return argv[i] + 3 + length;
    }
  }
  return fallback;
}

// A flag's number from argv: "--name=value", else `fallback`.
inline long Flag(int argc, char** argv, const char* name, long fallback) {
  const char* text = TextFlag(argc, argv, name, nullptr);
  return text == nullptr ? fallback : std::strtol(text, nullptr, 10);
}

}  // namespace example
