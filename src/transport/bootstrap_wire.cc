#include "transport/bootstrap_wire.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "transport/wire_bytes.h"

namespace ucclzip::transport {
namespace {
constexpr size_t kMaxHostBytes = 256;
constexpr size_t kMaxHelloBytes = 64 + kMaxTokenBytes;
}  // namespace

absl::Status SendFrame(const Socket& socket, uint64_t tag, absl::string_view payload, absl::Time deadline,
                       bool* began) {
  WireWriter header;
  header.U64(tag).U64(payload.size());
  const std::string& head = header.bytes();
  // The first byte apart: until it has gone, a failure leaves the stream as it was.
  if (absl::Status s = SendAll(socket, head.data(), 1, deadline); !s.ok()) return s;
  if (began != nullptr) *began = true;
  if (absl::Status s = SendAll(socket, head.data() + 1, head.size() - 1, deadline); !s.ok()) return s;
  return SendAll(socket, payload.data(), payload.size(), deadline);
}

absl::StatusOr<Frame> RecvFrame(const Socket& socket, absl::Time deadline, bool* began) {
  char header_bytes[16];
  // The first byte apart: until it has arrived, a timeout leaves the stream as it was.
  if (absl::Status s = RecvAll(socket, header_bytes, 1, deadline); !s.ok()) return s;
  if (began != nullptr) *began = true;
  if (absl::Status s = RecvAll(socket, header_bytes + 1, sizeof(header_bytes) - 1, deadline); !s.ok()) return s;
  WireReader header(absl::string_view(header_bytes, sizeof(header_bytes)));
  Frame frame;
  uint64_t length = 0;
  header.U64(&frame.tag);
  header.U64(&length);
  if (length > kMaxFrameBytes) {
    return absl::DataLossError(absl::StrCat("bootstrap frame claims ", length, " bytes (limit ", kMaxFrameBytes, ")"));
  }
  frame.payload.resize(length);
  if (absl::Status s = RecvAll(socket, frame.payload.data(), length, deadline); !s.ok()) return s;
  return frame;
}

std::string EncodeHello(const Hello& hello) {
  WireWriter w;
  w.U32(hello.magic).U16(hello.version).U32(hello.rank).U32(hello.world_size).String(hello.token).U16(hello.mesh_port);
  return w.bytes();
}

absl::StatusOr<Hello> DecodeHello(absl::string_view bytes) {
  WireReader r(bytes);
  Hello hello;
  if (!r.U32(&hello.magic) || hello.magic != kBootstrapMagic) {
    return absl::InvalidArgumentError("not a ucclzip bootstrap hello (bad magic)");
  }
  if (!r.U16(&hello.version) || hello.version != kBootstrapVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("bootstrap protocol version ", hello.version, ", expected ", kBootstrapVersion));
  }
  if (!r.U32(&hello.rank) || !r.U32(&hello.world_size) || !r.String(&hello.token, kMaxTokenBytes) ||
      !r.U16(&hello.mesh_port) || !r.at_end()) {
    return absl::InvalidArgumentError("malformed bootstrap hello");
  }
  return hello;
}

absl::Status SendHello(const Socket& socket, const Hello& hello, absl::Time deadline) {
  std::string body = EncodeHello(hello);
  WireWriter prefix;
  prefix.U32(static_cast<uint32_t>(body.size()));
  if (absl::Status s = SendAll(socket, prefix.bytes().data(), 4, deadline); !s.ok()) return s;
  return SendAll(socket, body.data(), body.size(), deadline);
}

absl::StatusOr<Hello> RecvHello(const Socket& socket, absl::Time deadline) {
  char prefix_bytes[4];
  if (absl::Status s = RecvAll(socket, prefix_bytes, 4, deadline); !s.ok()) return s;
  uint32_t length = 0;
  WireReader(absl::string_view(prefix_bytes, 4)).U32(&length);
  if (length > kMaxHelloBytes) {
    return absl::InvalidArgumentError(absl::StrCat("not a ucclzip bootstrap hello (", length, "-byte record)"));
  }
  std::string body(length, '\0');
  if (absl::Status s = RecvAll(socket, body.data(), length, deadline); !s.ok()) return s;
  return DecodeHello(body);
}

absl::Status CheckHello(const Hello& hello, int my_rank, int world_size, const std::string& token,
                        const std::vector<bool>& seen) {
  if (hello.world_size != static_cast<uint32_t>(world_size)) {
    return absl::FailedPreconditionError(absl::StrCat("world size mismatch: rank ", hello.rank, " says ",
                                                      hello.world_size, ", rank ", my_rank, " says ", world_size));
  }
  if (hello.rank >= static_cast<uint32_t>(world_size) || static_cast<int>(hello.rank) == my_rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", hello.rank, " is not a valid peer of rank ", my_rank, " in a world of ", world_size));
  }
  if (hello.token != token) {
    return absl::PermissionDeniedError(absl::StrCat("rank ", hello.rank, " presented the wrong token"));
  }
  if (seen[hello.rank]) {
    return absl::AlreadyExistsError(absl::StrCat("rank ", hello.rank, " connected twice"));
  }
  return absl::OkStatus();
}

void WriteVerdict(WireWriter& writer, const absl::Status& verdict) {
  writer.U32(static_cast<uint32_t>(verdict.code())).String(verdict.message());
}

bool ReadVerdict(WireReader& reader, absl::Status* verdict) {
  uint32_t code = 0;
  std::string message;
  if (!reader.U32(&code) || !reader.String(&message, kMaxFrameBytes) || code > 16) return false;
  *verdict = absl::Status(static_cast<absl::StatusCode>(code), message);
  return true;
}

std::string EncodeVerdict(const absl::Status& verdict) {
  WireWriter w;
  WriteVerdict(w, verdict);
  return w.bytes();
}

absl::Status DecodeVerdict(absl::string_view bytes) {
  WireReader r(bytes);
  absl::Status verdict;
  if (!ReadVerdict(r, &verdict)) return absl::DataLossError("malformed verdict from rank 0");
  return verdict;
}

absl::Status DecodeAbort(absl::string_view bytes) {
  absl::Status why = DecodeVerdict(bytes);
  if (why.ok()) return absl::DataLossError("malformed abort: it gives no failure");
  return why;
}

std::string MeshHost(const std::string& seen_from, const std::string& root_host) {
  return absl::StartsWith(seen_from, "127.") ? root_host : seen_from;
}

std::string EncodeTable(const std::vector<MeshEndpoint>& table) {
  WireWriter w;
  w.U32(static_cast<uint32_t>(table.size()));
  for (const MeshEndpoint& entry : table) w.String(entry.host).U16(entry.port);
  return w.bytes();
}

absl::StatusOr<std::vector<MeshEndpoint>> DecodeTable(absl::string_view bytes, int world_size) {
  WireReader r(bytes);
  uint32_t count = 0;
  if (!r.U32(&count) || count != static_cast<uint32_t>(world_size)) {
    return absl::DataLossError(absl::StrCat("rank table from rank 0 has ", count, " entries, expected ", world_size));
  }
  std::vector<MeshEndpoint> table(count);
  for (MeshEndpoint& entry : table) {
    if (!r.String(&entry.host, kMaxHostBytes) || !r.U16(&entry.port)) {
      return absl::DataLossError("malformed rank table from rank 0");
    }
  }
  return table;
}

}  // namespace ucclzip::transport
