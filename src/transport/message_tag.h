// The 64-bit UCX tag of every message the transport sends. Fields, high to low:
//   communicator id (8) | sender rank (12) | operation sequence (20) | stream (7) | last (1) | block (16)
// `last` tells whether the sender's message ends with this block. A receive matches every field,
// `last` as it expects it: UCX then finds its receives in a hash table by tag, where receives
// whose mask left `last` out sat in one list that every arriving message searched (docs/TRANSPORT.md,
// "Tags": a group of thousands of small messages spent most of its time there). A sender whose message has
// another number of blocks sends a block no receive takes; the transport finds it in UCX's
// unexpected queue (Transport::FindSizeMismatches), so that a size mismatch is an error instead
// of a hang or a silent cut.
#pragma once

#include <cstdint>

namespace ucclzip::transport {

inline constexpr int kMaxRanks = 1 << 12;
// Sequences wrap; ops in flight never span a wrap, but for a receive its caller gave up on
// (GiveUpRecv) or a discard (Discard), which stay up to op_timeout: a link that carries 2^20
// blocks within op_timeout of a failed call could see them take a later message (TRANSPORT.md).
inline constexpr uint32_t kMaxSequence = (1u << 20) - 1;
inline constexpr uint32_t kMaxStream = (1u << 7) - 1;
inline constexpr uint32_t kMaxBlocks = 1u << 16;

// What the caller (the pipeline) chooses: which operation, and which part of it. Several
// parts of one logical message (a raw plane now, the rest later) go as different streams
// (the pipeline's: 0 to 3 a block's parts, 4 notices; the connect exchange's: kMaxStream).
struct OpTag {
  uint32_t sequence = 0;
  uint32_t stream = 0;
};

// What Transport::TakeStray may take.
struct StrayQuery {
  uint32_t stream = 0;
  uint32_t end = 0;     // sequences before this one (modulo 2^20) ...
  uint32_t window = 0;  // ... this many of them; 0: any sequence
};

struct MessageTag {
  uint8_t communicator = 0;
  uint32_t sender = 0;
  OpTag op;
  bool last = false;
  uint32_t block = 0;

  constexpr uint64_t Pack() const {
    return (uint64_t{communicator} << 56) | (uint64_t{sender & 0xfff} << 44) | (uint64_t{op.sequence & kMaxSequence} << 24) |
           (uint64_t{op.stream & kMaxStream} << 17) | (uint64_t{last} << 16) | (block & 0xffff);
  }
  static constexpr MessageTag Unpack(uint64_t tag) {
    return MessageTag{static_cast<uint8_t>(tag >> 56), static_cast<uint32_t>((tag >> 44) & 0xfff),
                      OpTag{static_cast<uint32_t>((tag >> 24) & kMaxSequence), static_cast<uint32_t>((tag >> 17) & kMaxStream)},
                      ((tag >> 16) & 1) != 0, static_cast<uint32_t>(tag & 0xffff)};
  }
};

// Probes that take a block whichever way its sender's message ends compare every bit but `last`.
inline constexpr uint64_t kMatchMask = ~(uint64_t{1} << 16);
// Receives, and probes for one block as it is tagged, compare every bit.
inline constexpr uint64_t kWholeTag = ~uint64_t{0};

}  // namespace ucclzip::transport
