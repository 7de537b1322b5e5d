// The connections a bootstrap listener receives, handed out in the order their first bytes
// arrive: a connection that stays silent (a port scanner, a half-open probe) holds up no other,
// and is dropped once it has been silent for the hello timeout.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/socket.h"

namespace ucclzip::transport {

class Arrivals {
 public:
  Arrivals(const Socket& listener, absl::Duration silence_limit) : listener_(listener), silence_limit_(silence_limit) {}

  // The next connection with bytes to read (or closed by its other end), accepting new ones
  // meanwhile; DeadlineExceeded at `deadline`, or the listener's failure. Connections dropped
  // for their silence are named in `dropped`.
  absl::StatusOr<Socket> Next(absl::Time deadline, std::vector<std::string>* dropped);

 private:
  struct Waiting {
    Socket socket;
    absl::Time since;
    std::string from;
  };
  const Socket& listener_;
  absl::Duration silence_limit_;
  std::vector<Waiting> waiting_;
};

}  // namespace ucclzip::transport
