// The communicator's transports ("lanes", CommunicatorOptions::transport_lanes): N independent
// Transports over the same ranks, each with its own UCX context, worker, endpoints, progress
// thread and staging pool, and the rule that puts every link on exactly one of them: the link
// a -> b (a sends, b receives) travels on lane a % N on both sides. A rank's sends thus share its
// own lane and its receives from p go on p's lane, so that with 2 lanes a rank of a ring or a
// chain receives on one progress thread (one core) and sends on another. Tags and per-link
// sequences are as with one lane, since a link never spans two.
//
// Failures are shared: a peer one lane sees fail is failed on every lane, and the first failure
// of any lane is the communicator's.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/bootstrap.h"
#include "transport/transport.h"
#include "transport/transport_options.h"

namespace ucclzip::pipeline {

class TransportLanes {
 public:
  static constexpr int kMaxLanes = 8;

  // Collective over the bootstrap: creates the lanes one after the other, each as a Transport.
  static absl::StatusOr<std::unique_ptr<TransportLanes>> Create(transport::Bootstrap& bootstrap,
                                                                const transport::TransportOptions& options);
  // Shuts every lane down before destroying any: a lane's progress thread reports failures to
  // the others until it stops.
  ~TransportLanes();
  TransportLanes(const TransportLanes&) = delete;
  TransportLanes& operator=(const TransportLanes&) = delete;

  int rank() const { return lanes_[0]->rank(); }
  int size() const { return lanes_[0]->size(); }
  const transport::TransportOptions& options() const { return lanes_[0]->options(); }
  absl::Duration wait_spin() const { return lanes_[0]->wait_spin(); }
  // The same on every lane (checked at creation).
  bool device_memory_direct() const { return lanes_[0]->device_memory_direct(); }
  bool Stages(transport::MemoryType type) const { return lanes_[0]->Stages(type); }

  // The lane of this rank's sends (to any peer), and of its receives from `peer`.
  transport::Transport& ForSend() { return *lanes_[rank() % lanes_.size()]; }
  transport::Transport& ForRecv(int peer) { return *lanes_[peer % lanes_.size()]; }
  const std::vector<std::unique_ptr<transport::Transport>>& All() const { return lanes_; }

  // Transport's calls of the same names, over every lane.
  absl::Status PrepareDeviceStaging(int device);
  absl::Status FirstPeerFailure();
  int FirstFailedPeer();  // its rank, or -1
  // On one lane: every lane's transport has every peer's bootstrap connection, and a failure
  // one lane sees is every lane's.
  void WatchPeers(bool on) { lanes_[0]->WatchPeers(on); }
  void Abort(const absl::Status& why);
  void Shutdown();

 private:
  explicit TransportLanes(std::vector<std::unique_ptr<transport::Transport>> lanes) : lanes_(std::move(lanes)) {}

  std::vector<std::unique_ptr<transport::Transport>> lanes_;
};

}  // namespace ucclzip::pipeline
