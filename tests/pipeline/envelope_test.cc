#include "pipeline/envelope.h"

#include <gtest/gtest.h>

namespace ucclzip::pipeline {
namespace {

TEST(Envelope, RoundTripsEveryField) {
  Envelope in{BlockKind::kFrame, DataType::kFloat16, 3, 9, 123456789012ull, 4096, 640, 4096, 4736};
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

TEST(Envelope, RejectsBadMagicKindTypeAndOperation) {
  auto good = EncodeEnvelope(Envelope{});
  auto bad_magic = good;
  bad_magic[1] ^= 1;
  EXPECT_EQ(DecodeEnvelope(bad_magic.data()).status().code(), absl::StatusCode::kDataLoss);
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
