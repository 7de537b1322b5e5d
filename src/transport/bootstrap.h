// The bootstrap network of a communicator: one TCP connection between every pair of ranks,
// formed by a rendezvous at rank 0 (see ucclzip/bootstrap.h). It carries the UCX worker
// addresses, small control messages, allgather and barrier, always with deadlines, in the
// style of MSCCL++'s Bootstrap. Not thread-safe: one caller at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/bootstrap_wire.h"
#include "transport/socket.h"
#include "ucclzip/bootstrap.h"

namespace ucclzip::transport {

class Bootstrap {
 public:
  // Runs the rendezvous. Errors name this rank, rank 0's address and the ranks that never
  // arrived or were refused.
  static absl::StatusOr<std::unique_ptr<Bootstrap>> Create(const BootstrapConfig& config);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Every rank contributes `mine`; the result holds all contributions in rank order.
  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view mine, absl::Time deadline);
  absl::Status Barrier(absl::Time deadline);

  // Small point-to-point messages. `tag` must leave the top bit clear (the bootstrap's own).
  // Messages from one peer with other tags are kept until asked for.
  absl::Status Send(int peer, uint64_t tag, absl::string_view bytes, absl::Time deadline);
  absl::StatusOr<std::string> Recv(int peer, uint64_t tag, absl::Time deadline);

  // The connection to `peer` (-1 for this rank), for watching it from another thread with
  // poll(): it hangs up when the peer's process exits. Never read from or written to there.
  int peer_fd(int peer) const { return peers_[peer].fd(); }

 private:
  Bootstrap(int rank, std::vector<Socket> peers);

  absl::Status CheckPeer(int peer, absl::string_view operation) const;
  // SendFrame and RecvFrame on the connection to `peer`. A frame cut off part way (a timeout or
  // failure after its first byte) leaves the stream out of step: read on, its bytes would be
  // taken for frames of their own and handed to callers as messages. The connection then takes
  // no further frame, and every later call on it fails, saying why.
  absl::Status SendTo(int peer, uint64_t tag, absl::string_view payload, absl::Time deadline);
  absl::StatusOr<Frame> RecvFrom(int peer, absl::Time deadline);
  absl::StatusOr<std::string> RecvTagged(int peer, uint64_t tag, absl::Time deadline);
  // Rank 0 tells every other rank that a collective failed, so that none waits for the deadline.
  void BroadcastAbort(const absl::Status& why);

  int rank_;
  int size_;
  std::vector<Socket> peers_;  // peers_[rank_] stays empty
  std::vector<absl::Status> broken_;  // per peer: why its connection takes no further frame
  std::vector<std::deque<std::pair<uint64_t, std::string>>> unexpected_;
  std::vector<uint64_t> unexpected_bytes_;  // per peer: the payload bytes held in unexpected_
  uint64_t collective_sequence_ = 0;
};

}  // namespace ucclzip::transport
