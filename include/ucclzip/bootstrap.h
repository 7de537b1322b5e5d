// How the processes of a communicator find each other.
//
// Rank 0 listens on host:port; every other rank connects to it (retrying with backoff until the
// timeout) and introduces itself with its rank, the world size and an optional shared token.
// The configuration comes from an explicit struct, from the variables that launchers set
// (torchrun, mpirun, or UCCLZIP_* overrides), or from a unique id created by rank 0 and handed
// to the other ranks by the application, as NCCL users know it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ucclzip {

struct BootstrapConfig {
  // Where the others connect to rank 0. Rank 0 checks that it is one of its host's addresses
  // and listens at `port` on every interface: the others may reach it at another address than
  // the name means on its own host (Debian resolves a host's own name to 127.0.1.1).
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  int rank = -1;
  int world_size = 0;
  // Rank among the processes of this node, -1 if unknown. Informational: the CUDA device a rank
  // uses is the caller's choice.
  int local_rank = -1;
  // Shared secret every rank must present; empty means none. Not encryption: it keeps strangers
  // and other jobs that reuse the port from joining.
  std::string token;
  // Deadline for the whole rendezvous; an error then names the ranks that never arrived.
  absl::Duration timeout = absl::Seconds(60);
  // Rank 0 only: an already listening TCP socket to accept on instead of binding host:port
  // (a launcher that reserved the port hands it down; the socket is adopted and closed). Another
  // rank's is closed unused. Either way the descriptor is consumed by the first Create given
  // this config: a config that holds one serves one Create (a second would close whatever has
  // that number by then).
  int listen_fd = -1;
};

// Reads the configuration from the environment. In order of precedence:
//   UCCLZIP_UNIQUE_ID (text form of a UniqueId: host, port and token),
//   UCCLZIP_MASTER_ADDR, UCCLZIP_MASTER_PORT, UCCLZIP_RANK, UCCLZIP_WORLD_SIZE,
//   UCCLZIP_LOCAL_RANK, UCCLZIP_TOKEN, UCCLZIP_BOOTSTRAP_TIMEOUT (seconds),
//   UCCLZIP_LISTEN_FD (rank 0: a listening socket inherited from the launcher),
//   torchrun's MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK,
//   mpirun's OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK.
// An error names the variable that is missing or malformed.
absl::StatusOr<BootstrapConfig> BootstrapConfigFromEnvironment();

// Opaque rendezvous id: rank 0's address and a random token, in a fixed-size blob the
// application ships to the other ranks (MPI_Bcast, a file, an environment variable...).
struct UniqueId {
  std::array<uint8_t, 128> bytes{};
};

// Creates an id and starts listening on a free port of this host. Call it in the process that
// will be rank 0: that rank's Communicator::Create adopts the listening socket. The address
// others connect to is UCCLZIP_HOST if set, else this host's name resolved to IPv4.
absl::StatusOr<UniqueId> GetUniqueId();

// The configuration of `rank` in a world of `world_size` ranks that meet through `id`.
absl::StatusOr<BootstrapConfig> BootstrapConfigFromUniqueId(const UniqueId& id, int rank, int world_size);

// A TCP socket listening on a free port of `host`, for a launcher that starts a job's ranks
// itself: it hands the port to every rank (UCCLZIP_MASTER_PORT) and the socket to rank 0
// (BootstrapConfig::listen_fd, or UCCLZIP_LISTEN_FD in a child process), so that no other
// process can take the port between its choice and rank 0's start. The caller owns the
// descriptor. It is close-on-exec: a launcher that executes rank 0 clears that flag in rank 0's
// child only (fcntl(fd, F_SETFD, 0)), and closes the descriptor itself once the ranks run.
struct ReservedPort {
  int listen_fd = -1;
  uint16_t port = 0;
};
absl::StatusOr<ReservedPort> ReservePort(const std::string& host = "127.0.0.1");

// Printable form of an id (hex), e.g. for UCCLZIP_UNIQUE_ID, and back.
std::string UniqueIdToString(const UniqueId& id);
absl::StatusOr<UniqueId> UniqueIdFromString(std::string_view text);

}  // namespace ucclzip
