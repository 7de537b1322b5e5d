// A bounded number of places per peer, taken and given back one at a time: what host blocks hold
// where the device's have slots (device_slots.h) — a host frame encoding ahead of the send window
// (operation_task_send.cc), a host receive block's buffers until it retires
// (operation_task_recv.cc). Each peer's places are its own, so one peer's blocks never wait
// for another's. Pipeline thread only.
#pragma once

#include <vector>

namespace ucclzip::pipeline {

class PeerPlaces {
 public:
  PeerPlaces(int peers, int places_per_peer) : taken_(peers, 0), places_per_peer_(places_per_peer) {}

  // Takes one of `peer`'s places (false: all are taken).
  bool TryTake(int peer) {
    if (taken_[peer] >= places_per_peer_) return false;
    ++taken_[peer];
    return true;
  }
  void Release(int peer) { --taken_[peer]; }

 private:
  std::vector<int> taken_;
  const int places_per_peer_;
};

}  // namespace ucclzip::pipeline
