// A bounded number of places per peer, taken and given back one at a time: what host blocks hold
// where the device's have slots (device_slots.h) — a host frame encoding ahead of the send window
// (operation_task_send.cc), a host receive block's buffers until it retires
// (operation_task_recv.cc). Each peer's places are its own, so one peer's blocks never wait
// for another's. Pipeline thread only.
#pragma once

#include <utility>
#include <vector>

namespace ucclzip::pipeline {

class PeerPlaces {
 public:
  PeerPlaces(int peers, int places_per_peer) : PeerPlaces(std::vector<int>(peers, places_per_peer)) {}
  explicit PeerPlaces(std::vector<int> places) : taken_(places.size(), 0), places_(std::move(places)) {}

  // Takes one of `peer`'s places (false: all are taken).
  bool TryTake(int peer) {
    if (taken_[peer] >= places_[peer]) return false;
    ++taken_[peer];
    return true;
  }
  void Release(int peer) { --taken_[peer]; }

 private:
  std::vector<int> taken_;
  const std::vector<int> places_;
};

}  // namespace ucclzip::pipeline
