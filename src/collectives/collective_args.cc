#include "collectives/collective_args.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace ucclzip::collectives {
namespace {

absl::Hex Address(const void* pointer) { return absl::Hex(reinterpret_cast<uintptr_t>(pointer)); }

// in_place_offset in bytes, wrapping as addresses do (the offset may be negative, and an
// unchecked count may make it huge).
uintptr_t OffsetBytes(const CollectiveArgs& args) {
  return static_cast<uintptr_t>(args.in_place_offset) * ElementSize(args.dtype);
}

// Whether a call's schedule can be built even where CheckArgs refuses it (BuildCall).
bool Schedulable(const CollectiveArgs& args) {
  if (args.root && (*args.root < 0 || *args.root >= args.world_size)) return false;
  if (!IsValidDataType(static_cast<uint8_t>(args.dtype))) return false;
  return args.count <= std::numeric_limits<uint64_t>::max() / ElementSize(args.dtype) / static_cast<uint64_t>(args.world_size);
}

}  // namespace

std::string OperationName(const CollectiveArgs& args) {
  std::string name = absl::StrCat("rank ", args.rank, ": ", pipeline::OperationKindName(args.kind), " (", args.count,
                                  " elements of ", DataTypeName(args.dtype));
  if (pipeline::KindReduces(args.kind)) absl::StrAppend(&name, ", ", ReduceOpName(args.op));
  if (pipeline::KindHasRoot(args.kind)) absl::StrAppend(&name, ", root ", args.root.value_or(-1));
  return absl::StrCat(name, ")");
}

bool InPlace(const CollectiveArgs& args) {
  return reinterpret_cast<uintptr_t>(args.recvbuff) + OffsetBytes(args) == reinterpret_cast<uintptr_t>(args.sendbuff);
}

absl::Status CheckArgs(const CollectiveArgs& args) {
  auto invalid = [&](auto... why) { return absl::InvalidArgumentError(absl::StrCat(OperationName(args), ": ", why...)); };
  if (args.root && (*args.root < 0 || *args.root >= args.world_size)) {
    return invalid("root ", *args.root, " is not a rank of ", args.world_size);
  }
  if (!IsValidDataType(static_cast<uint8_t>(args.dtype))) return invalid("invalid dtype ", static_cast<int>(args.dtype));
  if (args.reduces) {
    if (!IsValidReduceOp(static_cast<uint8_t>(args.op))) return invalid("invalid reduction operator ", static_cast<int>(args.op));
    if (args.dtype == DataType::kRaw) return invalid("raw bytes cannot be reduced; name an element type");
  }
  const size_t width = ElementSize(args.dtype);
  const uint64_t limit = std::numeric_limits<uint64_t>::max() / width / static_cast<uint64_t>(args.world_size);
  if (args.count > limit) {
    return invalid(args.count, " elements on each of ", args.world_size, " ranks overflow a 64-bit byte count");
  }
  if ((args.send_elements > 0 && args.sendbuff == nullptr) || (args.recv_elements > 0 && args.recvbuff == nullptr)) {
    return invalid("null buffer (sendbuff 0x", Address(args.sendbuff), ", recvbuff 0x", Address(args.recvbuff), ")");
  }
  if (args.send_elements == 0 || args.recv_elements == 0 || InPlace(args)) return absl::OkStatus();
  const auto send = reinterpret_cast<uintptr_t>(args.sendbuff), recv = reinterpret_cast<uintptr_t>(args.recvbuff);
  const uint64_t send_bytes = args.send_elements * width, recv_bytes = args.recv_elements * width;
  if (send < recv + recv_bytes && recv < send + send_bytes) {
    // Offsets from recvbuff, signed: "recvbuff - 32 B".
    auto at = [](int64_t offset) {
      return absl::StrCat("recvbuff ", offset < 0 ? "- " : "+ ", offset < 0 ? 0 - static_cast<uint64_t>(offset) : offset, " B");
    };
    return invalid("sendbuff [0x", Address(args.sendbuff), ", +", send_bytes, " B) overlaps recvbuff [0x",
                   Address(args.recvbuff), ", +", recv_bytes, " B) without being in place: sendbuff is ",
                   at(static_cast<int64_t>(send - recv)), ", where in place it would be ",
                   at(static_cast<int64_t>(OffsetBytes(args))));
  }
  return absl::OkStatus();
}

bool TakesSmallAlgorithm(uint64_t bytes, size_t limit) { return limit > 0 && bytes <= limit; }

CollectiveCall BuildCall(const CollectiveArgs& args, cudaStream_t stream, const CollectiveOptions& options,
                         absl::FunctionRef<pipeline::Schedule(bool in_place)> schedule) {
  absl::Status refused = CheckArgs(args);
  if (!refused.ok() && !Schedulable(args)) {
    return {.call = {.schedule = {.kind = args.kind, .op = args.op, .root = args.root.value_or(-1), .count = args.count},
                     .dtype = args.dtype,
                     .refused = std::move(refused)},
            .placed = false};
  }
  return {.call = {.schedule = schedule(InPlace(args)),
                   .input = args.send_elements > 0 ? args.sendbuff : nullptr,
                   .output = const_cast<void*>(args.recvbuff),
                   .dtype = args.dtype,
                   .stream = stream,
                   .compression = options.compression,
                   .tensor_id = options.tensor_id,
                   .timeout = options.timeout,
                   .refused = std::move(refused)}};
}

}  // namespace ucclzip::collectives
