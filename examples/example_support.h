// What the examples share: joining the communicator the launcher describes (scripts/ucclzip-run,
// torchrun, mpirun), bf16 tensors drawn like trained weights, and failing with a message.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <string>
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

// The examples' flags: "--name=value" each, of the names an example takes. Anything else (a
// misspelt name, "--mb 1" with a space, a number that does not parse or is below 1) ends the
// program with its usage line, where a flag the example did not know was once ignored and the
// defaults ran silently.
class Flags {
 public:
  Flags(int argc, char** argv, const char* usage, std::initializer_list<const char*> names) : usage_(usage) {
    for (int i = 1; i < argc; ++i) {
      const char* argument = argv[i];
      const char* equals = std::strchr(argument, '=');
      if (std::strncmp(argument, "--", 2) != 0 || equals == nullptr) Usage(argument, "is not --name=value");
      const std::string name(argument + 2, equals);
      if (std::find(names.begin(), names.end(), name) == names.end()) Usage(argument, "is not a flag of this program");
      values_[name] = equals + 1;
    }
  }

  // The flag's number, at least 1, else `fallback`.
  long Number(const char* name, long fallback) const {
    const auto found = values_.find(name);
    if (found == values_.end()) return fallback;
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(found->second.c_str(), &end, 10);
    if (found->second.empty() || *end != '\0' || errno != 0 || value < 1) {
      Usage(("--" + found->first + "=" + found->second).c_str(), "is not a whole number of at least 1");
    }
    return value;
  }

  // The flag's text, else `fallback`.
  std::string Text(const char* name, const char* fallback) const {
    const auto found = values_.find(name);
    return found == values_.end() ? fallback : found->second;
  }

  [[noreturn]] void Usage(const char* argument, const char* why) const {
    std::fprintf(stderr, "%s %s\nusage: %s\n", argument, why, usage_);
    std::exit(2);
  }

 private:
  const char* usage_;
  std::map<std::string, std::string> values_;
};

}  // namespace example
