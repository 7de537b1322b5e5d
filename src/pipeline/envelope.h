// The envelope: a fixed 80-byte host message that goes first for every pipeline block, so that
// the receiver learns what follows (plain bytes or a frame, and the frame's layout) before it
// posts receives whose sizes must match the sender's exactly.
//
//   offset size field
//        0    4 magic "UZPE"
//        4    1 version (1)
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
//       69   11 zero
// Little-endian. Bytes 7 and 56..79 describe the whole operation, so that ranks that called
// different operations, counts, operators or roots fail with an error naming both sides. A frame block is then sent as the raw plane (stream 1, sent as soon as the
// split stage is done), the head [0, raw_offset) (stream 2) and the coded symbols
// [coded_offset, frame_bytes) (stream 3), whose size the receiver reads from the head.
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "pipeline/schedule.h"
#include "ucclzip/types.h"

namespace ucclzip::pipeline {

inline constexpr size_t kEnvelopeBytes = 80;

enum class BlockKind : uint8_t { kPlain = 0, kFrame = 1 };

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
};

std::array<uint8_t, kEnvelopeBytes> EncodeEnvelope(const Envelope& envelope);
// Checks magic, version, kind and dtype; the caller compares the rest with what it expects.
absl::StatusOr<Envelope> DecodeEnvelope(const uint8_t* bytes);

}  // namespace ucclzip::pipeline
