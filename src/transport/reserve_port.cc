// ReservePort: a listening socket on a free port, for launchers (ucclzip/bootstrap.h).
#include "absl/strings/str_cat.h"
#include "transport/socket.h"
#include "transport/status_context.h"
#include "ucclzip/bootstrap.h"

namespace ucclzip {

absl::StatusOr<ReservedPort> ReservePort(const std::string& host) {
  // As many waiting connections as a large local job opens at once.
  constexpr int kBacklog = 1024;
  absl::StatusOr<transport::Socket> listener = transport::ListenTcp(host, 0, kBacklog);
  if (!listener.ok()) return transport::WithContext(listener.status(), "reserving a bootstrap port");
  absl::StatusOr<uint16_t> port = transport::LocalPort(*listener);
  if (!port.ok()) return transport::WithContext(port.status(), absl::StrCat("reserving a bootstrap port on ", host));
  ReservedPort reserved;
  reserved.port = *port;
  reserved.listen_fd = listener->Release();
  return reserved;
}

}  // namespace ucclzip
