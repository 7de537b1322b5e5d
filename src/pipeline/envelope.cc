#include "pipeline/envelope.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ucclzip::pipeline {
namespace {

constexpr uint32_t kMagic = 0x45505a55;  // "UZPE" little-endian
// 3: the plain run fields (bytes 72..79). 4: a run's first block alone sends an envelope.
// 5: a frame's lane length (byte 69).
// 6: relay links order their blocks in groups of 4 (schedule.h, LinkGroupBlocks), so a peer
// that numbers them as version 5 did fails here, naming the version, instead of at a block
// that is not the one it expected.
// 7: the link's count of calls that took no places on it (bytes 70..71).
// 8: the collective's ordinal (bytes 80..83).
// 9: abandoned blocks (kind 2, byte 84).
// 10: an abandoned block's type may be any byte (the notice of a call refused for its type).
constexpr uint8_t kVersion = 10;

void Put(uint8_t* at, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) at[i] = static_cast<uint8_t>(value >> (8 * i));
}
uint64_t Get(const uint8_t* at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= uint64_t{at[i]} << (8 * i);
  return value;
}

}  // namespace

std::array<uint8_t, kEnvelopeBytes> EncodeEnvelope(const Envelope& e) {
  std::array<uint8_t, kEnvelopeBytes> bytes{};
  Put(&bytes[0], kMagic, 4);
  bytes[4] = kVersion;
  bytes[5] = static_cast<uint8_t>(e.kind);
  bytes[6] = static_cast<uint8_t>(e.dtype);
  Put(&bytes[8], e.block_index, 4);
  Put(&bytes[12], e.block_count, 4);
  Put(&bytes[16], e.message_count, 8);
  Put(&bytes[24], e.block_elements, 8);
  Put(&bytes[32], e.raw_offset, 8);
  Put(&bytes[40], e.raw_bytes, 8);
  Put(&bytes[48], e.coded_offset, 8);
  bytes[7] = static_cast<uint8_t>(e.operation);
  Put(&bytes[56], e.operation_count, 8);
  Put(&bytes[64], static_cast<uint32_t>(e.root), 4);
  bytes[68] = static_cast<uint8_t>(e.op);
  bytes[69] = e.lane_symbols_log2;
  Put(&bytes[70], e.unplaced, 2);
  Put(&bytes[72], e.run_first, 4);
  Put(&bytes[76], e.run_blocks, 4);
  Put(&bytes[80], e.collective_ordinal, 4);
  bytes[84] = static_cast<uint8_t>(e.abandoned_code);
  Put(&bytes[85], static_cast<uint32_t>(e.failed_peer + 1), 3);
  return bytes;
}

absl::StatusOr<Envelope> DecodeEnvelope(const uint8_t* bytes) {
  if (Get(&bytes[0], 4) != kMagic || bytes[4] != kVersion) {
    return absl::DataLossError(absl::StrCat("bad block envelope (magic ", Get(&bytes[0], 4), ", version ",
                                            bytes[4], ")"));
  }
  const bool abandoned = bytes[5] == static_cast<uint8_t>(BlockKind::kAbandoned);
  if (bytes[5] > static_cast<uint8_t>(BlockKind::kAbandoned) || (!abandoned && !IsValidDataType(bytes[6])) ||
      !IsValidOperationKind(bytes[7]) || (!abandoned && !IsValidReduceOp(bytes[68]))) {
    return absl::DataLossError(absl::StrCat("bad block envelope (kind ", bytes[5], ", dtype ", bytes[6], ", operation ",
                                            bytes[7], ", reduction ", bytes[68], ")"));
  }
  Envelope e;
  e.kind = static_cast<BlockKind>(bytes[5]);
  e.dtype = static_cast<DataType>(bytes[6]);
  e.block_index = static_cast<uint32_t>(Get(&bytes[8], 4));
  e.block_count = static_cast<uint32_t>(Get(&bytes[12], 4));
  e.message_count = Get(&bytes[16], 8);
  e.block_elements = Get(&bytes[24], 8);
  e.raw_offset = Get(&bytes[32], 8);
  e.raw_bytes = Get(&bytes[40], 8);
  e.coded_offset = Get(&bytes[48], 8);
  e.operation = static_cast<OperationKind>(bytes[7]);
  e.operation_count = Get(&bytes[56], 8);
  e.root = static_cast<int32_t>(static_cast<uint32_t>(Get(&bytes[64], 4)));
  e.op = static_cast<ReduceOp>(bytes[68]);
  e.run_first = static_cast<uint32_t>(Get(&bytes[72], 4));
  e.run_blocks = static_cast<uint32_t>(Get(&bytes[76], 4));
  e.lane_symbols_log2 = bytes[69];
  e.unplaced = static_cast<uint16_t>(Get(&bytes[70], 2));
  e.collective_ordinal = static_cast<uint32_t>(Get(&bytes[80], 4));
  e.abandoned_code = static_cast<absl::StatusCode>(bytes[84]);
  e.failed_peer = static_cast<int32_t>(Get(&bytes[85], 3)) - 1;
  // An abandoned block names its sender's failure, and only it does; it is a run of itself.
  if (abandoned == (bytes[84] == 0) || bytes[84] > 16 || (!abandoned && e.failed_peer >= 0) ||
      (abandoned && (e.run_first != e.block_index || e.run_blocks != 1))) {
    return absl::DataLossError(absl::StrCat("bad block envelope (kind ", bytes[5], ", failure code ", bytes[84],
                                            ", failed peer ", e.failed_peer, ", run of ", e.run_blocks, ")"));
  }
  if (e.run_blocks == 0 || e.run_first > e.block_index ||
      uint64_t{e.block_index} >= uint64_t{e.run_first} + e.run_blocks ||
      (e.kind == BlockKind::kFrame && e.run_blocks != 1)) {
    return absl::DataLossError(absl::StrCat("bad block envelope (block ", e.block_index, " in a ",
                                            e.kind == BlockKind::kFrame ? "frame" : "plain", " run of ", e.run_blocks,
                                            " blocks from block ", e.run_first, ")"));
  }
  // The receiver plans a frame by its lane length (PlanFrame checks it is one the codec takes).
  if ((e.kind == BlockKind::kFrame) != (e.lane_symbols_log2 != 0) || e.lane_symbols_log2 >= 32) {
    return absl::DataLossError(absl::StrCat("bad block envelope (", e.kind == BlockKind::kFrame ? "frame" : "plain block",
                                            " with lanes of 2^", e.lane_symbols_log2, " symbols)"));
  }
  return e;
}

}  // namespace ucclzip::pipeline
