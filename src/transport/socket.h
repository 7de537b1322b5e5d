// Blocking TCP sockets with deadlines, for the bootstrap. Every wait is bounded by a deadline
// and every error says which address or operation failed; callers add the ranks involved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ucclzip::transport {

// Owns a file descriptor; closes it on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { Close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Close();
  // Gives the descriptor up without closing it.
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// Milliseconds until `deadline` for poll(): at least 0, at most a day (so never infinite, and
// a poll wakes at the latest then to look again).
int PollTimeoutMs(absl::Time deadline);

// Binds and listens on host:port (IPv4; port 0 picks a free port). An address already in use is
// an error, never silently shared.
absl::StatusOr<Socket> ListenTcp(const std::string& host, uint16_t port, int backlog);
// Listens on `port` on every interface, for a rank 0 that the others reach at `host`: they may
// reach it at another address than `host` means here (Debian maps a host's own name to
// 127.0.1.1), as torchrun's store allows. `host` must still be an address of this host, so
// that a rank 0 started elsewhere than where the others look for it fails at once.
absl::StatusOr<Socket> ListenTcpEveryInterface(const std::string& host, uint16_t port, int backlog);

// The local port a socket is bound to.
absl::StatusOr<uint16_t> LocalPort(const Socket& socket);

// The IPv4 address of the other end, as text.
absl::StatusOr<std::string> PeerAddress(const Socket& socket);

// Accepts one connection, or DeadlineExceeded.
absl::StatusOr<Socket> AcceptUntil(const Socket& listener, absl::Time deadline);

// Connects to host:port, retrying with exponential backoff (refused, unreachable, timed out, a
// name that does not resolve yet) until the deadline; the error then carries the last failure.
// A name lookup itself is not bounded by the deadline (getaddrinfo takes what the resolver
// takes).
absl::StatusOr<Socket> ConnectWithRetry(const std::string& host, uint16_t port, absl::Time deadline);

// Sends or receives exactly `bytes` bytes. A closed connection is Unavailable, a passed deadline
// DeadlineExceeded.
absl::Status SendAll(const Socket& socket, const void* data, size_t bytes, absl::Time deadline);
absl::Status RecvAll(const Socket& socket, void* data, size_t bytes, absl::Time deadline);

}  // namespace ucclzip::transport
