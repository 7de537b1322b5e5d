// Settings of one transport (one communicator's UCX context, worker and endpoints).
#pragma once

#include <cstddef>
#include <string>

#include "absl/time/time.h"

namespace ucclzip::transport {

struct TransportOptions {
  // An operation that makes no progress for this long fails, and its peer is treated as failed.
  absl::Duration op_timeout = absl::Seconds(60);
  // How long destruction waits for endpoints to close before forcing them.
  absl::Duration shutdown_timeout = absl::Seconds(10);
  // Messages travel as blocks of this size (the last one shorter); every rank must agree.
  size_t block_bytes = size_t{4} << 20;
  // Pinned host memory for the staged path, split evenly between sends and receives.
  size_t staging_pool_bytes = size_t{64} << 20;
  // UCX_TLS for this communicator ("tcp", "posix,sysv", ...); empty keeps UCX's own choice.
  std::string ucx_transports;
  // Routes host buffers through the staged path too (copies by memcpy), so that the staged
  // pipeline runs, and is tested, on machines without a GPU.
  bool stage_host_memory = false;
};

}  // namespace ucclzip::transport
