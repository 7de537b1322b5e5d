#include "pipeline/send_task.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ucclzip::pipeline {

using transport::MemoryType;

namespace {

uint64_t ReadFrameBytes(const uint8_t* head) {
  uint64_t value;
  std::memcpy(&value, head + kFrameBytesFieldOffset, sizeof(value));
  return value;
}

}  // namespace

SendTask::SendTask(MessageSpec spec) : MessageTask(std::move(spec)), blocks_(spec_.block_count) {}

bool SendTask::finished() const {
  for (uint32_t i = 0; i < next_block_; ++i) {
    if (blocks_[i].stage != Stage::kDone) return false;
  }
  return !status_.ok() || next_block_ == blocks_.size();
}

bool SendTask::waits_on_gpu() const {
  if (spec_.input_ready != nullptr && next_block_ == 0) return true;
  for (uint32_t i = 0; i < next_block_; ++i) {
    if (blocks_[i].stage == Stage::kEncoding) return true;
  }
  return false;
}

bool SendTask::Advance(TaskContext& context) {
  bool moved = false;
  for (uint32_t i = 0; i < next_block_; ++i) {
    if (blocks_[i].stage == Stage::kEncoding) moved |= AdvanceEncoding(context, i);
    if (blocks_[i].stage == Stage::kSending) moved |= AdvanceSending(context, i);
  }
  // Blocks start in order, each once the window to the peer has room; a device block also
  // waits for a free slot.
  while (status_.ok() && next_block_ < blocks_.size() && InputReady()) {
    const uint64_t bytes = BlockElements(next_block_) * ElementSize(spec_.dtype);
    if (!context.send_window->TryTake(spec_.peer, bytes)) break;
    blocks_[next_block_].window_bytes = bytes;
    if (!Start(context, next_block_)) {
      context.send_window->Release(spec_.peer, bytes);
      blocks_[next_block_].window_bytes = 0;
      break;
    }
    ++next_block_;
    moved = true;
  }
  return moved;
}

bool SendTask::Start(TaskContext& context, uint32_t index) {
  const uint64_t elements = BlockElements(index);
  const bool compress = context.policy->ShouldCompress(spec_.compression, spec_.dtype, elements * ElementSize(spec_.dtype),
                                                       spec_.peer, spec_.tensor);
  absl::StatusOr<FramePlan> plan = compress ? PlanFrame(spec_.dtype, elements) : absl::StatusOr<FramePlan>();
  if (!compress || !plan.ok() || !plan->split) {
    StartPlain(context, index);
    return true;
  }
  blocks_[index].plan = *plan;
  if (spec_.memory == MemoryType::kHost) {
    StartHostFrame(context, index);
    return true;
  }
  return StartDeviceFrame(context, index);
}

void SendTask::Post(TaskContext& context, Block& block, const void* data, uint64_t bytes, MemoryType memory,
                    transport::OpTag tag) {
  block.requests.push_back(context.transport->Send(spec_.peer, data, bytes, memory, tag, context.wake));
  context.stats->wire_bytes_sent += bytes;
}

void SendTask::StartPlain(TaskContext& context, uint32_t index) {
  Block& block = blocks_[index];
  const uint64_t elements = BlockElements(index);
  Envelope envelope{BlockKind::kPlain, spec_.dtype, index, spec_.block_count, spec_.count, elements, 0, 0, 0};
  block.envelope = EncodeEnvelope(envelope);
  Post(context, block, block.envelope.data(), kEnvelopeBytes, MemoryType::kHost, Tag(index, kEnvelopeStream));
  Post(context, block, spec_.data + BlockFirst(index) * ElementSize(spec_.dtype), elements * ElementSize(spec_.dtype),
       spec_.memory, Tag(index, kRawStream));
  ++context.stats->blocks_bypassed;
  block.stage = Stage::kSending;
}

void SendTask::StartHostFrame(TaskContext& context, uint32_t index) {
  Block& block = blocks_[index];
  const uint64_t elements = BlockElements(index);
  const uint8_t* input = spec_.data + BlockFirst(index) * ElementSize(spec_.dtype);
  block.host_frame.reset(new uint8_t[block.plan.max_frame_bytes]);
  const absl::Time start = absl::Now();
  absl::StatusOr<uint64_t> frame_bytes =
      CompressHost(input, elements, spec_.dtype, block.host_frame.get(), block.plan.max_frame_bytes);
  context.stats->codec_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  if (!frame_bytes.ok()) {
    Fail(frame_bytes.status());
    Retire(context, block);
    return;
  }
  Envelope envelope{BlockKind::kFrame, spec_.dtype,       index, spec_.block_count, spec_.count, elements,
                    block.plan.raw_offset, block.plan.raw_bytes, block.plan.coded_offset};
  block.envelope = EncodeEnvelope(envelope);
  Post(context, block, block.envelope.data(), kEnvelopeBytes, MemoryType::kHost, Tag(index, kEnvelopeStream));
  Post(context, block, block.host_frame.get() + block.plan.raw_offset, block.plan.raw_bytes, MemoryType::kHost,
       Tag(index, kRawStream));
  SendRest(context, index, block.host_frame.get(), block.host_frame.get(), *frame_bytes, MemoryType::kHost);
}

bool SendTask::StartDeviceFrame(TaskContext& context, uint32_t index) {
  Block& block = blocks_[index];
  DeviceSlot* slot = context.send_slots->TryAcquire();
  if (slot == nullptr) return false;
  block.slot = slot;
  const uint64_t elements = BlockElements(index);
  const uint8_t* input = spec_.data + BlockFirst(index) * ElementSize(spec_.dtype);
  block.codec_start = absl::Now();
  // The slot's stream runs after the caller's stream has produced the input.
  absl::Status status = slot->CheckFits(block.plan);
  if (status.ok()) status = CudaStatus(cudaStreamWaitEvent(slot->stream, spec_.input_ready, 0), "ordering after the caller's stream");
  if (status.ok()) {
    status = slot->codec->Compress(input, elements, spec_.dtype, slot->frame, slot->frame_capacity, slot->stream, {},
                                   slot->split_done);
  }
  // The head (whose header holds the frame's final size) is copied to pinned memory: the size
  // decides how much to send, and the head is sent from there.
  if (status.ok()) {
    status = CudaStatus(cudaMemcpyAsync(slot->head, slot->frame, block.plan.raw_offset, cudaMemcpyDeviceToHost, slot->stream),
                        "copying the frame head");
  }
  if (status.ok()) status = CudaStatus(cudaEventRecord(slot->codec_done, slot->stream), "recording the encode event");
  if (!status.ok()) {
    Fail(status);
    Retire(context, block);
    return true;
  }
  Envelope envelope{BlockKind::kFrame, spec_.dtype,       index, spec_.block_count, spec_.count, elements,
                    block.plan.raw_offset, block.plan.raw_bytes, block.plan.coded_offset};
  block.envelope = EncodeEnvelope(envelope);
  Post(context, block, block.envelope.data(), kEnvelopeBytes, MemoryType::kHost, Tag(index, kEnvelopeStream));
  block.stage = Stage::kEncoding;
  return true;
}

bool SendTask::AdvanceEncoding(TaskContext& context, uint32_t index) {
  Block& block = blocks_[index];
  DeviceSlot* slot = block.slot;
  bool moved = false;
  if (!block.raw_posted) {
    absl::StatusOr<bool> split = EventDone(slot->split_done);
    if (split.ok() && *split) {
      Post(context, block, slot->frame + block.plan.raw_offset, block.plan.raw_bytes, MemoryType::kDevice,
           Tag(index, kRawStream));
      block.raw_posted = true;
      moved = true;
    } else if (!split.ok()) {
      Fail(split.status());
    }
  }
  absl::StatusOr<bool> encoded = EventDone(slot->codec_done);
  if (encoded.ok() && !*encoded && status_.ok()) return moved;
  absl::Status status = encoded.status();
  // The stream has finished: this reports (and clears) an encoder error without waiting.
  status.Update(slot->codec->StreamStatus(slot->stream));
  context.stats->codec_seconds += absl::ToDoubleSeconds(absl::Now() - block.codec_start);
  if (!status.ok() || !status_.ok()) {
    Fail(status);
    block.stage = Stage::kSending;  // drains what was posted, then releases the slot
    return true;
  }
  if (!block.raw_posted) {
    Post(context, block, slot->frame + block.plan.raw_offset, block.plan.raw_bytes, MemoryType::kDevice,
         Tag(index, kRawStream));
    block.raw_posted = true;
  }
  SendRest(context, index, slot->head, slot->frame, ReadFrameBytes(slot->head), MemoryType::kDevice);
  return true;
}

void SendTask::SendRest(TaskContext& context, uint32_t index, const uint8_t* head, const uint8_t* frame,
                        uint64_t frame_bytes, MemoryType frame_memory) {
  Block& block = blocks_[index];
  block.stage = Stage::kSending;
  if (frame_bytes < block.plan.coded_offset || frame_bytes > block.plan.max_frame_bytes) {
    Fail(absl::InternalError(absl::StrCat("block ", index, ": the encoder reported a frame of ", frame_bytes,
                                          " bytes outside [", block.plan.coded_offset, ", ", block.plan.max_frame_bytes, "]")));
    return;
  }
  Post(context, block, head, block.plan.raw_offset, MemoryType::kHost, Tag(index, kHeadStream));
  Post(context, block, frame + block.plan.coded_offset, frame_bytes - block.plan.coded_offset, frame_memory,
       Tag(index, kCodedStream));
  const uint64_t payload = BlockElements(index) * ElementSize(spec_.dtype);
  context.policy->Record(spec_.peer, spec_.tensor, payload, frame_bytes);
  ++context.stats->blocks_compressed;
}

bool SendTask::AdvanceSending(TaskContext& context, uint32_t index) {
  Block& block = blocks_[index];
  std::optional<absl::Status> done = Completed(block.requests);
  if (!done) return false;
  Fail(*done);
  Retire(context, block);
  return true;
}

void SendTask::Retire(TaskContext& context, Block& block) {
  // The slot's stream is idle after a successful encode; after a failure ReleaseIdle waits.
  if (block.slot != nullptr) context.send_slots->ReleaseIdle(&block.slot);
  block.host_frame.reset();
  context.send_window->Release(spec_.peer, block.window_bytes);
  block.window_bytes = 0;
  block.stage = Stage::kDone;
}

}  // namespace ucclzip::pipeline
