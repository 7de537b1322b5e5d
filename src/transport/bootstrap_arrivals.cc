#include "transport/bootstrap_arrivals.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ucclzip::transport {

bool Refusals::Add(std::string why) {
  ++count_;
  if (named_.size() == kNamed) return false;
  named_.push_back(std::move(why));
  return true;
}

std::string Refusals::List() const {
  if (count_ == 0) return "";
  return absl::StrCat(" (refused: ", absl::StrJoin(named_, "; "),
                      count_ > named_.size() ? absl::StrCat("; and ", count_ - named_.size(), " more") : "", ")");
}

absl::StatusOr<Socket> Arrivals::Next(absl::Time deadline, Refusals* dropped) {
  while (true) {
    absl::Time wake = deadline;
    std::vector<pollfd> watched = {{listener_.fd(), POLLIN, 0}};
    for (const Waiting& connection : waiting_) {
      watched.push_back({connection.socket.fd(), POLLIN, 0});
      wake = std::min(wake, connection.since + silence_limit_);
    }
    const int ready = poll(watched.data(), watched.size(), PollTimeoutMs(wake));
    if (ready < 0 && errno != EINTR) return absl::InternalError(absl::StrCat("poll (accept): ", std::strerror(errno)));
    // Bytes that came count before any silence is judged: the caller may have spent a while on
    // another connection meanwhile.
    for (size_t i = 1; ready > 0 && i < watched.size(); ++i) {
      if (watched[i].revents == 0) continue;
      Socket arrived = std::move(waiting_[i - 1].socket);
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i - 1));
      return arrived;
    }
    const absl::Time now = absl::Now();
    std::erase_if(waiting_, [&](const Waiting& connection) {
      if (now - connection.since < silence_limit_) return false;
      dropped->Add(absl::StrCat("connection from ", connection.from, ": silent for ",
                                      absl::FormatDuration(silence_limit_)));
      return true;
    });
    if (ready > 0 && watched[0].revents != 0) {
      // Ready now: AcceptUntil does not wait (a connection reset in between is skipped).
      absl::StatusOr<Socket> accepted = AcceptUntil(listener_, now);
      if (accepted.ok()) {
        if (waiting_.size() == kMaxWaiting) {
          dropped->Add(absl::StrCat("connection from ", waiting_.front().from, ": silent while ", kMaxWaiting,
                                          " more came"));
          waiting_.erase(waiting_.begin());
        }
        std::string from = PeerAddress(*accepted).value_or("unknown address");
        waiting_.push_back({std::move(*accepted), now, std::move(from)});
      } else if (!absl::IsDeadlineExceeded(accepted.status())) {
        return accepted.status();
      }
    }
    if (now >= deadline) return absl::DeadlineExceededError("accept timed out");
  }
}

}  // namespace ucclzip::transport
