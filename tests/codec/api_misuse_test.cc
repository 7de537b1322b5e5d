// Misuse of the public codec and reduction calls on the CPU: types and operators outside their
// enums, counts beyond what a frame holds, null buffers, buffers overlapping the frame, a divisor
// of 0. Each gets a clear error or, where the call has no error to return, a value that cannot
// under-size a buffer; never a crash or unwritten output reported as done. (Hostile frames are
// frame_corruption_test's and the fuzzer's.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ucclzip/codec.h"
#include "ucclzip/reduction.h"

namespace ucclzip::testing {
namespace {

constexpr uint64_t kNoFrame = std::numeric_limits<uint64_t>::max();

// The bound once wrapped: 2^62 fp32 elements "needed" 576 bytes, 2^64 - 1 needed 575, and an
// invalid type (element size 0) 64, so that a buffer sized by it was far too small.
TEST(CodecMisuse, FrameBoundsNeverWrap) {
  for (uint64_t count : {(uint64_t{1} << 33) + 1, uint64_t{1} << 62, ~uint64_t{0}}) {
    EXPECT_EQ(MaxFrameBytes(DataType::kFloat32, count), kNoFrame) << count;
    EXPECT_EQ(MaxFrameHeadBytes(DataType::kBFloat16, count), kNoFrame) << count;
    EXPECT_FALSE(PlanFrame(DataType::kFloat32, count).ok()) << count;
  }
  EXPECT_EQ(MaxFrameBytes(static_cast<DataType>(13), 100), kNoFrame);
  EXPECT_EQ(MaxFrameHeadBytes(static_cast<DataType>(200), 100), kNoFrame);
  // The largest frame still gets its true bound.
  EXPECT_GE(MaxFrameBytes(DataType::kFloat64, uint64_t{1} << 33), (uint64_t{1} << 33) * 8);
}

// MeasureEntropy has no error to return: a null input is measured as nothing, where it was read
// through (a segmentation fault).
TEST(CodecMisuse, MeasureEntropyOfNullIsEmpty) {
  const EntropyReport report = MeasureEntropy(nullptr, 10, DataType::kBFloat16);
  EXPECT_EQ(report.bound_ratio, 1.0);
  EXPECT_EQ(report.symbol_bound_ratio, 1.0);
}

TEST(CodecMisuse, EmptyTensorsRoundTripWithoutAnOutputBuffer) {
  std::vector<uint8_t> frame(MaxFrameBytes(DataType::kBFloat16, 0));
  absl::StatusOr<uint64_t> bytes = CompressHost(nullptr, 0, DataType::kBFloat16, frame.data(), frame.size());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_TRUE(DecompressHost(frame.data(), *bytes, DataType::kBFloat16, nullptr, 0).ok());
  const absl::Status status = DecompressHost(frame.data(), *bytes, DataType::kBFloat16, nullptr, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("null output"), absl::string_view::npos) << status;
}

// Decoding into the frame itself (or encoding from it) reads what it has just written: a stored
// frame went through an overlapping memcpy (ASan: memcpy-param-overlap), a split one would read
// overwritten symbols. Refused, naming both ranges; the frame stays as it was.
TEST(CodecMisuse, BuffersThatOverlapTheFrameAreRefused) {
  for (DataType dtype : {DataType::kFloat64, DataType::kBFloat16}) {  // a stored frame and a split one
    const uint64_t count = 20000;
    const size_t width = ElementSize(dtype);
    std::vector<uint8_t> tensor(count * width);
    for (size_t i = 0; i < tensor.size(); ++i) tensor[i] = static_cast<uint8_t>(i * 7 + i / 251);
    std::vector<uint8_t> buffer(MaxFrameBytes(dtype, count) + tensor.size());
    absl::StatusOr<uint64_t> bytes = CompressHost(tensor.data(), count, dtype, buffer.data(), buffer.size());
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    const std::vector<uint8_t> before = buffer;
    const absl::Status status = DecompressHost(buffer.data(), *bytes, dtype, buffer.data() + 8, count);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find(absl::StrCat("decompress ", DataTypeName(dtype), " x20000")), absl::string_view::npos)
        << status;
    EXPECT_NE(status.message().find("overlaps the frame"), absl::string_view::npos) << status;
    EXPECT_TRUE(buffer == before) << DataTypeName(dtype) << ": the refused decode wrote";
    // Right after the frame is no overlap: that decodes.
    ASSERT_TRUE(DecompressHost(buffer.data(), *bytes, dtype, buffer.data() + *bytes, count).ok());
    EXPECT_TRUE(std::equal(tensor.begin(), tensor.end(), buffer.begin() + *bytes));
    // Encoding from a tensor inside the frame's capacity.
    std::memcpy(buffer.data() + 64, tensor.data(), tensor.size());
    const absl::StatusOr<uint64_t> from_inside = CompressHost(buffer.data() + 64, count, dtype, buffer.data(), buffer.size());
    EXPECT_EQ(from_inside.status().code(), absl::StatusCode::kInvalidArgument) << from_inside.status();
    EXPECT_NE(from_inside.status().message().find("overlaps the frame"), absl::string_view::npos) << from_inside.status();
  }
}

struct BadReduction {
  const char* name;
  DataType dtype;
  ReduceOp op;
  uint32_t divisor;
  bool null_out;
  const char* says;
};

// Outside their enums ReduceOnHost left the output unwritten with nothing to say so; a divisor
// of 0 divided an integer by zero (SIGFPE). Both calls now refuse them before touching anything.
TEST(CodecMisuse, ReductionsRefuseWhatTheyCannotCompute) {
  const BadReduction bad[] = {
      {"dtype", static_cast<DataType>(13), ReduceOp::kSum, 1, false, "(4 elements of invalid, sum, divisor 1): invalid dtype 13"},
      {"op", DataType::kInt32, static_cast<ReduceOp>(9), 1, false,
       "(4 elements of int32, invalid, divisor 1): invalid reduction operator 9"},
      {"divisor", DataType::kInt32, ReduceOp::kAvg, 0, false, "(4 elements of int32, avg, divisor 0): a divisor of 0"},
      {"divisor_fp", DataType::kFloat32, ReduceOp::kAvg, 0, false, "(4 elements of fp32, avg, divisor 0): a divisor of 0"},
      {"null", DataType::kFloat32, ReduceOp::kSum, 1, true, "(4 elements of fp32, sum, divisor 1): null buffer"},
  };
  for (const BadReduction& b : bad) {
    std::vector<uint8_t> received(32, 1), local(32, 2), out(32, 0xEE);
    void* out_ptr = b.null_out ? nullptr : out.data();
    const absl::Status host = ReduceOnHost(b.dtype, b.op, received.data(), local.data(), out_ptr, 4, b.divisor);
    EXPECT_EQ(host.code(), absl::StatusCode::kInvalidArgument) << b.name << ": " << host;
    EXPECT_NE(host.message().find(std::string("ReduceOnHost ") + b.says), absl::string_view::npos) << b.name << ": " << host;
    // Refused before any launch, so a machine without a GPU says the same.
    const absl::Status device = ReduceOnDevice(b.dtype, b.op, received.data(), local.data(), out_ptr, 4, nullptr, b.divisor);
    EXPECT_EQ(device.code(), absl::StatusCode::kInvalidArgument) << b.name << ": " << device;
    EXPECT_NE(device.message().find(std::string("ReduceOnDevice ") + b.says), absl::string_view::npos)
        << b.name << ": " << device;
    for (uint8_t byte : out) ASSERT_EQ(byte, 0xEE) << b.name << ": the refused reduction wrote its output";
  }
  // Nothing to reduce needs no buffers; valid arguments still compute.
  EXPECT_TRUE(ReduceOnHost(DataType::kFloat32, ReduceOp::kSum, nullptr, nullptr, nullptr, 0).ok());
  const int32_t a[2] = {7, -9}, b[2] = {2, 3};
  int32_t out[2] = {};
  ASSERT_TRUE(ReduceOnHost(DataType::kInt32, ReduceOp::kAvg, a, b, out, 2, 2).ok());
  EXPECT_EQ(out[0], 4);
  EXPECT_EQ(out[1], -3);
}

// An output shifted one element into an input passed, and the host loop read elements it had
// already overwritten: {1,2,3,4} + 10 into buf + 1 gave 11 21 31 41 as if right (review of
// session 35). A partial overlap is refused; the output being an input itself, or lying right
// beside one, still computes.
TEST(CodecMisuse, ReductionsRefuseAnOutputThatPartlyOverlapsAnInput) {
  int32_t buffer[5] = {1, 2, 3, 4, 0};
  const int32_t local[4] = {10, 10, 10, 10};
  for (int32_t* out : {buffer + 1, buffer + 3}) {
    const absl::Status host = ReduceOnHost(DataType::kInt32, ReduceOp::kSum, buffer, local, out, 4);
    EXPECT_EQ(host.code(), absl::StatusCode::kInvalidArgument) << host;
    EXPECT_NE(host.message().find("ReduceOnHost (4 elements of int32, sum, divisor 1): the output partly overlaps the "
                                  "received elements"),
              absl::string_view::npos)
        << host;
    const absl::Status device = ReduceOnDevice(DataType::kInt32, ReduceOp::kSum, buffer, local, out, 4, nullptr);
    EXPECT_EQ(device.code(), absl::StatusCode::kInvalidArgument) << device;
    EXPECT_EQ(buffer[4], 0) << "the refused reduction wrote its output";
  }
  int32_t received[4] = {1, 2, 3, 4}, mine[5] = {10, 10, 10, 10, 0};
  EXPECT_EQ(ReduceOnHost(DataType::kInt32, ReduceOp::kSum, received, mine, mine + 1, 4).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(ReduceOnHost(DataType::kInt32, ReduceOp::kSum, received, mine, mine, 4).ok());
  EXPECT_EQ(mine[0], 11);
  EXPECT_EQ(mine[3], 14);
  ASSERT_TRUE(ReduceOnHost(DataType::kInt32, ReduceOp::kSum, buffer, local, buffer + 4, 1).ok());
  EXPECT_EQ(buffer[4], 11);
}

}  // namespace
}  // namespace ucclzip::testing
