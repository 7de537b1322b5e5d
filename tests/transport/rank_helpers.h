// What the transport tests' rank bodies share: byte patterns that catch any misplaced or
// missing byte, communicator creation with internal options, and waiting on many requests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/communicator_access.h"
#include "transport/multi_process.h"

namespace ucclzip::testing {

// A pattern unique to `seed` and position, with no zero byte (a zeroed buffer never passes).
void FillPattern(uint8_t* data, size_t bytes, uint64_t seed);
// Checks every byte; the error names `what`, the first wrong offset and how many are wrong.
absl::Status VerifyPattern(const uint8_t* data, size_t bytes, uint64_t seed, absl::string_view what);
// A seed for the message from `sender` to `receiver` of a given index.
inline uint64_t SeedOf(int sender, int receiver, uint64_t index) {
  return (uint64_t(sender) << 48) ^ (uint64_t(receiver) << 32) ^ index;
}

// A communicator with internal options; the UCCLZIP_* variables apply to them as they would in
// Communicator::Create, so that the whole suite can run with, e.g., UCCLZIP_TRANSPORT_LANES=2.
absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const RankContext& context,
                                                                 const transport::TransportOptions& options);
// The communicator's first transport lane (its only one by default).
transport::Transport& TransportOf(Communicator& communicator);

// Waits for all; the first failure (or DeadlineExceeded at `deadline`) is returned.
absl::Status WaitAll(const std::vector<std::shared_ptr<transport::Request>>& requests, absl::Time deadline);

// Fails with `what` unless `status` is an error whose message contains every one of `parts`.
absl::Status ExpectFailure(const absl::Status& status, std::vector<std::string> parts, absl::string_view what);
// Fails with `what` unless `status` has `code` and its message contains every one of `parts`.
absl::Status ExpectError(const absl::Status& status, absl::StatusCode code, std::vector<std::string> parts,
                         absl::string_view what);

}  // namespace ucclzip::testing
