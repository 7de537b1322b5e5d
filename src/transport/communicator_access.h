// The library's own way into a Communicator: the pipeline and the tests reach its bootstrap and
// transport through here (the benchmarks and examples use the public API alone).
#pragma once

#include <vector>

#include "transport/bootstrap.h"
#include "transport/transport.h"
#include "ucclzip/communicator.h"

namespace ucclzip::internal {

struct CommunicatorAccess {
  // The first transport lane (the only one by default); LanesOf gives every lane, in order.
  static transport::Transport& TransportOf(Communicator& communicator);
  static std::vector<transport::Transport*> LanesOf(Communicator& communicator);
  static transport::Bootstrap& BootstrapOf(Communicator& communicator);
  // Every link's transport sequences start at `first` (pipeline::Engine::StartSequencesAt).
  static void StartSequencesAt(Communicator& communicator, uint32_t first);
  // Creates a communicator whose transport runs with internal options (e.g. staging host memory).
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const BootstrapConfig& bootstrap,
                                                              const transport::TransportOptions& options);
};

}  // namespace ucclzip::internal
