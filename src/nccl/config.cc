#include "nccl/config.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ucclzip::nccl {
namespace {

// NCCL's magic of a config made with NCCL_CONFIG_INITIALIZER.
constexpr unsigned int kConfigMagic = 0xcafebeef;

// The caller's config as this header's struct: what its size and version do not cover keeps
// the initializer's "undefined".
ncclConfig_t AsThisVersion(const ncclConfig_t& given) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  const ncclConfig_t undefined = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;
  size_t size = 0;
  std::memcpy(&size, &given, sizeof(size));
  std::memcpy(&config, &given, std::min(size, sizeof(ncclConfig_t)));
  // The fields each NCCL version added: a config of an earlier version never set them.
  if (config.version < NCCL_VERSION(2, 14, 0)) config.blocking = undefined.blocking;
  if (config.version < NCCL_VERSION(2, 17, 0)) {
    config.cgaClusterSize = undefined.cgaClusterSize;
    config.minCTAs = undefined.minCTAs;
    config.maxCTAs = undefined.maxCTAs;
  }
  if (config.version < NCCL_VERSION(2, 27, 0)) {
    config.collnetEnable = undefined.collnetEnable;
    config.CTAPolicy = undefined.CTAPolicy;
    config.shrinkShare = undefined.shrinkShare;
    config.nvlsCTAs = undefined.nvlsCTAs;
  }
  if (config.version < NCCL_VERSION(2, 28, 0)) {
    config.nChannelsPerNetPeer = undefined.nChannelsPerNetPeer;
    config.nvlinkCentricSched = undefined.nvlinkCentricSched;
  }
  return config;
}

bool Set(int value) { return value != NCCL_CONFIG_UNDEF_INT; }
bool Flag(int value) { return !Set(value) || value == 0 || value == 1; }
bool Positive(int value) { return !Set(value) || value > 0; }

}  // namespace

absl::Status CheckConfig(const ncclConfig_t& given, absl::string_view call) {
  const ncclConfig_t config = AsThisVersion(given);
  if (config.magic != kConfigMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat(call, ": the config was not initialised with NCCL_CONFIG_INITIALIZER"));
  }
  auto invalid = [&](const char* field, int value, absl::string_view takes) {
    return absl::InvalidArgumentError(
        absl::StrCat(call, ": config.", field, " is ", value, "; NCCL takes ", takes, " (or leaves it undefined)"));
  };
  if (!Flag(config.blocking)) return invalid("blocking", config.blocking, "0 or 1");
  if (Set(config.cgaClusterSize) && config.cgaClusterSize < 0) {
    return invalid("cgaClusterSize", config.cgaClusterSize, "0 or more");
  }
  if (!Positive(config.minCTAs)) return invalid("minCTAs", config.minCTAs, "1 or more");
  if (!Positive(config.maxCTAs)) return invalid("maxCTAs", config.maxCTAs, "1 or more");
  // As NCCL compares them: a minCTAs without a maxCTAs (INT_MIN) is refused too.
  if (Set(config.minCTAs) && config.minCTAs > config.maxCTAs) {
    return invalid("minCTAs", config.minCTAs,
                   Set(config.maxCTAs) ? absl::StrCat("at most maxCTAs, ", config.maxCTAs) : "it only with a maxCTAs");
  }
  if (!Flag(config.splitShare)) return invalid("splitShare", config.splitShare, "0 or 1");
  if (!Flag(config.collnetEnable)) return invalid("collnetEnable", config.collnetEnable, "0 or 1");
  if (Set(config.CTAPolicy) && (config.CTAPolicy & ~(NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO)) != 0) {
    return invalid("CTAPolicy", config.CTAPolicy, "NCCL_CTA_POLICY_* flags");
  }
  if (!Flag(config.shrinkShare)) return invalid("shrinkShare", config.shrinkShare, "0 or 1");
  if (!Positive(config.nvlsCTAs)) return invalid("nvlsCTAs", config.nvlsCTAs, "1 or more");
  // Its upper bound is the NCCL build's channel count, which this library has none of.
  if (!Positive(config.nChannelsPerNetPeer)) return invalid("nChannelsPerNetPeer", config.nChannelsPerNetPeer, "1 or more");
  if (!Flag(config.nvlinkCentricSched)) return invalid("nvlinkCentricSched", config.nvlinkCentricSched, "0 or 1");
  return absl::OkStatus();
}

}  // namespace ucclzip::nccl
