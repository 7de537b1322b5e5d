#include "pipeline/recv_task.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace ucclzip::pipeline {

using transport::MemoryType;

RecvTask::RecvTask(MessageSpec spec) : MessageTask(std::move(spec)), blocks_(spec_.block_count) {}

bool RecvTask::finished() const {
  if (!envelopes_posted_) return false;
  for (const Block& block : blocks_) {
    if (block.stage != Stage::kDone) return false;
  }
  return true;
}

bool RecvTask::caller_buffer_idle() const {
  for (const Block& block : blocks_) {
    if (block.stage != Stage::kEnvelope && block.stage != Stage::kDone) return false;
  }
  return true;
}

bool RecvTask::waits_on_gpu() const {
  for (const Block& block : blocks_) {
    if (block.stage == Stage::kDecoding || (block.stage == Stage::kParts && spec_.input_ready != nullptr)) return true;
  }
  return false;
}

void RecvTask::Post(TaskContext& context, Block& block, void* data, uint64_t bytes, MemoryType memory,
                    transport::OpTag tag, std::shared_ptr<transport::Request>* keep) {
  block.requests.push_back(context.transport->Recv(spec_.peer, data, bytes, memory, tag, context.wake));
  context.stats->wire_bytes_received += bytes;
  if (keep != nullptr) *keep = block.requests.back();
}

bool RecvTask::Advance(TaskContext& context) {
  if (!envelopes_posted_ && !status_.ok()) {
    for (Block& block : blocks_) block.stage = Stage::kDone;
    envelopes_posted_ = true;
    return true;
  }
  if (!envelopes_posted_) {
    // Envelopes are tiny and host-side: posting all at once lets every block's sender go ahead.
    for (uint32_t i = 0; i < blocks_.size(); ++i) {
      Post(context, blocks_[i], blocks_[i].envelope.data(), kEnvelopeBytes, MemoryType::kHost, Tag(i, kEnvelopeStream),
           &blocks_[i].envelope_request);
    }
    envelopes_posted_ = true;
  }
  bool moved = false;
  for (uint32_t i = 0; i < blocks_.size(); ++i) moved |= AdvanceBlock(context, i);
  return moved;
}

bool RecvTask::AdvanceBlock(TaskContext& context, uint32_t index) {
  Block& block = blocks_[index];
  if (block.stage != Stage::kDone && !status_.ok() && block.stage != Stage::kDecoding) return Retire(context, index);
  switch (block.stage) {
    case Stage::kEnvelope: return OnEnvelope(index);
    case Stage::kParts: return PostParts(context, index);
    case Stage::kHead: return OnHead(context, index);
    case Stage::kReceiving: return Decode(context, index);
    case Stage::kDecoding: return FinishDecode(context, index);
    case Stage::kDone: return false;
  }
  return false;
}

bool RecvTask::OnEnvelope(uint32_t index) {
  Block& block = blocks_[index];
  if (!block.envelope_request->Test()) return false;
  if (absl::Status s = block.envelope_request->Wait(absl::InfinitePast()); !s.ok()) {
    Fail(s);
    return true;
  }
  absl::StatusOr<Envelope> envelope = DecodeEnvelope(block.envelope.data());
  if (!envelope.ok()) {
    Fail(envelope.status());
    return true;
  }
  block.header = *envelope;
  const uint64_t elements = BlockElements(index);
  if (envelope->dtype != spec_.dtype || envelope->message_count != spec_.count || envelope->block_index != index ||
      envelope->block_count != spec_.block_count || envelope->block_elements != elements) {
    out_of_step_ = absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank_, ": receives from peer ", spec_.peer, " are out of step after a mismatched receive"));
    Fail(absl::InvalidArgumentError(absl::StrCat(
        "the sender sent ", envelope->message_count, " elements of ", DataTypeName(envelope->dtype),
        " (block ", envelope->block_index, " of ", envelope->block_count, ", ", envelope->block_elements,
        " elements) where this receive expects ", spec_.count, " elements of ", DataTypeName(spec_.dtype), " (block ",
        index, " of ", spec_.block_count, ", ", elements, " elements)")));
    return true;
  }
  if (envelope->kind == BlockKind::kFrame) {
    absl::StatusOr<FramePlan> plan = PlanFrame(spec_.dtype, elements);
    if (!plan.ok() || !plan->split || plan->raw_offset != envelope->raw_offset || plan->raw_bytes != envelope->raw_bytes ||
        plan->coded_offset != envelope->coded_offset) {
      Fail(absl::DataLossError(absl::StrCat("block ", index, ": the envelope's frame layout (raw ", envelope->raw_offset,
                                            "+", envelope->raw_bytes, ", coded at ", envelope->coded_offset,
                                            ") is not the one of ", elements, " elements of ", DataTypeName(spec_.dtype))));
      return true;
    }
    block.plan = *plan;
  }
  block.stage = Stage::kParts;
  return true;
}

bool RecvTask::PostParts(TaskContext& context, uint32_t index) {
  Block& block = blocks_[index];
  // Nothing lands in the caller's buffer before the caller's stream is done with it.
  if (!InputReady()) return false;
  const uint64_t elements = BlockElements(index);
  if (block.header.kind == BlockKind::kPlain) {
    Post(context, block, Output(index), elements * ElementSize(spec_.dtype), spec_.memory, Tag(index, kRawStream));
    block.stage = Stage::kReceiving;
    return true;
  }
  uint8_t* frame;
  uint8_t* head;
  MemoryType frame_memory;
  if (spec_.memory == MemoryType::kHost) {
    block.host_frame.reset(new uint8_t[block.plan.max_frame_bytes]);
    frame = head = block.host_frame.get();
    frame_memory = MemoryType::kHost;
  } else {
    block.slot = context.recv_slots->TryAcquire();
    if (block.slot == nullptr) return false;
    if (absl::Status fits = block.slot->CheckFits(block.plan); !fits.ok()) {
      context.recv_slots->Release(block.slot);
      block.slot = nullptr;
      Fail(fits);
      return true;
    }
    frame = block.slot->frame;
    head = block.slot->head;
    frame_memory = MemoryType::kDevice;
  }
  Post(context, block, frame + block.plan.raw_offset, block.plan.raw_bytes, frame_memory, Tag(index, kRawStream));
  Post(context, block, head, block.plan.raw_offset, MemoryType::kHost, Tag(index, kHeadStream), &block.head_request);
  block.stage = Stage::kHead;
  return true;
}

bool RecvTask::OnHead(TaskContext& context, uint32_t index) {
  Block& block = blocks_[index];
  if (!block.head_request->Test()) return false;
  if (absl::Status s = block.head_request->Wait(absl::InfinitePast()); !s.ok()) {
    Fail(s);
    return true;
  }
  const uint8_t* head = block.slot != nullptr ? block.slot->head : block.host_frame.get();
  std::memcpy(&block.frame_bytes, head + kFrameBytesFieldOffset, sizeof(block.frame_bytes));
  if (block.frame_bytes < block.plan.coded_offset || block.frame_bytes > block.plan.max_frame_bytes) {
    Fail(absl::DataLossError(absl::StrCat("block ", index, ": the frame header claims ", block.frame_bytes,
                                          " bytes, outside [", block.plan.coded_offset, ", ", block.plan.max_frame_bytes, "]")));
    return true;
  }
  uint8_t* frame = block.slot != nullptr ? block.slot->frame : block.host_frame.get();
  Post(context, block, frame + block.plan.coded_offset, block.frame_bytes - block.plan.coded_offset,
       block.slot != nullptr ? MemoryType::kDevice : MemoryType::kHost, Tag(index, kCodedStream));
  block.stage = Stage::kReceiving;
  return true;
}

bool RecvTask::Decode(TaskContext& context, uint32_t index) {
  Block& block = blocks_[index];
  std::optional<absl::Status> done = Completed(block.requests);
  if (!done) return false;
  if (!done->ok()) {
    Fail(*done);
    return Retire(context, index);
  }
  const uint64_t elements = BlockElements(index);
  if (block.header.kind == BlockKind::kPlain) {
    block.stage = Stage::kDone;
    return true;
  }
  block.codec_start = absl::Now();
  if (block.slot == nullptr) {
    absl::Status status = DecompressHost(block.host_frame.get(), block.frame_bytes, spec_.dtype, Output(index), elements);
    context.stats->codec_seconds += absl::ToDoubleSeconds(absl::Now() - block.codec_start);
    Fail(status);
    block.host_frame.reset();
    block.stage = Stage::kDone;
    return true;
  }
  DeviceSlot* slot = block.slot;
  absl::Status status = CudaStatus(cudaMemcpyAsync(slot->frame, slot->head, block.plan.raw_offset, cudaMemcpyHostToDevice,
                                                   slot->stream),
                                   "copying the frame head to the device");
  if (status.ok()) {
    status = slot->codec->Decompress(slot->frame, block.frame_bytes, spec_.dtype, Output(index), elements, slot->stream);
  }
  if (status.ok()) status = CudaStatus(cudaEventRecord(slot->codec_done, slot->stream), "recording the decode event");
  Fail(status);
  block.stage = Stage::kDecoding;
  return true;
}

bool RecvTask::FinishDecode(TaskContext& context, uint32_t index) {
  Block& block = blocks_[index];
  absl::StatusOr<bool> decoded = EventDone(block.slot->codec_done);
  if (decoded.ok() && !*decoded && status_.ok()) return false;
  absl::Status status = decoded.status();
  // Waits for whatever is left on the slot's stream and reports a malformed frame.
  status.Update(block.slot->codec->StreamStatus(block.slot->stream));
  Fail(status);
  context.stats->codec_seconds += absl::ToDoubleSeconds(absl::Now() - block.codec_start);
  context.recv_slots->Release(block.slot);
  block.slot = nullptr;
  block.stage = Stage::kDone;
  return true;
}

bool RecvTask::Retire(TaskContext& context, uint32_t index) {
  Block& block = blocks_[index];
  if (!Completed(block.requests)) return false;
  if (block.slot != nullptr) context.recv_slots->ReleaseIdle(&block.slot);
  block.host_frame.reset();
  block.stage = Stage::kDone;
  return true;
}

}  // namespace ucclzip::pipeline
