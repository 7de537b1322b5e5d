#include "pipeline/message_task.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ucclzip::pipeline {

MessageTask::~MessageTask() {
  if (spec_.input_ready != nullptr) cudaEventDestroy(spec_.input_ready);
}

void MessageTask::Fail(const absl::Status& why) {
  if (!status_.ok() || why.ok()) return;
  status_ = absl::Status(why.code(), absl::StrCat(Describe(rank_), ": ", why.message()));
}

std::string MessageTask::Describe(int rank) const {
  return absl::StrCat("rank ", rank, ": ", spec_.send ? "send to" : "recv from", " peer ", spec_.peer, " (", spec_.count,
                      " elements of ", DataTypeName(spec_.dtype), ", ", transport::MemoryTypeName(spec_.memory),
                      " memory)");
}

bool MessageTask::InputReady() {
  if (spec_.input_ready == nullptr) return true;
  absl::StatusOr<bool> done = EventDone(spec_.input_ready);
  if (!done.ok()) Fail(done.status());
  return done.ok() && *done;
}

uint64_t MessageTask::BlockElements(uint32_t block) const {
  return std::min(spec_.block_elements, spec_.count - BlockFirst(block));
}

std::optional<absl::Status> MessageTask::Completed(const std::vector<std::shared_ptr<transport::Request>>& requests) {
  absl::Status first;
  for (const auto& request : requests) {
    if (!request->Test()) return std::nullopt;
    first.Update(request->Wait(absl::InfinitePast()));
  }
  return first;
}

absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

absl::StatusOr<bool> EventDone(cudaEvent_t event) {
  cudaError_t err = cudaEventQuery(event);
  if (err == cudaErrorNotReady) return false;
  if (err != cudaSuccess) return CudaStatus(err, "waiting for a CUDA event");
  return true;
}

}  // namespace ucclzip::pipeline
