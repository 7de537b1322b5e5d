// BootstrapConfigFromEnvironment: reads what launchers (torchrun, mpirun) or the user set.
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "transport/bootstrap_wire.h"
#include "ucclzip/bootstrap.h"

namespace ucclzip {
namespace {

std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// The first of `names` that is set, with the name it came from.
std::optional<std::pair<std::string, std::string>> FirstSet(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto value = Env(name)) return std::make_pair(std::string(name), *value);
  }
  return std::nullopt;
}

// Reads an integer in [min, max] from the first set variable; `fallback` if none is set.
absl::StatusOr<int64_t> IntFromEnv(std::initializer_list<const char*> names, int64_t min, int64_t max,
                                   std::optional<int64_t> fallback) {
  auto found = FirstSet(names);
  if (!found) {
    if (fallback) return *fallback;
    return absl::NotFoundError(absl::StrCat("bootstrap from the environment: ", *names.begin(), " is not set"));
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(found->second, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat("bootstrap from the environment: ", found->first, "='",
                                                   found->second, "' is not an integer in [", min, ", ", max, "]"));
  }
  return value;
}

// Without UCCLZIP_TOKEN, the launcher's name for this job, which every rank of it shares: ranks
// of another job on the same port (torchrun's default 29500 on a shared node), or a stale rank
// of an earlier elastic restart, then present another token and are refused, where with no token
// at all they passed the hello and took a rank's place. Empty where no launcher names the job.
std::string JobToken() {
  std::string token;
  if (auto run = Env("TORCHELASTIC_RUN_ID")) {
    token = absl::StrCat("torchelastic ", *run, " restart ", Env("TORCHELASTIC_RESTART_COUNT").value_or("0"));
  } else if (auto job = Env("SLURM_JOB_ID")) {
    token = absl::StrCat("slurm ", *job, " step ", Env("SLURM_STEP_ID").value_or("-"));
  } else if (auto space = Env("PMIX_NAMESPACE")) {
    token = absl::StrCat("pmix ", *space);
  } else if (auto job = Env("OMPI_MCA_orte_ess_jobid")) {
    token = absl::StrCat("ompi ", *job);
  }
  if (token.size() > transport::kMaxTokenBytes) token.resize(transport::kMaxTokenBytes);
  return token;
}

}  // namespace

absl::StatusOr<BootstrapConfig> BootstrapConfigFromEnvironment() {
  absl::StatusOr<int64_t> rank =
      IntFromEnv({"UCCLZIP_RANK", "RANK", "OMPI_COMM_WORLD_RANK"}, 0, INT32_MAX, std::nullopt);
  if (!rank.ok()) return rank.status();
  absl::StatusOr<int64_t> world_size =
      IntFromEnv({"UCCLZIP_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"}, 1, INT32_MAX, std::nullopt);
  if (!world_size.ok()) return world_size.status();
  absl::StatusOr<int64_t> local_rank =
      IntFromEnv({"UCCLZIP_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"}, 0, INT32_MAX, -1);
  if (!local_rank.ok()) return local_rank.status();

  // Everything is read and checked before the unique id is used: rank 0's configuration from
  // it takes the id's listening socket (once per id), which a later error would leak, port and all.
  absl::StatusOr<int64_t> timeout_s = IntFromEnv({"UCCLZIP_BOOTSTRAP_TIMEOUT"}, 1, 86'400, 60);
  if (!timeout_s.ok()) return timeout_s.status();
  const absl::Status rank_in_world =
      *rank < *world_size ? absl::OkStatus()
                          : absl::InvalidArgumentError(absl::StrCat("bootstrap from the environment: rank ", *rank,
                                                                    " is not below the world size ", *world_size));

  BootstrapConfig config;
  if (auto id_text = Env("UCCLZIP_UNIQUE_ID")) {
    absl::StatusOr<UniqueId> id = UniqueIdFromString(*id_text);
    if (!id.ok()) return absl::InvalidArgumentError(absl::StrCat("UCCLZIP_UNIQUE_ID: ", id.status().message()));
    if (!rank_in_world.ok()) return rank_in_world;
    // Rank 0 listens on the id's socket, whatever UCCLZIP_LISTEN_FD says: the id wins.
    absl::StatusOr<BootstrapConfig> from_id = BootstrapConfigFromUniqueId(*id, *rank, *world_size);
    if (!from_id.ok()) return from_id.status();
    config = *from_id;
  } else {
    auto host = FirstSet({"UCCLZIP_MASTER_ADDR", "MASTER_ADDR"});
    if (!host) return absl::NotFoundError("bootstrap from the environment: neither UCCLZIP_MASTER_ADDR nor MASTER_ADDR is set");
    absl::StatusOr<int64_t> port = IntFromEnv({"UCCLZIP_MASTER_PORT", "MASTER_PORT"}, 1, 65535, std::nullopt);
    if (!port.ok()) return port.status();
    config.host = host->second;
    config.port = static_cast<uint16_t>(*port);
    config.rank = static_cast<int>(*rank);
    config.world_size = static_cast<int>(*world_size);
    config.token = Env("UCCLZIP_TOKEN").value_or(JobToken());
    if (config.rank == 0) {
      absl::StatusOr<int64_t> listen_fd = IntFromEnv({"UCCLZIP_LISTEN_FD"}, 0, INT32_MAX, -1);
      if (!listen_fd.ok()) return listen_fd.status();
      if (*listen_fd >= 0) {
        // A descriptor that is closed, a file or an unlistened socket (a launcher's mistake or a
        // stale variable) otherwise failed the rendezvous without naming the variable; it is
        // refused here, and left open: it is not this library's until it is a listening socket.
        int listening = 0;
        socklen_t length = sizeof(listening);
        const bool queried =
            getsockopt(static_cast<int>(*listen_fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0;
        if (!queried || listening == 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "bootstrap from the environment: UCCLZIP_LISTEN_FD='", *listen_fd, "' is not a listening socket",
              queried ? "" : absl::StrCat(" (", std::strerror(errno), ")")));
        }
        // The other ranks connect over IPv4 TCP, and rank 0 tells them the addresses it sees:
        // a Unix or IPv6 socket listened, but gave them none they could reach.
        int domain = 0;
        length = sizeof(domain);
        if (getsockopt(static_cast<int>(*listen_fd), SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0 || domain != AF_INET) {
          return absl::InvalidArgumentError(absl::StrCat("bootstrap from the environment: UCCLZIP_LISTEN_FD='",
                                                         *listen_fd, "' listens, but is not an IPv4 TCP socket"));
        }
        config.listen_fd = static_cast<int>(*listen_fd);
      }
    }
  }
  if (!rank_in_world.ok()) return rank_in_world;
  config.local_rank = static_cast<int>(*local_rank);
  config.timeout = absl::Seconds(*timeout_s);
  return config;
}

}  // namespace ucclzip
