#include "transport/bootstrap_arrivals.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ucclzip::transport {

absl::StatusOr<Socket> Arrivals::Next(absl::Time deadline, std::vector<std::string>* dropped) {
  while (true) {
    const absl::Time now = absl::Now();
    std::erase_if(waiting_, [&](const Waiting& connection) {
      if (now - connection.since < silence_limit_) return false;
      dropped->push_back(absl::StrCat("connection from ", connection.from, ": silent for ",
                                      absl::FormatDuration(silence_limit_)));
      return true;
    });
    if (now >= deadline) return absl::DeadlineExceededError("accept timed out");
    absl::Time wake = deadline;
    std::vector<pollfd> watched = {{listener_.fd(), POLLIN, 0}};
    for (const Waiting& connection : waiting_) {
      watched.push_back({connection.socket.fd(), POLLIN, 0});
      wake = std::min(wake, connection.since + silence_limit_);
    }
    const int ready = poll(watched.data(), watched.size(), PollTimeoutMs(wake));
    if (ready < 0 && errno != EINTR) return absl::InternalError(absl::StrCat("poll (accept): ", std::strerror(errno)));
    if (ready <= 0) continue;
    for (size_t i = 1; i < watched.size(); ++i) {
      if (watched[i].revents == 0) continue;
      Socket arrived = std::move(waiting_[i - 1].socket);
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i - 1));
      return arrived;
    }
    if (watched[0].revents != 0) {
      // Ready now: AcceptUntil does not wait (a connection reset in between is skipped).
      absl::StatusOr<Socket> accepted = AcceptUntil(listener_, absl::Now());
      if (accepted.ok()) {
        std::string from = PeerAddress(*accepted).value_or("unknown address");
        waiting_.push_back({std::move(*accepted), absl::Now(), std::move(from)});
      } else if (!absl::IsDeadlineExceeded(accepted.status())) {
        return accepted.status();
      }
    }
  }
}

}  // namespace ucclzip::transport
