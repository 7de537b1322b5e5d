#include "pipeline/self_transfers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pipeline/engine.h"

namespace ucclzip::pipeline {
namespace {

bool SendsToItself(const OperationSpec& spec, int rank) {
  return spec.schedule.sends.size() == 1 && spec.schedule.sends[0].peer == rank;
}

// What keeps the two calls of a pair from being one copy, or empty.
std::string Disagreement(const OperationSpec& send, const OperationSpec& recv) {
  if (send.dtype != recv.dtype || send.schedule.count != recv.schedule.count) return "count or type";
  if (send.memory != recv.memory) return "memory";
  if (send.stream != recv.stream) return "stream (a transfer to itself takes one stream)";
  return "";
}

// Why the pair's buffers cannot be one copy, or empty: they overlap without being the same
// buffer. The copy runs a slice at a time, and a later slice would read what an earlier one had
// just written (wrong data, with no error), where one buffer onto itself changes nothing.
std::string Overlap(const OperationSpec& send, const OperationSpec& recv) {
  const uint64_t bytes = recv.schedule.count * ElementSize(recv.dtype);  // Prepare refuses an overflow
  const auto from = reinterpret_cast<uintptr_t>(send.input), to = reinterpret_cast<uintptr_t>(recv.output);
  if (bytes == 0 || from == to || from >= to + bytes || to >= from + bytes) return "";
  return absl::StrCat("the Send's buffer [0x", absl::Hex(from), ", +", bytes, " B) and the Recv's [0x", absl::Hex(to),
                      ", +", bytes, " B) overlap without being the same buffer");
}

// The pair as one operation: the receive's spec, reading the send's buffer. `send_first`: the
// send was called before the receive.
void MakeCopy(OperationSpec& send, OperationSpec& recv, bool send_first, int rank) {
  // Both calls recorded their position on the one stream: the later one's covers the earlier's.
  cudaEvent_t later = send_first ? recv.input_ready : send.input_ready;
  cudaEvent_t earlier = send_first ? send.input_ready : recv.input_ready;
  if (earlier != nullptr) cudaEventDestroy(earlier);
  recv.input_ready = later;
  send.input_ready = nullptr;
  const uint64_t count = recv.schedule.count;
  Schedule copy{.kind = OperationKind::kSendRecv,
                .count = count,
                .name = "send to and receive from itself"};
  if (count > 0) copy.copies.push_back({.from = {BufferRole::kInput, 0, count}, .to = {BufferRole::kOutput, 0, count}});
  recv.schedule = std::move(copy);
  recv.input = send.input;
  recv.deadline = std::min(recv.deadline, send.deadline);
  recv.description = absl::StrCat("rank ", rank, ": send to and receive from itself (", count, " elements of ",
                                  DataTypeName(recv.dtype), ", ", transport::MemoryTypeName(recv.memory), " memory)");
  std::shared_ptr<transport::Request> send_handle = send.request, recv_handle = recv.request;
  recv.request = std::make_shared<transport::Request>([send_handle, recv_handle](const absl::Status& status) {
    recv_handle->Complete(status);
    send_handle->Complete(status);
  });
}

}  // namespace

bool IsSelfTransfer(const OperationSpec& spec, int rank) {
  if (spec.schedule.kind != OperationKind::kSendRecv) return false;
  return SendsToItself(spec, rank) || (spec.schedule.recvs.size() == 1 && spec.schedule.recvs[0].peer == rank);
}

bool IsOrWasSelfTransfer(const OperationSpec& spec, int rank) {
  // A Send or Recv has one step; the copy none.
  return IsSelfTransfer(spec, rank) || (spec.schedule.kind == OperationKind::kSendRecv && spec.schedule.sends.empty() &&
                                        spec.schedule.recvs.empty());
}

void PairSelfTransfers(std::vector<OperationSpec>& specs, int rank) {
  std::vector<size_t> sends, recvs;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (IsSelfTransfer(specs[i], rank)) (SendsToItself(specs[i], rank) ? sends : recvs).push_back(i);
  }
  if (sends.empty() && recvs.empty()) return;
  std::vector<bool> leaves(specs.size(), false);
  auto fail = [&](size_t i, const std::string& why) {
    leaves[i] = true;
    std::vector<OperationSpec> one;
    one.push_back(std::move(specs[i]));
    Engine::Discard(std::move(one), absl::InvalidArgumentError(why));
  };
  const size_t pairs = std::min(sends.size(), recvs.size());
  for (size_t k = 0; k < pairs; ++k) {
    OperationSpec& send = specs[sends[k]];
    OperationSpec& recv = specs[recvs[k]];
    std::string why;
    if (const std::string differ = Disagreement(send, recv); !differ.empty()) {
      why = absl::StrCat(", which differs in ", differ);
    } else if (const std::string overlap = Overlap(send, recv); !overlap.empty()) {
      why = absl::StrCat(", and ", overlap);
    }
    if (!why.empty()) {
      // Both messages first: fail() moves the spec out.
      const std::string send_why = absl::StrCat("its group pairs it with \"", recv.description, "\"", why);
      const std::string recv_why = absl::StrCat("its group pairs it with \"", send.description, "\"", why);
      fail(sends[k], send_why);
      fail(recvs[k], recv_why);
      continue;
    }
    MakeCopy(send, recv, sends[k] < recvs[k], rank);
    leaves[sends[k]] = true;
  }
  for (size_t k = pairs; k < sends.size(); ++k) {
    fail(sends[k], "no Recv from this rank itself in its group to pair with (a transfer to itself is a copy)");
  }
  for (size_t k = pairs; k < recvs.size(); ++k) {
    fail(recvs[k], "no Send to this rank itself in its group to pair with (a transfer to itself is a copy)");
  }
  size_t kept = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (leaves[i]) continue;
    if (kept != i) specs[kept] = std::move(specs[i]);  // a self-move would empty it
    ++kept;
  }
  specs.resize(kept);
}

}  // namespace ucclzip::pipeline
