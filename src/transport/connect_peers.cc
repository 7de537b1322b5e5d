// Transport::ConnectEveryPeer: one message each way with every peer at creation, so that UCX
// sets up what it would otherwise set up during the first operations.
#include <vector>

#include "absl/strings/str_cat.h"
#include "transport/status_context.h"
#include "transport/transport.h"

namespace ucclzip::transport {
namespace {

// The exchange's tag: a stream no caller uses (the pipeline's parts are streams 0 to 3, its
// notices 4).
constexpr OpTag kConnectTag{.sequence = 0, .stream = kMaxStream};

}  // namespace

absl::Status Transport::ConnectEveryPeer(absl::Time deadline) {
  const std::string context = absl::StrCat("rank ", rank_, ": connecting to every peer at creation");
  // Messages of no bytes: enough for UCX to complete every endpoint's wireup.
  std::vector<std::shared_ptr<Request>> requests;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    requests.push_back(Recv(peer, nullptr, 0, MemoryType::kHost, kConnectTag));
    requests.push_back(Send(peer, nullptr, 0, MemoryType::kHost, kConnectTag));
  }
  for (const auto& request : requests) {
    if (absl::Status s = request->Wait(deadline); !s.ok()) return WithContext(s, context);
  }
  return absl::OkStatus();
}

}  // namespace ucclzip::transport
