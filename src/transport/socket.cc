#include "transport/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace ucclzip::transport {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// A name that does not resolve yet may later (EAI_NONAME, EAI_AGAIN, EAI_NODATA): on Kubernetes
// rank 0's service name resolves only once its pod is up. `may_resolve_later`, where given, says
// whether the failure was such.
absl::StatusOr<sockaddr_in> ResolveIpv4(const std::string& host, uint16_t port, bool* may_resolve_later = nullptr) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (host.empty() || inet_pton(AF_INET, host.c_str(), &address.sin_addr) == 1) return address;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0 || found == nullptr) {
    if (may_resolve_later != nullptr) *may_resolve_later = rc == EAI_NONAME || rc == EAI_AGAIN || rc == EAI_NODATA;
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve host '", host, "': ", gai_strerror(rc)));
  }
  address.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return address;
}

// Waits until `events` are ready on the socket, or the deadline passes.
absl::Status WaitReady(const Socket& socket, short events, absl::Time deadline, const char* what) {
  while (true) {
    pollfd entry{socket.fd(), events, 0};
    int rc = poll(&entry, 1, PollTimeoutMs(deadline));
    if (rc > 0) return absl::OkStatus();
    if (rc < 0 && errno != EINTR) return absl::InternalError(absl::StrCat("poll (", what, "): ", ErrnoText(errno)));
    if (rc == 0 && absl::Now() >= deadline) return absl::DeadlineExceededError(absl::StrCat(what, " timed out"));
  }
}

// Binds and listens on `address`; errors name `where`.
absl::StatusOr<Socket> Listen(const sockaddr_in& address, const std::string& where, int backlog) {
  Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket.valid()) return absl::InternalError(absl::StrCat("socket(): ", ErrnoText(errno)));
  // SO_REUSEADDR only skips TIME_WAIT leftovers; Linux still refuses a port someone listens on.
  int one = 1;
  setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(socket.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    int err = errno;
    auto message = absl::StrCat("cannot listen on ", where, ": ", ErrnoText(err));
    return err == EADDRINUSE ? absl::AlreadyExistsError(message) : absl::UnavailableError(message);
  }
  if (listen(socket.fd(), backlog) != 0) {
    return absl::UnavailableError(absl::StrCat("listen on ", where, ": ", ErrnoText(errno)));
  }
  return socket;
}

// Where nobody listens yet on a port of the ephemeral range, Linux may give the connecting end
// that very port, and TCP's simultaneous open then connects the socket to itself: a rank would
// read its own hello back as rank 0's answer.
bool ConnectedToItself(const Socket& socket) {
  sockaddr_in local{}, remote{};
  socklen_t local_length = sizeof(local), remote_length = sizeof(remote);
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
      getpeername(socket.fd(), reinterpret_cast<sockaddr*>(&remote), &remote_length) != 0) {
    return false;
  }
  return local.sin_port == remote.sin_port && local.sin_addr.s_addr == remote.sin_addr.s_addr;
}

}  // namespace

int PollTimeoutMs(absl::Time deadline) {
  // Capped before the rounding up: an infinite timeout's deadline is INT64_MAX milliseconds
  // away, and one more overflowed to a timeout of 0, a poll that spun on its core until the
  // peer came.
  const absl::Duration left = std::min(deadline - absl::Now(), absl::Hours(24));
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(absl::ToInt64Milliseconds(left) + 1);
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

absl::StatusOr<Socket> ListenTcp(const std::string& host, uint16_t port, int backlog) {
  absl::StatusOr<sockaddr_in> address = ResolveIpv4(host, port);
  if (!address.ok()) return address.status();
  return Listen(*address, absl::StrCat(host, ":", port), backlog);
}

absl::StatusOr<Socket> ListenTcpEveryInterface(const std::string& host, uint16_t port, int backlog) {
  absl::StatusOr<sockaddr_in> address = ResolveIpv4(host, 0);
  if (!address.ok()) return address.status();
  {
    // Only a bind says whether the address is this host's. The probe takes any free port, which
    // may be `port` itself, so it is closed before the listener binds.
    Socket probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe.valid()) return absl::InternalError(absl::StrCat("socket(): ", ErrnoText(errno)));
    if (bind(probe.fd(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address)) != 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port, ": '", host,
                                                 "' is not an address of this host (", ErrnoText(errno), ")"));
    }
  }
  sockaddr_in every_interface{};
  every_interface.sin_family = AF_INET;
  every_interface.sin_addr.s_addr = htonl(INADDR_ANY);
  every_interface.sin_port = htons(port);
  return Listen(every_interface, absl::StrCat(host, ":", port, " (on every interface)"), backlog);
}

absl::StatusOr<uint16_t> LocalPort(const Socket& socket) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::InternalError(absl::StrCat("getsockname: ", ErrnoText(errno)));
  }
  return ntohs(address.sin_port);
}

absl::StatusOr<std::string> PeerAddress(const Socket& socket) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (getpeername(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::InternalError(absl::StrCat("getpeername: ", ErrnoText(errno)));
  }
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
  return std::string(text);
}

absl::StatusOr<Socket> AcceptUntil(const Socket& listener, absl::Time deadline) {
  while (true) {
    if (absl::Status ready = WaitReady(listener, POLLIN, deadline, "accept"); !ready.ok()) return ready;
    Socket accepted(accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (accepted.valid()) {
      int one = 1;
      setsockopt(accepted.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return accepted;
    }
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
      return absl::InternalError(absl::StrCat("accept: ", ErrnoText(errno)));
    }
  }
}

absl::StatusOr<Socket> ConnectWithRetry(const std::string& host, uint16_t port, absl::Time deadline) {
  absl::Duration backoff = absl::Milliseconds(10);
  std::string last_error = "no attempt made";
  while (true) {
    // Resolved on every attempt: a name that does not resolve yet is waited for as a peer that
    // does not listen yet is.
    bool may_resolve_later = false;
    absl::StatusOr<sockaddr_in> address = ResolveIpv4(host, port, &may_resolve_later);
    if (!address.ok() && !may_resolve_later) return address.status();
    if (address.ok()) {
      Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      if (!socket.valid()) return absl::InternalError(absl::StrCat("socket(): ", ErrnoText(errno)));
      int rc = connect(socket.fd(), reinterpret_cast<const sockaddr*>(&*address), sizeof(*address));
      int err = rc == 0 ? 0 : errno;
      if (err == EINPROGRESS) {
        // The attempt may take at most the time left.
        absl::Status ready = WaitReady(socket, POLLOUT, deadline, "connect");
        socklen_t length = sizeof(err);
        if (ready.ok()) getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &err, &length);
        else err = ETIMEDOUT;
      }
      if (err == 0 && ConnectedToItself(socket)) {
        // Reset, not closed: a closed one would hold the port in TIME_WAIT for a minute, and
        // rank 0 could not listen there.
        const linger reset{1, 0};
        setsockopt(socket.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
        last_error = "connected to itself: nobody listens there yet, and the port is one of this host's ephemeral ones";
      } else if (err == 0) {
        fcntl(socket.fd(), F_SETFL, fcntl(socket.fd(), F_GETFL) & ~O_NONBLOCK);
        int one = 1;
        setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return socket;
      } else {
        last_error = ErrnoText(err);
      }
    } else {
      last_error = std::string(address.status().message());
    }
    absl::Time now = absl::Now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(std::min(backoff, deadline - now)));
    backoff = std::min(backoff * 2, absl::Milliseconds(500));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("could not connect to ", host, ":", port, " before the deadline (last error: ", last_error, ")"));
}

absl::Status SendAll(const Socket& socket, const void* data, size_t bytes, absl::Time deadline) {
  const char* cursor = static_cast<const char*>(data);
  while (bytes > 0) {
    if (absl::Status ready = WaitReady(socket, POLLOUT, deadline, "send"); !ready.ok()) return ready;
    ssize_t sent = send(socket.fd(), cursor, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("send: ", ErrnoText(errno)));
    }
    cursor += sent;
    bytes -= static_cast<size_t>(sent);
  }
  return absl::OkStatus();
}

absl::Status RecvAll(const Socket& socket, void* data, size_t bytes, absl::Time deadline) {
  char* cursor = static_cast<char*>(data);
  while (bytes > 0) {
    if (absl::Status ready = WaitReady(socket, POLLIN, deadline, "receive"); !ready.ok()) return ready;
    ssize_t received = recv(socket.fd(), cursor, bytes, MSG_DONTWAIT);
    if (received == 0) return absl::UnavailableError("connection closed by the other side");
    if (received < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("receive: ", ErrnoText(errno)));
    }
    cursor += received;
    bytes -= static_cast<size_t>(received);
  }
  return absl::OkStatus();
}

}  // namespace ucclzip::transport
