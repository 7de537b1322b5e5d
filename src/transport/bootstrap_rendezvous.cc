// Bootstrap::Create: the star rendezvous at rank 0, then the mesh between the other ranks.
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "logging/logging.h"
#include "transport/bootstrap_arrivals.h"
#include "transport/bootstrap.h"
#include "transport/bootstrap_wire.h"
#include "transport/status_context.h"

namespace ucclzip::transport {
namespace {

// A connection that has not begun its hello within this time, or not finished it within this
// time of its first byte, is dropped. Connections are taken in the order their first bytes
// arrive (Arrivals), so that a silent stranger holds up no rank's hello.
constexpr absl::Duration kHelloTimeout = absl::Seconds(5);
constexpr int kMaxWorldSize = 1 << 16;
constexpr absl::Duration kRootAnswerGrace = absl::Seconds(2);

absl::Status CheckConfig(const BootstrapConfig& config) {
  auto context = absl::StrCat("bootstrap config of rank ", config.rank, " (world size ", config.world_size, ")");
  if (config.world_size < 1 || config.world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": world size must lie in [1, ", kMaxWorldSize, "]"));
  }
  if (config.rank < 0 || config.rank >= config.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": rank out of range"));
  }
  if (config.token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": token longer than ", kMaxTokenBytes, " bytes"));
  }
  if (config.world_size > 1 && config.port == 0 && !(config.rank == 0 && config.listen_fd >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": no port for rank 0 (", config.host, ":0)"));
  }
  if (config.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": timeout must be positive"));
  }
  return absl::OkStatus();
}

std::string RankList(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

std::vector<int> MissingRanks(const std::vector<bool>& seen, int skip) {
  std::vector<int> missing;
  for (int r = 0; r < static_cast<int>(seen.size()); ++r) {
    if (r != skip && !seen[r]) missing.push_back(r);
  }
  return missing;
}

// Rank 0: admits every other rank, then sends each the table of mesh endpoints.
absl::StatusOr<std::vector<Socket>> AdmitAll(const BootstrapConfig& config, absl::Time deadline) {
  const std::string where = absl::StrCat(config.host, ":", config.port);
  Socket listener;
  if (config.listen_fd >= 0) {
    listener = Socket(config.listen_fd);
  } else {
    absl::StatusOr<Socket> bound = ListenTcpEveryInterface(config.host, config.port, std::max(config.world_size, 128));
    if (!bound.ok()) return WithContext(bound.status(), "rank 0: bootstrap");
    listener = std::move(*bound);
  }
  std::vector<Socket> peers(config.world_size);
  std::vector<bool> seen(config.world_size, false);
  std::vector<MeshEndpoint> table(config.world_size);
  Refusals refused;
  int admitted = 0;
  // Set where accepting failed before the deadline (an inherited descriptor that is no listening
  // socket, say): that, not "timed out ... never arrived", is then the error, at once.
  absl::Status accept_failed;
  Arrivals arrivals(listener, kHelloTimeout);
  while (admitted < config.world_size - 1) {
    absl::StatusOr<Socket> connection = arrivals.Next(deadline, &refused);
    if (!connection.ok()) {
      if (!absl::IsDeadlineExceeded(connection.status())) {
        accept_failed = WithContext(
            connection.status(),
            absl::StrCat("rank 0: bootstrap rendezvous at ", where,
                         config.listen_fd >= 0 ? absl::StrCat(" (inherited socket ", config.listen_fd, ")") : "",
                         ": ", RankList(MissingRanks(seen, 0)), " of world size ", config.world_size,
                         " not admitted"));
      }
      break;
    }
    std::string from = PeerAddress(*connection).value_or("unknown address");
    absl::StatusOr<Hello> hello = RecvHello(*connection, std::min(deadline, absl::Now() + kHelloTimeout));
    // A hello that came but is refused (another protocol version, say) is answered with why, as
    // a wrong rank or token is: the rank would otherwise only see its connection closed.
    absl::Status verdict = hello.ok() ? CheckHello(*hello, 0, config.world_size, config.token, seen) : hello.status();
    SendFrame(*connection, kVerdictTag, EncodeVerdict(verdict), deadline).IgnoreError();  // refused ranks may be gone
    if (!verdict.ok()) {
      refused.Add(absl::StrCat("connection from ", from, ": ", verdict.message()));
      continue;
    }
    seen[hello->rank] = true;
    table[hello->rank] = MeshEndpoint{MeshHost(from, config.host), hello->mesh_port};
    peers[hello->rank] = std::move(*connection);
    ++admitted;
  }
  if (admitted < config.world_size - 1) {
    auto why = !accept_failed.ok() ? accept_failed : absl::DeadlineExceededError(absl::StrCat(
        "rank 0: bootstrap rendezvous at ", where, " timed out after ", absl::FormatDuration(config.timeout), ": ",
        RankList(MissingRanks(seen, 0)), " of world size ", config.world_size, " never arrived",
        refused.List()));
    for (Socket& peer : peers) {
      if (peer.valid()) SendFrame(peer, kAbortTag, EncodeVerdict(why), absl::Now() + absl::Seconds(1)).IgnoreError();
    }
    return why;
  }
  std::string encoded = EncodeTable(table);
  for (int r = 1; r < config.world_size; ++r) {
    if (absl::Status s = SendFrame(peers[r], kTableTag, encoded, deadline); !s.ok()) {
      return WithContext(s, absl::StrCat("rank 0: bootstrap, sending the rank table to rank ", r));
    }
  }
  return peers;
}

// Other ranks: joins at rank 0, then connects to the lower ranks and accepts the higher ones.
absl::StatusOr<std::vector<Socket>> Join(const BootstrapConfig& config, absl::Time deadline) {
  const int rank = config.rank;
  const std::string where = absl::StrCat(config.host, ":", config.port);
  absl::StatusOr<Socket> mesh_listener = ListenTcp("0.0.0.0", 0, std::max(config.world_size, 128));
  if (!mesh_listener.ok()) return WithContext(mesh_listener.status(), absl::StrCat("rank ", rank, ": bootstrap mesh"));
  absl::StatusOr<uint16_t> mesh_port = LocalPort(*mesh_listener);
  if (!mesh_port.ok()) return mesh_port.status();

  std::vector<Socket> peers(config.world_size);
  absl::StatusOr<Socket> root = ConnectWithRetry(config.host, config.port, deadline);
  if (!root.ok()) {
    return WithContext(root.status(), absl::StrCat("rank ", rank, ": rank 0 never arrived at ", where, " within ",
                                                   absl::FormatDuration(config.timeout)));
  }
  Hello hello;
  hello.rank = static_cast<uint32_t>(rank);
  hello.world_size = static_cast<uint32_t>(config.world_size);
  hello.token = config.token;
  hello.mesh_port = *mesh_port;
  auto at_root = absl::StrCat("rank ", rank, ": bootstrap at rank 0 (", where, ")");
  if (absl::Status s = SendHello(*root, hello, deadline); !s.ok()) return WithContext(s, at_root);
  absl::StatusOr<Frame> verdict = RecvFrame(*root, deadline);
  if (!verdict.ok()) return WithContext(verdict.status(), at_root);
  if (verdict->tag != kVerdictTag) return absl::DataLossError(absl::StrCat(at_root, ": unexpected reply"));
  if (absl::Status admitted = DecodeVerdict(verdict->payload); !admitted.ok()) {
    return WithContext(admitted, absl::StrCat(at_root, ": refused"));
  }
  // Rank 0 answers at the latest at its own deadline, with the table or with the names of the
  // ranks that never arrived; the grace lets that answer, not a local timeout, end the wait.
  absl::StatusOr<Frame> table_frame = RecvFrame(*root, deadline + kRootAnswerGrace);
  if (!table_frame.ok()) return WithContext(table_frame.status(), at_root);
  if (table_frame->tag == kAbortTag) return WithContext(DecodeAbort(table_frame->payload), at_root);
  absl::StatusOr<std::vector<MeshEndpoint>> table = DecodeTable(table_frame->payload, config.world_size);
  if (!table.ok()) return WithContext(table.status(), at_root);
  peers[0] = std::move(*root);

  for (int lower = 1; lower < rank; ++lower) {
    const MeshEndpoint& endpoint = (*table)[lower];
    absl::StatusOr<Socket> connection = ConnectWithRetry(endpoint.host, endpoint.port, deadline);
    auto context = absl::StrCat("rank ", rank, ": bootstrap mesh connection to rank ", lower, " at ", endpoint.host,
                                ":", endpoint.port);
    if (!connection.ok()) return WithContext(connection.status(), context);
    if (absl::Status s = SendHello(*connection, hello, deadline); !s.ok()) return WithContext(s, context);
    peers[lower] = std::move(*connection);
  }
  std::vector<bool> seen(config.world_size, false);
  for (int r = 0; r < rank; ++r) seen[r] = true;  // only higher ranks connect here
  int expected = config.world_size - 1 - rank;
  Refusals refused;
  Arrivals arrivals(*mesh_listener, kHelloTimeout);
  while (expected > 0) {
    absl::StatusOr<Socket> connection = arrivals.Next(deadline, &refused);
    if (!connection.ok()) {
      const std::string missing = absl::StrCat(
          "rank ", rank, ": bootstrap mesh: ", RankList(MissingRanks(seen, rank)), " never connected",
          refused.List());
      if (!absl::IsDeadlineExceeded(connection.status())) return WithContext(connection.status(), missing);
      return absl::DeadlineExceededError(missing);
    }
    absl::StatusOr<Hello> peer_hello = RecvHello(*connection, std::min(deadline, absl::Now() + kHelloTimeout));
    // Strangers and bad hellos are dropped, and named if the rightful rank never comes.
    absl::Status verdict =
        peer_hello.ok() ? CheckHello(*peer_hello, rank, config.world_size, config.token, seen) : peer_hello.status();
    if (!verdict.ok()) {
      std::string why = absl::StrCat("connection from ", PeerAddress(*connection).value_or("unknown address"), ": ",
                                     verdict.message());
      if (refused.Add(why)) UCCLZIP_LOG(kWarning) << "rank " << rank << ": bootstrap mesh refused " << why;
      continue;
    }
    seen[peer_hello->rank] = true;
    peers[peer_hello->rank] = std::move(*connection);
    --expected;
  }
  return peers;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Bootstrap>> Bootstrap::Create(const BootstrapConfig& config) {
  if (absl::Status s = CheckConfig(config); !s.ok()) {
    if (config.listen_fd >= 0) Socket adopted(config.listen_fd);  // adopted even when unusable: never leaked
    return s;
  }
  // Only rank 0 listens; a socket handed to another rank is closed here, not leaked with its port.
  if (config.rank != 0 && config.listen_fd >= 0) Socket unused(config.listen_fd);
  const absl::Time start = absl::Now(), deadline = start + config.timeout;
  UCCLZIP_LOG(kDebug) << "rank " << config.rank << " of " << config.world_size << ": bootstrap rendezvous at "
                      << config.host << ":" << config.port << (config.listen_fd >= 0 ? " (inherited socket)" : "");
  absl::StatusOr<std::vector<Socket>> peers =
      config.rank == 0 ? AdmitAll(config, deadline) : Join(config, deadline);
  if (!peers.ok()) {
    UCCLZIP_LOG(kWarning) << peers.status();
    return peers.status();
  }
  UCCLZIP_LOG(kDebug) << "rank " << config.rank << ": bootstrap mesh of " << config.world_size << " ranks formed in "
                      << absl::FormatDuration(absl::Now() - start);
  return std::unique_ptr<Bootstrap>(new Bootstrap(config.rank, std::move(*peers)));
}

}  // namespace ucclzip::transport
