// How the time of one link (this rank's sends to one peer) is shared among the blocks on it, so
// that each block, and with it each choice of plain or compressed, is charged the link time its
// own bytes took (CompressionPolicy's rates). Several blocks are on a link at once (the send
// window keeps two on their way), and the transport may take them in turn or move them together.
// On the CPU machine's shaped 1 Gbit/s tcp link (4-rank allreduce, 4 MB blocks) two plain blocks
// posted together finished 33 and 61 ms later (in turn), while a plain probe posted behind a frame
// finished 36 us after it, the two having moved their 6.7 MB together in 57.6 ms. Charged the
// time since the link's previous completion, as the policy did before, blocks taken in turn get
// their own turn, but that probe got 36 us (4 MB at 120 GB/s: auto turned plain) and the frame
// the time of both (auto's compressed rate fell).
//
// So what a block of each kind (the caller's: a choice on a memory path) needs of the link is
// learnt from the blocks of that kind that had the link to their kind alone, where sharing
// cannot mislead: their wire bytes over the link's time since its previous completion, a moving
// average per kind (RateMeter). A finishing block is charged, of the time since the link's
// previous completion, what its bytes need at its kind's rate, less what it was given before;
// the rest goes to the other blocks on the link, the earliest first, each up to what it still
// needs and to the time it has been on the link; what is left stays with the finishing block.
// Where a kind's rate is not known yet, its blocks need all the time there is: a finishing block
// then takes its whole turn, as blocks taken in turn do. Blocks taken in turn are so charged their
// own turns, blocks moved together each what its bytes took, at its own kind's speed (frames may
// move slower than plain blocks, a receiver decoding them holding the link back), and the
// charges add up to the link's busy time.
// A block whose pipeline started before it joined the link (a frame's encode) is also charged
// the part of that time in which the link carried nothing: the idle time it caused.
//
// Pipeline thread only; times are passed in, so tests can drive it with any clock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "pipeline/rate_meter.h"

namespace ucclzip::pipeline {

class LinkShare {
 public:
  using Ticket = uint64_t;  // never 0

  // A block of kind `kind` (a small number >= 0) and `wire_bytes` joins the link at `now`; its
  // pipeline started at `started` (<= now).
  Ticket Join(int kind, uint64_t wire_bytes, absl::Time started, absl::Time now) {
    // A kind's first block is a sample too: had it paid for setting the link up, it only makes
    // the kind look slower, so that its blocks take their whole turns for a while, as before the
    // rates are known; left out, the block that finished 36 us after it, the two having moved
    // together, would be the first sample, at 1000 times the link's speed.
    if (static_cast<size_t>(kind) >= alone_.size()) alone_.resize(kind + 1, RateMeter(/*skip_first=*/false));
    const absl::Duration idle = on_link_.empty() ? now - std::max(started, last_finish_) : absl::ZeroDuration();
    Block block{next_, kind, wire_bytes, now, std::max(idle, absl::ZeroDuration())};
    for (Block& other : on_link_) {
      if (other.kind != kind) other.shared = block.shared = true;
    }
    on_link_.push_back(block);
    alone_[kind].Begin();
    return next_++;
  }

  // The block of `ticket` has left the link at `now` (`ok`: its bytes arrived); returns the time
  // it is charged: its share of the link's busy time and the idle time it caused.
  absl::Duration Finish(Ticket ticket, absl::Time now, bool ok) {
    auto it = std::find_if(on_link_.begin(), on_link_.end(), [&](const Block& b) { return b.ticket == ticket; });
    if (it == on_link_.end()) return absl::ZeroDuration();
    const absl::Duration busy = std::max(now - std::max(it->joined, last_finish_), absl::ZeroDuration());
    last_finish_ = std::max(last_finish_, now);
    absl::Duration rest = busy;
    const absl::Duration own = std::min(rest, Need(*it));
    it->on_link += own;
    rest -= own;
    for (Block& other : on_link_) {
      if (rest <= absl::ZeroDuration()) break;
      if (other.ticket == ticket) continue;
      const absl::Duration room = std::min(Need(other), now - other.joined - other.on_link);
      const absl::Duration given = std::clamp(room, absl::ZeroDuration(), rest);
      other.on_link += given;
      rest -= given;
    }
    it->on_link += rest;
    // A block that shared the link with another kind is no sample of its kind's speed.
    const bool sample = ok && !it->shared;
    alone_[it->kind].End(sample ? busy : absl::ZeroDuration(), sample ? it->wire_bytes : 0);
    const absl::Duration charged = it->idle + it->on_link;
    on_link_.erase(it);
    return charged;
  }

  // Wire bytes per second of link time that blocks of `kind` moved with the link to their kind
  // alone, where known.
  std::optional<double> wire_rate(int kind) const {
    if (static_cast<size_t>(kind) >= alone_.size()) return std::nullopt;
    return alone_[kind].rate();
  }

 private:
  struct Block {
    Ticket ticket;
    int kind;
    uint64_t wire_bytes;
    absl::Time joined;
    absl::Duration idle;  // the link's idle time between its pipeline's start and its join
    absl::Duration on_link = absl::ZeroDuration();  // link time given to it so far
    bool shared = false;  // a block of another kind was on the link with it
  };
  // The link time `block` still needs at its kind's rate; all the time there is while the rate
  // is unknown.
  absl::Duration Need(const Block& block) const {
    const std::optional<double> rate = alone_[block.kind].rate();
    if (!rate) return absl::InfiniteDuration();
    return std::max(absl::Seconds(static_cast<double>(block.wire_bytes) / *rate) - block.on_link, absl::ZeroDuration());
  }

  std::vector<Block> on_link_;  // in the order they joined
  absl::Time last_finish_ = absl::InfinitePast();
  std::vector<RateMeter> alone_;  // per kind
  Ticket next_ = 1;
};

}  // namespace ucclzip::pipeline
