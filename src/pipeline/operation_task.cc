#include "pipeline/operation_task.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "logging/logging.h"

namespace ucclzip::pipeline {

OperationTask::OperationTask(OperationSpec spec, int world_size, int rank)
    : spec_(std::move(spec)),
      rank_(rank),
      send_order_(world_size),
      recv_order_(world_size),
      first_send_sequence_(world_size),
      first_recv_sequence_(world_size),
      next_send_(world_size),
      next_window_(world_size),
      next_parts_(world_size) {
  const Schedule& schedule = spec_.schedule;
  for (size_t s = 0; s < schedule.sends.size(); ++s) {
    send_step_first_.push_back(static_cast<uint32_t>(send_blocks_.size()));
    for (uint32_t b = 0; b < BlockCount(schedule.sends[s].chunk.count, spec_.block_elements); ++b) {
      send_blocks_.emplace_back();
      send_blocks_.back().step = static_cast<int>(s);
      send_blocks_.back().index = b;
      send_blocks_.back().run_first = b;
    }
  }
  for (size_t s = 0; s < schedule.recvs.size(); ++s) {
    recv_step_first_.push_back(static_cast<uint32_t>(recv_blocks_.size()));
    for (uint32_t b = 0; b < BlockCount(schedule.recvs[s].count, spec_.block_elements); ++b) {
      recv_blocks_.emplace_back();
      recv_blocks_.back().step = static_cast<int>(s);
      recv_blocks_.back().index = b;
    }
  }
  recv_step_forwarded_.assign(schedule.recvs.size(), false);
  for (const SendStep& step : schedule.sends) {
    if (step.source == SendStep::Source::kChunk) continue;
    if (step.source == SendStep::Source::kForward) recv_step_forwarded_[step.recv_step] = true;
    for (uint32_t b = 0; b < BlockCount(step.chunk.count, spec_.block_elements); ++b) {
      ++recv_blocks_[recv_step_first_[step.recv_step] + b].consumers;
    }
  }
  BuildLinkOrder();
  if (schedule.copies.empty()) copies_ = CopyStage::kDone;
}

OperationTask::~OperationTask() {
  if (spec_.input_ready != nullptr) cudaEventDestroy(spec_.input_ready);
  if (copies_done_ != nullptr) cudaEventDestroy(copies_done_);
}

void OperationTask::BuildLinkOrder() {
  const LinkOrder order =
      LinkOrderOf(spec_.schedule, spec_.block_elements, static_cast<int>(send_order_.size()), rank_);
  auto index = [](auto& blocks, const std::vector<uint32_t>& step_first, const auto& links, auto& out) {
    for (size_t peer = 0; peer < links.size(); ++peer) {
      for (const StepBlock& at : links[peer]) {
        const uint32_t i = step_first[at.step] + at.block;
        blocks[i].link_position = static_cast<uint32_t>(out[peer].size());
        out[peer].push_back(i);
      }
    }
  };
  index(send_blocks_, send_step_first_, order.sends, send_order_);
  index(recv_blocks_, recv_step_first_, order.recvs, recv_order_);
}

void OperationTask::TraceBlock(const char* direction, int step, uint32_t block, const char* event) const {
  const bool send = direction[0] == 's';
  const int peer = send ? spec_.schedule.sends[step].peer : spec_.schedule.recvs[step].peer;
  UCCLZIP_LOG(kDebug) << "rank " << rank_ << ": operation " << number_ << " (" << spec_.schedule.name << ") " << direction << " step " << step
                      << " block " << block << (send ? " to" : " from") << " peer " << peer << " " << event << " at "
                      << absl::StrFormat("%.3f", absl::ToDoubleMilliseconds(absl::Now() - started_)) << " ms";
}

void OperationTask::set_first_sequences(std::vector<uint32_t> send, std::vector<uint32_t> recv) {
  first_send_sequence_ = std::move(send);
  first_recv_sequence_ = std::move(recv);
}

void OperationTask::Fail(const absl::Status& why) {
  if (!status_.ok() || why.ok()) return;
  if (why.code() == absl::StatusCode::kDeadlineExceeded) {
    status_ = absl::Status(why.code(), absl::StrCat(spec_.description, ": ", why.message(),
                                                    "; this rank's blocks then: ", PendingBlocks()));
    return;
  }
  status_ = absl::Status(why.code(), absl::StrCat(spec_.description, ": ", why.message()));
}

void OperationTask::FailBlock(const char* direction, int step, uint32_t block, const absl::Status& why) {
  if (why.ok()) return;
  if (spec_.schedule.kind == OperationKind::kSendRecv) return Fail(why);
  const int peer = direction[0] == 's' ? spec_.schedule.sends[step].peer : spec_.schedule.recvs[step].peer;
  Fail(absl::Status(why.code(), absl::StrCat(direction, " step ", step, " (peer ", peer, ", block ", block, "): ",
                                             why.message())));
}

uint64_t OperationTask::payload_bytes_sent() const {
  uint64_t elements = 0;
  for (const SendStep& step : spec_.schedule.sends) elements += step.chunk.count;
  return elements * ElementSize(spec_.dtype);
}

uint64_t OperationTask::payload_bytes_received() const {
  uint64_t elements = 0;
  for (const RecvStep& step : spec_.schedule.recvs) elements += step.count;
  return elements * ElementSize(spec_.dtype);
}

uint8_t* OperationTask::ChunkAddress(const Chunk& chunk, uint64_t element) const {
  uint8_t* base = chunk.buffer == BufferRole::kInput ? spec_.input : spec_.output;
  return base + (chunk.first + element) * ElementSize(spec_.dtype);
}

uint64_t OperationTask::BlockElements(uint64_t count, uint32_t block) const {
  const uint64_t first = uint64_t{block} * spec_.block_elements;
  return first >= count ? 0 : std::min(spec_.block_elements, count - first);
}

uint64_t OperationTask::RunElements(uint64_t count, uint32_t block, uint32_t blocks) const {
  const uint64_t first = uint64_t{block} * spec_.block_elements;
  return first >= count ? 0 : std::min(uint64_t{blocks} * spec_.block_elements, count - first);
}

Envelope OperationTask::OperationEnvelope() const {
  Envelope envelope;
  envelope.dtype = spec_.dtype;
  envelope.operation = spec_.schedule.kind;
  envelope.operation_count = spec_.schedule.count;
  envelope.root = spec_.schedule.root;
  envelope.op = spec_.schedule.op;
  return envelope;
}

bool OperationTask::InputReady() {
  if (input_seen_ready_ || spec_.input_ready == nullptr) return input_seen_ready_ = true;
  absl::StatusOr<bool> done = EventDone(spec_.input_ready);
  if (!done.ok()) Fail(done.status());
  input_seen_ready_ = done.ok() && *done;
  return input_seen_ready_;
}

bool OperationTask::AdvanceCopies(TaskContext& context) {
  if (copies_ == CopyStage::kDone) return false;
  if (copies_ == CopyStage::kRunning) {
    absl::StatusOr<bool> done = EventDone(copies_done_);
    if (done.ok() && !*done) return false;
    Fail(done.status());
    copies_ = CopyStage::kDone;
    return true;
  }
  if (!status_.ok()) {
    copies_ = CopyStage::kDone;
    return true;
  }
  if (!InputReady()) return false;
  const size_t width = ElementSize(spec_.dtype);
  if (spec_.memory == transport::MemoryType::kHost) {
    // A slice per call: the pipeline thread copies a broadcast root's 256 MB in about 30 ms,
    // and in one piece that would hold back every block the task has to post meanwhile.
    const LocalCopy& copy = spec_.schedule.copies[host_copy_.index];
    const uint64_t bytes = copy.from.count * width;
    const uint64_t slice = std::min(kHostCopySliceBytes, bytes - host_copy_.offset);
    std::memmove(ChunkAddress(copy.to, 0) + host_copy_.offset, ChunkAddress(copy.from, 0) + host_copy_.offset, slice);
    host_copy_.offset += slice;
    if (host_copy_.offset == bytes) host_copy_ = {host_copy_.index + 1, 0};
    if (host_copy_.index == spec_.schedule.copies.size()) copies_ = CopyStage::kDone;
    return true;
  }
  absl::Status status = CudaStatus(cudaEventCreateWithFlags(&copies_done_, cudaEventDisableTiming), "creating an event");
  if (status.ok()) {
    status = CudaStatus(cudaStreamWaitEvent(context.copy_stream, spec_.input_ready, 0), "ordering after the caller's stream");
  }
  for (const LocalCopy& copy : spec_.schedule.copies) {
    if (!status.ok()) break;
    status = CudaStatus(cudaMemcpyAsync(ChunkAddress(copy.to, 0), ChunkAddress(copy.from, 0), copy.from.count * width,
                                        cudaMemcpyDeviceToDevice, context.copy_stream),
                        "copying within the device");
  }
  if (status.ok()) status = CudaStatus(cudaEventRecord(copies_done_, context.copy_stream), "recording the copy event");
  if (!status.ok()) {
    Fail(status);
    // Whatever was queued finishes before the event is destroyed.
    cudaStreamSynchronize(context.copy_stream);
    copies_ = CopyStage::kDone;
    return true;
  }
  copies_ = CopyStage::kRunning;
  return true;
}

bool OperationTask::Advance(TaskContext& context) {
  // Transfers first: a local copy is never what the peers wait for.
  bool moved = AdvanceRecvs(context);
  moved |= AdvanceSends(context);
  moved |= AdvanceCopies(context);
  moved |= LookForStrays(context, moved);
  parked_ = WaitsOnTransfersAndLinks();
  return moved;
}

bool OperationTask::Parked(const std::vector<bool>& sends_open, const std::vector<bool>& recvs_open) const {
  if (!parked_) return false;
  for (int peer : gated_sends_) {
    if (sends_open[peer]) return false;
  }
  for (int peer : gated_recvs_) {
    if (recvs_open[peer]) return false;
  }
  return true;
}

bool OperationTask::WaitsOnTransfersAndLinks() {
  if (!status_.ok() || copies_ != CopyStage::kDone) return false;
  if (!recv_blocks_.empty() && !envelopes_posted_) return false;
  // A link still to start sends on (post parts on) moves only while it is open: the room,
  // slots and places its blocks wait for are taken only then (AdvanceSends, PostParts), and so
  // is the caller's input polled, which no block of a link goes before.
  gated_sends_.clear();
  gated_recvs_.clear();
  for (size_t peer = 0; peer < send_order_.size(); ++peer) {
    if (next_window_[peer] != send_order_[peer].size()) gated_sends_.push_back(static_cast<int>(peer));
    if (next_parts_[peer] != recv_order_[peer].size()) gated_recvs_.push_back(static_cast<int>(peer));
  }
  auto pending = [](const std::shared_ptr<transport::Request>& request) { return request != nullptr && !request->Test(); };
  auto any_pending = [&](const std::vector<std::shared_ptr<transport::Request>>& requests) {
    return std::any_of(requests.begin(), requests.end(), pending);
  };
  // A stage whose requests have all completed would have moved on in this Advance unless it
  // waits for something else (a slot, a place, another block): that task is not parked.
  for (const SendBlock& block : send_blocks_) {
    // A block waiting to start starts only when its link is open (or its task fails).
    if (block.stage == SendStage::kDone || block.stage == SendStage::kWaiting) continue;
    if (block.stage != SendStage::kSending) return false;
    // A carried block completes with its run's first (this task's own request).
    if (block.run_first == block.index && !any_pending(block.requests)) return false;
  }
  bool envelope_pending = false;
  for (const RecvBlock& block : recv_blocks_) {
    if (block.retired) continue;
    switch (block.stage) {
      case RecvStage::kEnvelope:
        // Not yet posted: one by one, an earlier block's envelope (still pending) posts it.
        if (block.envelope_request == nullptr ? !envelope_pending : block.envelope_request->Test()) return false;
        envelope_pending = true;
        break;
      case RecvStage::kHead:
        if (!pending(block.head_request)) return false;
        break;
      case RecvStage::kReceiving:
        if (!any_pending(block.requests)) return false;
        break;
      case RecvStage::kDone:
        // Retires once its requests are done and this task's sends of it (whose requests are
        // pending, above) have completed; one whose last send completed in this Advance retires
        // in the next.
        if (block.consumers == 0 && !any_pending(block.requests)) return false;
        break;
      case RecvStage::kParts:
        // Posts its parts only when its link is open (PostParts).
        break;
      case RecvStage::kProcessing:
        return false;
    }
  }
  return true;
}

const transport::CompletionCallback& OperationTask::WakeOnNews(const TaskContext& context) {
  if (!wake_on_news_) {
    news_->wake = context.wake;
    // The shared pointer keeps the flag for as long as any request may call back.
    wake_on_news_ = [news = news_](const absl::Status& status) {
      news->raised.store(true, std::memory_order_release);
      news->wake(status);
    };
  }
  return wake_on_news_;
}

bool OperationTask::finished() const {
  if (copies_ != CopyStage::kDone) return false;
  if (!NoticesSent()) return false;
  if (!recv_blocks_.empty() && !envelopes_posted_) return false;
  for (const RecvBlock& block : recv_blocks_) {
    if (!block.retired) return false;
  }
  for (const SendBlock& block : send_blocks_) {
    if (block.stage == SendStage::kEncoding || block.stage == SendStage::kSending) return false;
    if (block.stage == SendStage::kWaiting) return false;  // a failed task's still sends an abandoned envelope
  }
  return true;
}

bool OperationTask::waits_on_gpu() const {
  // A failed task never looks at its input again: polling for it would spin the engine while
  // the task's given-up receives wait (up to op_timeout).
  if (status_.ok() && spec_.input_ready != nullptr && !input_seen_ready_) return true;
  if (copies_ == CopyStage::kRunning) return true;
  // A host job wakes the pipeline thread itself when it is done.
  for (const SendBlock& block : send_blocks_) {
    if (block.stage == SendStage::kEncoding && !block.encoded && block.host_job == nullptr) return true;
  }
  for (const RecvBlock& block : recv_blocks_) {
    if (block.stage == RecvStage::kProcessing && block.host_job == nullptr) return true;
  }
  return false;
}

bool OperationTask::caller_buffer_idle() const {
  if (copies_ == CopyStage::kRunning) return false;
  for (const SendBlock& block : send_blocks_) {
    // A frame this task encoded leaves from its own buffers (a host frame, a device slot): a
    // failed call is reported while its peer takes it, or until op_timeout where the peer never
    // does (a rank that disagreed on the call). An abandoned block's envelope is the block's own.
    if (block.stage == SendStage::kSending && (block.encoded || block.abandoned)) continue;
    if (block.stage == SendStage::kEncoding || block.stage == SendStage::kSending) return false;
  }
  for (const RecvBlock& block : recv_blocks_) {
    if (block.retired || block.stage == RecvStage::kEnvelope || block.stage == RecvStage::kParts) continue;
    // Parts on their way into the block's own buffers (a frame's, scratch) write nothing of the
    // caller's: a failed task retires such a block without processing it. Waiting for them
    // held a receive whose sender stopped after its envelope until the transport's op_timeout.
    if ((block.stage == RecvStage::kHead || block.stage == RecvStage::kReceiving) && !block.into_caller) continue;
    return false;
  }
  return true;
}

std::optional<absl::Status> OperationTask::Completed(const std::vector<std::shared_ptr<transport::Request>>& requests) {
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
