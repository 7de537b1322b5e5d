// A communicator: a group of ranks that exchange (compressed) tensors over UCX.
//
// This header holds what creates and ends one. Creation is collective: every rank calls
// Create with the same world size and token, and it returns once all ranks have met at rank 0
// and connected their UCX endpoints. Destruction is collective too: it waits (bounded by the
// shutdown timeout) for the other ranks, so that nothing in flight is lost, then closes
// everything; a rank whose peers are gone still shuts down within that timeout.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ucclzip/bootstrap.h"

namespace ucclzip {

namespace internal {
struct CommunicatorAccess;
}

struct CommunicatorOptions {
  // An operation that makes no progress for this long fails with a status naming its peer;
  // that peer is then treated as failed.
  absl::Duration op_timeout = absl::Seconds(60);
  // How long destruction waits for the other ranks before closing regardless.
  absl::Duration shutdown_timeout = absl::Seconds(10);
  // Messages travel in blocks of this size; every rank must use the same.
  size_t block_bytes = size_t{4} << 20;
  // Pinned host memory for staging device buffers when UCX cannot take them (allocated once,
  // on first use, half for sends and half for receives).
  size_t staging_pool_bytes = size_t{64} << 20;
  // UCX transports (UCX_TLS syntax: "tcp", "posix,sysv", "rc,cuda_copy", ...); empty keeps
  // UCX's choice, which honours UCX_TLS.
  std::string ucx_transports;
  // How long a waiting caller busy-polls its operation before it sleeps. Polling saves the
  // ~10 us of a sleeping thread's wake-up on small messages, but only pays where cores are
  // free: unset means 50 us on machines of 8 or more cores, no polling below that.
  std::optional<absl::Duration> wait_spin;
};

struct CommunicatorConfig {
  BootstrapConfig bootstrap;
  CommunicatorOptions options;
};

class Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const CommunicatorConfig& config);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;

  // True when device buffers go to UCX directly (a CUDA-enabled UCX); false when they are
  // staged through pinned host memory.
  bool device_memory_direct() const;

  // Fails every pending and future operation and drops the connections, so that the peers'
  // operations fail too. For error paths; the communicator must still be destroyed.
  void Abort();

 private:
  friend struct internal::CommunicatorAccess;
  struct Impl;
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ucclzip
