// The envelope: a fixed 88-byte host message that goes first for every pipeline block, so that
// the receiver learns what follows (plain bytes or a frame, and the frame's layout) before it
// posts receives whose sizes must match the sender's exactly.
//
//   offset size field
//        0    4 magic "UZPE"
//        4    1 version (10)
//        5    1 kind: 0 plain bytes, 1 frame
//        6    1 dtype (DataType)
//        7    1 operation kind (schedule.h's OperationKind)
//        8    4 block index
//       12    4 block count of the message
//       16    8 element count of the whole message
//       24    8 element count of this block
//       32    8 raw_offset  (frame: where the raw plane starts, = size of the head part)
//       40    8 raw_bytes
//       48    8 coded_offset
//       56    8 the operation's count as its caller gave it
//       64    4 root (broadcast, reduce), else 0xFFFFFFFF
//       68    1 reduction operator
//       69    1 frame: log2 of its lanes' symbols (its layout depends on them), else 0
//       70    2 unplaced: calls on this link that took no places on it (Engine::UnplacedCall)
//       72    4 run_first: the block whose raw part (stream 1) carries this block's bytes
//       76    4 run_blocks: how many consecutive blocks, from run_first, that part carries
//       80    4 collective ordinal: the collective calls the sender's communicator had before
//                this one (wrapping); 0 for point-to-point blocks
//       84    1 abandoned: the sender's failure (absl::StatusCode), else 0
//       85    3 abandoned: 1 + the first peer the sender saw fail (its call then failed for it,
//                if a collective), else 0
// Little-endian. Notices (notices.h) are abandoned envelopes of a whole call. Bytes 7 and
// 56..68 describe the whole operation, so that ranks that called different operations, counts, operators or roots fail with an error naming both sides; bytes
// 70..71 tell a receiver that its peer's call is not the one it pairs with, though alike, and
// so do bytes 80..83 for a collective: ranks that disagreed in an earlier call (on its root,
// say) may have left a message on a link whose receiver had nothing to take from it, which
// the next call's receive would otherwise take for its own, alike in every other field. A frame
// block is then sent as the raw plane (stream 1, sent as soon as the split stage is done), the
// head [0, raw_offset) (stream 2) and the coded symbols [coded_offset, frame_bytes) (stream 3),
// whose size the receiver reads from the head.
//
// An abandoned block (kind 2, version 9) carries nothing: its sender's call failed (or its own
// checks refused it) before the block began, and every place of a failed call that never sent
// its envelope sends this one instead, so that the receiver fails at once, naming the peer (and
// a peer the sender saw fail, so that a dead rank is named on every rank), and every place on
// the link still takes exactly one envelope: the next calls pair as they should. It is a run of
// itself, and its type and reduction operator may be any byte (a call refused for them; version
// 10 for the type).
//
// A plain block carries its own bytes (run_first = block index, run_blocks = 1), or it is one of
// a plain run (docs/PIPELINE.md, "Plain runs"): consecutive plain blocks of a point-to-point
// message whose bytes travel as ONE transport message, on the raw stream of the run's first
// block. Only the first block of a run sends an envelope (version 4; up to version 3 every block
// did): it names the blocks the run carries, which send nothing on their own sequences, and
// the receiver posts a point-to-point message's envelope receives one after the other, each
// for the block after the last one it knows. Frames are never part of a run.
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "pipeline/schedule.h"
#include "ucclzip/types.h"

namespace ucclzip::pipeline {

inline constexpr size_t kEnvelopeBytes = 88;

enum class BlockKind : uint8_t { kPlain = 0, kFrame = 1, kAbandoned = 2 };

struct Envelope {
  BlockKind kind = BlockKind::kPlain;
  DataType dtype = DataType::kRaw;
  uint32_t block_index = 0;
  uint32_t block_count = 0;
  uint64_t message_count = 0;
  uint64_t block_elements = 0;
  uint64_t raw_offset = 0;
  uint64_t raw_bytes = 0;
  uint64_t coded_offset = 0;
  OperationKind operation = OperationKind::kSendRecv;
  uint64_t operation_count = 0;
  int32_t root = -1;
  ReduceOp op = ReduceOp::kSum;
  uint32_t run_first = 0;   // = block_index unless the block is carried by an earlier one
  uint32_t run_blocks = 1;
  // A frame's lane length, log2 (a frame the CPU codes takes longer lanes than the GPU's
  // default: operation_task_send.cc); 0 for plain bytes.
  uint8_t lane_symbols_log2 = 0;
  // The sender's count of calls refused before they could take their places on this link,
  // wrapping; the receiver's must be the same.
  uint16_t unplaced = 0;
  // A collective's Schedule::ordinal; 0 for point-to-point messages.
  uint32_t collective_ordinal = 0;
  // An abandoned block's: how its sender's call failed, and the first peer it saw fail (-1: none).
  absl::StatusCode abandoned_code = absl::StatusCode::kOk;
  int32_t failed_peer = -1;
};

// Whether `envelope` carries the bytes of blocks other than its own: the first block of a plain
// run of two or more.
inline bool LeadsRun(const Envelope& envelope) {
  return envelope.run_blocks > 1 && envelope.run_first == envelope.block_index;
}

std::array<uint8_t, kEnvelopeBytes> EncodeEnvelope(const Envelope& envelope);
// Checks magic, version, kind, dtype, operation and operator, and that the block lies in its run
// (a frame only in a run of itself); the caller compares the rest with what it expects.
absl::StatusOr<Envelope> DecodeEnvelope(const uint8_t* bytes);

}  // namespace ucclzip::pipeline
