// GetUniqueId and its text form. The id carries rank 0's address and a random token; the
// listening socket GetUniqueId opens waits in a per-process registry until rank 0's
// configuration is made from the id, so that the port can never be taken in between.
#include <netdb.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "transport/socket.h"
#include "transport/wire_bytes.h"
#include "ucclzip/bootstrap.h"

namespace ucclzip {
namespace {

constexpr uint32_t kUniqueIdMagic = 0x49435a55;  // "UZCI"
constexpr size_t kTokenBytes = 16;

struct DecodedId {
  std::string host;
  uint16_t port = 0;
  std::string token;
};

// Listening sockets opened by GetUniqueId in this process, by token.
std::mutex registry_mutex;
std::map<std::string, transport::Socket>& Registry() {
  static auto* registry = new std::map<std::string, transport::Socket>();
  return *registry;
}

std::string RandomToken() {
  std::random_device device;
  std::string token;
  while (token.size() < kTokenBytes) {
    uint32_t word = device();
    token.append(reinterpret_cast<const char*>(&word), sizeof(word));
  }
  return absl::BytesToHexString(token);
}

// The address other hosts reach this one at: UCCLZIP_HOST, else the host name's IPv4 address.
std::string AdvertisedHost() {
  if (const char* host = std::getenv("UCCLZIP_HOST"); host != nullptr && *host != '\0') return host;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &found) != 0 || found == nullptr) return "127.0.0.1";
  freeaddrinfo(found);
  return name;
}

absl::StatusOr<DecodedId> Decode(const UniqueId& id) {
  transport::WireReader reader(absl::string_view(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size()));
  uint32_t magic = 0;
  DecodedId decoded;
  if (!reader.U32(&magic) || magic != kUniqueIdMagic || !reader.U16(&decoded.port) ||
      !reader.String(&decoded.token, 2 * kTokenBytes) || !reader.String(&decoded.host, id.bytes.size()) ||
      decoded.port == 0 || decoded.host.empty()) {
    return absl::InvalidArgumentError("not a ucclzip unique id (made by GetUniqueId)");
  }
  return decoded;
}

}  // namespace

absl::StatusOr<UniqueId> GetUniqueId() {
  absl::StatusOr<transport::Socket> listener = transport::ListenTcp("0.0.0.0", 0, 1024);
  if (!listener.ok()) return listener.status();
  absl::StatusOr<uint16_t> port = transport::LocalPort(*listener);
  if (!port.ok()) return port.status();
  std::string host = AdvertisedHost();
  std::string token = RandomToken();
  transport::WireWriter writer;
  writer.U32(kUniqueIdMagic).U16(*port).String(token).String(host);
  UniqueId id;
  if (writer.bytes().size() > id.bytes.size()) {
    // Named with where it came from and the room there is: an operator's long UCCLZIP_HOST (or
    // fully qualified name) otherwise had nothing to go by.
    const size_t room = id.bytes.size() - (writer.bytes().size() - host.size());
    const char* variable = std::getenv("UCCLZIP_HOST");
    const bool from_variable = variable != nullptr && *variable != '\0';
    return absl::InvalidArgumentError(absl::StrCat("host name '", host, "' (",
                                                   from_variable ? "UCCLZIP_HOST" : "this host's name", ", ",
                                                   host.size(), " bytes) is too long for a unique id: at most ",
                                                   room, " bytes"));
  }
  std::memcpy(id.bytes.data(), writer.bytes().data(), writer.bytes().size());
  std::lock_guard lock(registry_mutex);
  Registry()[token] = std::move(*listener);
  return id;
}

absl::StatusOr<BootstrapConfig> BootstrapConfigFromUniqueId(const UniqueId& id, int rank, int world_size) {
  absl::StatusOr<DecodedId> decoded = Decode(id);
  if (!decoded.ok()) return decoded.status();
  BootstrapConfig config;
  config.host = decoded->host;
  config.port = decoded->port;
  config.rank = rank;
  config.world_size = world_size;
  config.token = decoded->token;
  if (rank == 0) {
    std::lock_guard lock(registry_mutex);
    auto it = Registry().find(decoded->token);
    if (it == Registry().end()) {
      return absl::FailedPreconditionError(
          "rank 0 must run in the process that called GetUniqueId (it holds the listening socket), and use the id once");
    }
    // Bind to every interface (as GetUniqueId did) but keep the advertised host for messages.
    // The descriptor itself moves to the config: a copy could fail (no descriptor left), and
    // rank 0 would then listen anew, where the port may have been taken.
    config.listen_fd = it->second.Release();
    Registry().erase(it);
  }
  return config;
}

std::string UniqueIdToString(const UniqueId& id) {
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size()));
}

absl::StatusOr<UniqueId> UniqueIdFromString(std::string_view text) {
  UniqueId id;
  if (text.size() != 2 * id.bytes.size() ||
      text.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("a unique id is ", 2 * id.bytes.size(), " hex digits; got ", text.size(), " characters"));
  }
  std::string bytes = absl::HexStringToBytes(absl::string_view(text.data(), text.size()));
  std::memcpy(id.bytes.data(), bytes.data(), id.bytes.size());
  if (absl::StatusOr<DecodedId> decoded = Decode(id); !decoded.ok()) return decoded.status();
  return id;
}

}  // namespace ucclzip
