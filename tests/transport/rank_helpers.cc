#include "transport/rank_helpers.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_cat.h"
#include "pipeline/options_environment.h"

namespace ucclzip::testing {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Eight pattern bytes for word `index`; the low bit of every byte is set, so none is zero.
uint64_t Word(uint64_t seed, uint64_t index) { return Mix(seed * 0x100000001b3ull + index) | 0x0101010101010101ull; }

}  // namespace

void FillPattern(uint8_t* data, size_t bytes, uint64_t seed) {
  for (size_t offset = 0; offset < bytes; offset += 8) {
    uint64_t word = Word(seed, offset / 8);
    std::memcpy(data + offset, &word, std::min<size_t>(8, bytes - offset));
  }
}

absl::Status VerifyPattern(const uint8_t* data, size_t bytes, uint64_t seed, absl::string_view what) {
  size_t wrong = 0;
  size_t first_wrong = 0;
  for (size_t offset = 0; offset < bytes; offset += 8) {
    uint64_t word = Word(seed, offset / 8);
    size_t n = std::min<size_t>(8, bytes - offset);
    if (std::memcmp(data + offset, &word, n) == 0) continue;
    const auto* expected = reinterpret_cast<const uint8_t*>(&word);
    for (size_t i = 0; i < n; ++i) {
      if (data[offset + i] != expected[i] && wrong++ == 0) first_wrong = offset + i;
    }
  }
  if (wrong == 0) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(what, ": ", wrong, " of ", bytes, " bytes wrong, the first at offset ",
                                          first_wrong));
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const RankContext& context,
                                                                 const transport::TransportOptions& options) {
  absl::StatusOr<CommunicatorOptions> effective = pipeline::WithEnvironmentDefaults(options, context.bootstrap.rank);
  if (!effective.ok()) return effective.status();
  transport::TransportOptions with_environment = options;
  static_cast<CommunicatorOptions&>(with_environment) = *effective;
  return internal::CommunicatorAccess::Create(context.bootstrap, with_environment);
}

transport::Transport& TransportOf(Communicator& communicator) {
  return internal::CommunicatorAccess::TransportOf(communicator);
}

absl::Status WaitAll(const std::vector<std::shared_ptr<transport::Request>>& requests, absl::Time deadline) {
  absl::Status first;
  for (const auto& request : requests) first.Update(request->Wait(deadline));
  return first;
}

absl::Status ExpectFailure(const absl::Status& status, std::vector<std::string> parts, absl::string_view what) {
  bool matches = !status.ok();
  for (const std::string& part : parts) matches = matches && absl::StrContains(status.message(), part);
  if (matches) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": expected an error mentioning '", absl::StrJoin(parts, "', '"), "', got ", status.ToString()));
}

absl::Status ExpectError(const absl::Status& status, absl::StatusCode code, std::vector<std::string> parts,
                         absl::string_view what) {
  if (status.code() != code) {
    return absl::InternalError(absl::StrCat(what, ": expected ", absl::StatusCodeToString(code), ", got ", status.ToString()));
  }
  return ExpectFailure(status, std::move(parts), what);
}

}  // namespace ucclzip::testing
