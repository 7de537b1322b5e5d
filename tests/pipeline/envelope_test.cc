#include "pipeline/envelope.h"

#include <gtest/gtest.h>

namespace ucclzip::pipeline {
namespace {

TEST(Envelope, RoundTripsEveryField) {
  Envelope in{BlockKind::kFrame, DataType::kFloat16, 3, 9, 123456789012ull, 4096, 640, 4096, 4736};
  in.run_first = 3;
  in.lane_symbols_log2 = 10;
  auto bytes = EncodeEnvelope(in);
  absl::StatusOr<Envelope> out = DecodeEnvelope(bytes.data());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->kind, in.kind);
  EXPECT_EQ(out->dtype, in.dtype);
  EXPECT_EQ(out->block_index, 3u);
  EXPECT_EQ(out->block_count, 9u);
  EXPECT_EQ(out->message_count, in.message_count);
  EXPECT_EQ(out->block_elements, 4096u);
  EXPECT_EQ(out->raw_offset, 640u);
  EXPECT_EQ(out->raw_bytes, 4096u);
  EXPECT_EQ(out->coded_offset, 4736u);
  EXPECT_EQ(out->run_first, 3u);
  EXPECT_EQ(out->run_blocks, 1u);
  EXPECT_EQ(out->lane_symbols_log2, 10);
}

TEST(Envelope, RoundTripsAPlainRun) {
  Envelope lead{.kind = BlockKind::kPlain, .dtype = DataType::kBFloat16, .block_index = 70'000, .block_count = 70'005};
  lead.run_first = 70'000;
  lead.run_blocks = 5;
  Envelope carried = lead;
  carried.block_index = 70'004;
  for (const Envelope& in : {lead, carried}) {
    absl::StatusOr<Envelope> out = DecodeEnvelope(EncodeEnvelope(in).data());
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->block_index, in.block_index);
    EXPECT_EQ(out->run_first, 70'000u);
    EXPECT_EQ(out->run_blocks, 5u);
    EXPECT_EQ(LeadsRun(*out), in.block_index == 70'000);
  }
  EXPECT_FALSE(LeadsRun(Envelope{}));  // a block in a run of itself carries only itself
}

// A block must lie in the run it names, and a frame is only ever its own run: anything else is
// malformed before the receiver compares it with its own call.
TEST(Envelope, RejectsABlockOutsideItsRunAndFramesInRuns) {
  auto decode = [](uint32_t index, uint32_t run_first, uint32_t run_blocks, BlockKind kind = BlockKind::kPlain) {
    Envelope e{.kind = kind, .block_index = index, .block_count = 100};
    e.run_first = run_first;
    e.run_blocks = run_blocks;
    if (kind == BlockKind::kFrame) e.lane_symbols_log2 = 6;
    return DecodeEnvelope(EncodeEnvelope(e).data()).status();
  };
  EXPECT_TRUE(decode(4, 2, 3).ok());
  EXPECT_EQ(decode(4, 2, 0).code(), absl::StatusCode::kDataLoss);  // an empty run
  EXPECT_EQ(decode(5, 2, 3).code(), absl::StatusCode::kDataLoss);  // past its run's end
  EXPECT_EQ(decode(1, 2, 3).code(), absl::StatusCode::kDataLoss);  // before its run's start
  // No 32-bit wrap-around of first + blocks. (A run longer than the message is the receiver's
  // to refuse: it alone knows how many blocks it expects.)
  EXPECT_EQ(decode(1, 0xFFFFFFF0u, 0x20u).code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(decode(4, 2, 0xFFFFFFFFu).ok());
  EXPECT_TRUE(decode(4, 4, 1, BlockKind::kFrame).ok());
  absl::Status frame_run = decode(4, 4, 2, BlockKind::kFrame);
  EXPECT_EQ(frame_run.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(frame_run.message().find("frame run of 2 blocks"), std::string::npos) << frame_run;
}

// A frame names its lane length, which the receiver plans its layout by; plain bytes have none.
TEST(Envelope, AFrameNamesItsLanesAndPlainBytesNone) {
  auto decode = [](BlockKind kind, uint8_t lanes_log2) {
    return DecodeEnvelope(EncodeEnvelope(Envelope{.kind = kind, .lane_symbols_log2 = lanes_log2}).data()).status();
  };
  EXPECT_TRUE(decode(BlockKind::kFrame, 5).ok());
  EXPECT_TRUE(decode(BlockKind::kPlain, 0).ok());
  EXPECT_EQ(decode(BlockKind::kFrame, 0).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(decode(BlockKind::kFrame, 32).code(), absl::StatusCode::kDataLoss);  // no 1 << 32
  absl::Status plain = decode(BlockKind::kPlain, 8);
  EXPECT_EQ(plain.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(plain.message().find("plain block with lanes of 2^8 symbols"), std::string::npos) << plain;
}

TEST(Envelope, RoundTripsTheOperation) {
  Envelope in;
  in.operation = OperationKind::kReduce;
  in.operation_count = 1u << 30;
  in.root = 6;
  in.op = ReduceOp::kMin;
  absl::StatusOr<Envelope> out = DecodeEnvelope(EncodeEnvelope(in).data());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->operation, OperationKind::kReduce);
  EXPECT_EQ(out->operation_count, in.operation_count);
  EXPECT_EQ(out->root, 6);
  EXPECT_EQ(out->op, ReduceOp::kMin);
}

// An abandoned block says how its sender's call failed, and a block of another kind says nothing
// of a failure: a byte out of place is malformed.
TEST(Envelope, AnAbandonedBlockCarriesItsSendersFailureAndNoOtherDoes) {
  Envelope abandoned{.kind = BlockKind::kAbandoned, .dtype = DataType::kFloat32, .block_index = 2, .block_count = 4};
  abandoned.run_first = 2;
  abandoned.abandoned_code = absl::StatusCode::kInvalidArgument;
  absl::StatusOr<Envelope> out = DecodeEnvelope(EncodeEnvelope(abandoned).data());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->kind, BlockKind::kAbandoned);
  EXPECT_EQ(out->abandoned_code, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out->failed_peer, -1);
  EXPECT_EQ(out->block_index, 2u);
  // The peer its sender saw fail, and any reduction byte (a call refused for its operator).
  abandoned.failed_peer = 70'000;
  abandoned.op = static_cast<ReduceOp>(200);
  out = DecodeEnvelope(EncodeEnvelope(abandoned).data());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->failed_peer, 70'000);
  EXPECT_EQ(static_cast<int>(out->op), 200);
  // Any type byte too (the notice of a call refused for its type), where other blocks are refused.
  abandoned.dtype = static_cast<DataType>(201);
  out = DecodeEnvelope(EncodeEnvelope(abandoned).data());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(static_cast<int>(out->dtype), 201);
  abandoned.dtype = DataType::kFloat32;
  Envelope in_a_run = abandoned;
  in_a_run.run_blocks = 3;
  EXPECT_EQ(DecodeEnvelope(EncodeEnvelope(in_a_run).data()).status().code(), absl::StatusCode::kDataLoss);
  abandoned.abandoned_code = absl::StatusCode::kOk;
  EXPECT_EQ(DecodeEnvelope(EncodeEnvelope(abandoned).data()).status().code(), absl::StatusCode::kDataLoss);
  Envelope plain{.kind = BlockKind::kPlain};
  plain.abandoned_code = absl::StatusCode::kAborted;
  EXPECT_EQ(DecodeEnvelope(EncodeEnvelope(plain).data()).status().code(), absl::StatusCode::kDataLoss);
  plain.abandoned_code = absl::StatusCode::kOk;
  plain.failed_peer = 3;
  EXPECT_EQ(DecodeEnvelope(EncodeEnvelope(plain).data()).status().code(), absl::StatusCode::kDataLoss);
  plain.failed_peer = -1;
  plain.op = static_cast<ReduceOp>(200);
  EXPECT_EQ(DecodeEnvelope(EncodeEnvelope(plain).data()).status().code(), absl::StatusCode::kDataLoss);
  auto beyond = EncodeEnvelope(Envelope{.kind = BlockKind::kAbandoned});
  beyond[84] = 17;  // past absl::StatusCode's codes
  EXPECT_EQ(DecodeEnvelope(beyond.data()).status().code(), absl::StatusCode::kDataLoss);
}

TEST(Envelope, RejectsBadMagicKindTypeAndOperation) {
  auto good = EncodeEnvelope(Envelope{});
  auto bad_magic = good;
  bad_magic[1] ^= 1;
  EXPECT_EQ(DecodeEnvelope(bad_magic.data()).status().code(), absl::StatusCode::kDataLoss);
  // Version 5 ordered every link in groups of 2 blocks, version 8 sent nothing for a failed
  // call's places, and version 9 refused a notice of a call refused for its type: peers of those
  // versions are refused.
  auto older = good;
  for (uint8_t version : {5, 8, 9}) {
    older[4] = version;
    EXPECT_EQ(DecodeEnvelope(older.data()).status().code(), absl::StatusCode::kDataLoss) << int{version};
  }
  auto bad_kind = good;
  bad_kind[5] = 7;
  EXPECT_EQ(DecodeEnvelope(bad_kind.data()).status().code(), absl::StatusCode::kDataLoss);
  auto bad_type = good;
  bad_type[6] = 200;
  EXPECT_EQ(DecodeEnvelope(bad_type.data()).status().code(), absl::StatusCode::kDataLoss);
  auto bad_operation = good;
  bad_operation[7] = static_cast<uint8_t>(OperationKind::kReduce) + 1;
  EXPECT_EQ(DecodeEnvelope(bad_operation.data()).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ucclzip::pipeline
