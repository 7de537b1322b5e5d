// The codec's public, implementation-independent calls: planning a frame, reading its header and
// turning decoder error words into statuses.
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "codec/frame_checks.h"
#include "codec/frame_format.h"
#include "ucclzip/codec.h"

namespace ucclzip {

absl::StatusOr<FramePlan> PlanFrame(DataType dtype, uint64_t count, const CodecOptions& options) {
  const auto context = [&] { return absl::StrCat("plan frame for ", DataTypeName(dtype), " x", count); };
  if (!IsValidDataType(static_cast<uint8_t>(dtype))) {
    return absl::InvalidArgumentError(absl::StrCat(context(), ": invalid data type ", static_cast<int>(dtype)));
  }
  if (count > codec::kMaxFrameCount) {
    return absl::InvalidArgumentError(
        absl::StrCat(context(), ": more than ", codec::kMaxFrameCount, " elements (2^33), the most one frame holds"));
  }
  if (options.lane_symbols != 0 && !codec::IsValidLaneSymbols(options.lane_symbols)) {
    return absl::InvalidArgumentError(absl::StrCat(context(), ": lane_symbols ", options.lane_symbols,
                                                   " is not a power of two in [", codec::kMinLaneSymbols, ", ",
                                                   codec::kMaxLaneSymbols, "]"));
  }
  const bool splittable = options.compress && IsCompressibleType(dtype);
  const codec::Layout layout = codec::ComputeLayout(ElementSize(dtype), splittable, count, options.lane_symbols);
  FramePlan plan{};
  plan.split = layout.base_mode != codec::Mode::kStored;
  plan.raw_offset = layout.raw_offset;
  plan.raw_bytes = layout.raw_bytes;
  plan.coded_offset = layout.coded_offset;
  plan.max_frame_bytes = layout.max_frame_bytes;
  plan.lane_symbols = layout.lane_symbols;
  plan.num_chunks = layout.num_chunks;
  return plan;
}

uint64_t MaxFrameBytes(DataType dtype, uint64_t count) {
  // No frame holds these (PlanFrame refuses them): the largest value, so that no caller sizes a
  // buffer by a bound that wrapped (2^62 fp32 elements gave 576 bytes) or by a type's zero width.
  if (!IsValidDataType(static_cast<uint8_t>(dtype)) || count > codec::kMaxFrameCount) {
    return std::numeric_limits<uint64_t>::max();
  }
  // Shortest lanes give the most chunks and so the largest index.
  const codec::Layout layout =
      codec::ComputeLayout(ElementSize(dtype), IsCompressibleType(dtype), count, codec::kMinLaneSymbols);
  return std::max<uint64_t>(layout.max_frame_bytes, codec::kHeaderBytes + count * ElementSize(dtype));
}

uint64_t MaxFrameHeadBytes(DataType dtype, uint64_t count) {
  // As MaxFrameBytes: no frame has these.
  if (!IsValidDataType(static_cast<uint8_t>(dtype)) || count > codec::kMaxFrameCount) {
    return std::numeric_limits<uint64_t>::max();
  }
  // The head grows with the chunk count, which is largest for the shortest lanes and grows
  // with the element count.
  return codec::ComputeLayout(ElementSize(dtype), IsCompressibleType(dtype), count, codec::kMinLaneSymbols).raw_offset;
}

absl::StatusOr<FrameInfo> ReadFrameInfo(const void* frame, size_t available_bytes) {
  const std::string context = absl::StrCat("read frame header from ", available_bytes, " bytes");
  if (frame == nullptr) return absl::InvalidArgumentError(absl::StrCat(context, ": null frame pointer"));
  if (available_bytes < codec::kHeaderBytes) {
    return DecodeErrorToStatus(static_cast<uint32_t>(codec::DecodeError::kTruncated), context);
  }
  codec::Header h;
  std::memcpy(&h, frame, sizeof(h));
  if (!IsValidDataType(h.dtype)) {
    return DecodeErrorToStatus(static_cast<uint32_t>(codec::DecodeError::kTypeMismatch), context);
  }
  const auto dtype = static_cast<DataType>(h.dtype);
  const codec::DecodeError e =
      codec::CheckHeader(h, available_bytes, h.dtype, h.count, ElementSize(dtype), IsCompressibleType(dtype));
  if (e != codec::DecodeError::kOk) {
    // A frame of another version names its version.
    return DecodeErrorToStatus(codec::MakeErrorWord(e, e == codec::DecodeError::kBadVersion ? h.version : 0), context);
  }
  FrameInfo info{};
  info.dtype = dtype;
  info.mode = static_cast<FrameMode>(h.mode);
  info.count = h.count;
  info.frame_bytes = h.frame_bytes;
  info.raw_offset = h.raw_offset;
  info.raw_bytes = h.raw_bytes;
  info.coded_offset = h.coded_offset;
  info.coded_bytes = h.coded_bytes;
  info.lane_symbols = info.mode == FrameMode::kStored ? 0 : (1u << h.lane_symbols_log2);
  return info;
}

absl::Status DecodeErrorToStatus(uint32_t error_word, absl::string_view context) {
  using codec::DecodeError;
  const auto code = static_cast<DecodeError>(error_word & 0xFF);
  const uint32_t detail = error_word >> 8;
  switch (code) {
    case DecodeError::kOk: return absl::OkStatus();
    case DecodeError::kBadMagic: return absl::DataLossError(absl::StrCat(context, ": not a ucclzip frame (bad magic)"));
    case DecodeError::kBadVersion:
      return absl::DataLossError(absl::StrCat(context, ": unsupported frame version",
                                              detail != 0 ? absl::StrCat(" ", detail) : "",
                                              " (this build reads version ", codec::kFrameVersion, " only)"));
    case DecodeError::kTypeMismatch:
      return absl::InvalidArgumentError(absl::StrCat(context, ": the frame holds another element type"));
    case DecodeError::kCountMismatch:
      return absl::InvalidArgumentError(absl::StrCat(context, ": the frame holds another element count"));
    case DecodeError::kBadMode: return absl::DataLossError(absl::StrCat(context, ": invalid frame mode"));
    case DecodeError::kTruncated:
      return absl::DataLossError(absl::StrCat(context, ": frame truncated (its header says it is larger)"));
    case DecodeError::kBadLayout:
      return absl::DataLossError(absl::StrCat(context, ": frame offsets or sizes disagree with its count and type"));
    case DecodeError::kBadTable:
      return absl::DataLossError(
          absl::StrCat(context, ": corrupt frequency table (",
                       detail == 0 ? "the global one" : absl::StrCat("tile ", detail - 1, "'s own"), ")"));
    case DecodeError::kBadIndex: return absl::DataLossError(absl::StrCat(context, ": corrupt index at chunk ", detail));
    case DecodeError::kCorruptStream:
      return absl::DataLossError(absl::StrCat(context, ": corrupt coded stream in chunk ", detail));
    case DecodeError::kBadArgument:
      return absl::InvalidArgumentError(absl::StrCat(context, ": invalid argument"));
  }
  return absl::DataLossError(absl::StrCat(context, ": unknown decode error ", error_word));
}

}  // namespace ucclzip
