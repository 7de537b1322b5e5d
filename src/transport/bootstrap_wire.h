// What the bootstrap's TCP connections carry: framed messages (tag, length, payload) and the
// handshake records that open each connection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/socket.h"
#include "transport/wire_bytes.h"

namespace ucclzip::transport {

inline constexpr uint32_t kBootstrapMagic = 0x425a4355;  // "UCZB" on the wire
// 2 (session 37): an allgather's frames carry a verdict before their entries.
inline constexpr uint16_t kBootstrapVersion = 2;
// The bootstrap carries addresses and small control messages, never bulk data; a frame that
// claims more is a stranger or a bug.
inline constexpr uint64_t kMaxFrameBytes = uint64_t{64} << 20;
inline constexpr size_t kMaxTokenBytes = 1024;

// Tags with the top bit set belong to the bootstrap itself; user tags must leave it clear.
inline constexpr uint64_t kReservedTagBit = uint64_t{1} << 63;
inline constexpr uint64_t kVerdictTag = kReservedTagBit | 1;
inline constexpr uint64_t kTableTag = kReservedTagBit | 2;
inline constexpr uint64_t kAbortTag = kReservedTagBit | 3;
inline constexpr uint64_t kCollectiveTagBase = kReservedTagBit | (uint64_t{1} << 32);

struct Frame {
  uint64_t tag = 0;
  std::string payload;
};
// `began`, where given, is set once the frame's first byte went or came: a failure after that
// leaves the stream inside a frame, out of step for every later one.
absl::Status SendFrame(const Socket& socket, uint64_t tag, absl::string_view payload, absl::Time deadline,
                       bool* began = nullptr);
absl::StatusOr<Frame> RecvFrame(const Socket& socket, absl::Time deadline, bool* began = nullptr);

// First message on every connection, from the connecting rank.
struct Hello {
  uint32_t magic = kBootstrapMagic;
  uint16_t version = kBootstrapVersion;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  std::string token;
  uint16_t mesh_port = 0;  // where this rank accepts connections from higher ranks
};
std::string EncodeHello(const Hello& hello);
absl::StatusOr<Hello> DecodeHello(absl::string_view bytes);
// Reads a hello with its fixed-size length prefix (a stranger's garbage fails fast).
absl::StatusOr<Hello> RecvHello(const Socket& socket, absl::Time deadline);
absl::Status SendHello(const Socket& socket, const Hello& hello, absl::Time deadline);

// Why the receiving rank refuses `hello`, or OK. `seen` marks ranks already connected.
absl::Status CheckHello(const Hello& hello, int my_rank, int world_size, const std::string& token,
                        const std::vector<bool>& seen);

// Rank 0's answer to a hello: accepted, or the reason for the refusal.
std::string EncodeVerdict(const absl::Status& verdict);
absl::Status DecodeVerdict(absl::string_view bytes);
// A verdict within a larger record (an allgather's frames): false where it is malformed.
void WriteVerdict(WireWriter& writer, const absl::Status& verdict);
bool ReadVerdict(WireReader& reader, absl::Status* verdict);
// Why a rank aborted the bootstrap (a kAbortTag frame carries a verdict): never OK, for an abort
// that says OK is malformed, and the wait it ends must still fail.
absl::Status DecodeAbort(absl::string_view bytes);

// Where each rank accepts mesh connections (rank 0's host is left empty: the others know it).
struct MeshEndpoint {
  std::string host;
  uint16_t port = 0;
};
// Where the other ranks reach a rank whose connection rank 0 saw come from `seen_from`: there,
// unless that is a loopback address (127.0.0.0/8). A rank that reached rank 0 over loopback
// shares rank 0's host, which every rank reaches at `root_host` (the unique id's host): with a
// host name that resolves to 127.0.1.1 (Debian's /etc/hosts), ranks on rank 0's host connect
// from 127.0.0.1, and ranks of other hosts sent there would reach themselves.
std::string MeshHost(const std::string& seen_from, const std::string& root_host);

std::string EncodeTable(const std::vector<MeshEndpoint>& table);
absl::StatusOr<std::vector<MeshEndpoint>> DecodeTable(absl::string_view bytes, int world_size);

}  // namespace ucclzip::transport
