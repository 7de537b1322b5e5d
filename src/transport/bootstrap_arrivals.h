// The connections a bootstrap listener receives, handed out in the order their first bytes
// arrive: a connection that stays silent (a port scanner, a half-open probe) holds up no other,
// and is dropped once the silence limit has passed since it was accepted with nothing come.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/socket.h"

namespace ucclzip::transport {

// The connections a rendezvous refused or dropped, for its error should a rank never come: the
// first kNamed named, the others counted, so that a port scanner or a health probe hitting the
// port through a long rendezvous costs no memory (until session 38 every one was kept).
class Refusals {
 public:
  static constexpr size_t kNamed = 16;
  // True if `why` is among the named (the ones worth a log line each).
  bool Add(std::string why);
  size_t count() const { return count_; }
  // " (refused: a; b; and N more)", or nothing.
  std::string List() const;

 private:
  std::vector<std::string> named_;
  size_t count_ = 0;
};

class Arrivals {
 public:
  Arrivals(const Socket& listener, absl::Duration silence_limit) : listener_(listener), silence_limit_(silence_limit) {}

  // The next connection with bytes to read (or closed by its other end), accepting new ones
  // meanwhile; DeadlineExceeded at `deadline`, or the listener's failure. Connections dropped
  // for their silence go to `dropped`.
  absl::StatusOr<Socket> Next(absl::Time deadline, Refusals* dropped);

 private:
  struct Waiting {
    Socket socket;
    absl::Time since;
    std::string from;
  };
  // Silent connections held at once; a flood of them drops the oldest, not the descriptors'
  // limit the rendezvous.
  static constexpr size_t kMaxWaiting = 256;
  const Socket& listener_;
  absl::Duration silence_limit_;
  std::vector<Waiting> waiting_;
};

}  // namespace ucclzip::transport
