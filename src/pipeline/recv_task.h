// A Recv: every block's envelope receive is posted at once; each envelope is checked against
// the caller's count and type before anything lands in the caller's buffer, then the block's
// parts are received (plain bytes straight into the buffer, frames into a host buffer or a
// device slot) and frames decoded into the buffer.
#pragma once

#include "pipeline/message_task.h"

namespace ucclzip::pipeline {

class RecvTask : public MessageTask {
 public:
  explicit RecvTask(MessageSpec spec);
  bool Advance(TaskContext& context) override;
  bool finished() const override;
  bool waits_on_gpu() const override;
  bool caller_buffer_idle() const override;
  // Set when the sender's message did not match this receive: later receives from the peer
  // would take the wrong sender messages, so the engine refuses them with this status.
  const absl::Status& out_of_step() const { return out_of_step_; }

 private:
  enum class Stage { kEnvelope, kParts, kHead, kReceiving, kDecoding, kDone };
  struct Block {
    Stage stage = Stage::kEnvelope;
    std::array<uint8_t, kEnvelopeBytes> envelope{};
    Envelope header;
    FramePlan plan{};
    uint64_t frame_bytes = 0;
    std::unique_ptr<uint8_t[]> host_frame;
    DeviceSlot* slot = nullptr;
    absl::Time codec_start;
    std::shared_ptr<transport::Request> envelope_request;
    std::shared_ptr<transport::Request> head_request;
    std::vector<std::shared_ptr<transport::Request>> requests;
  };

  bool AdvanceBlock(TaskContext& context, uint32_t index);
  bool OnEnvelope(uint32_t index);
  // Posts the parts once the caller's stream allows writing and (device frames) a slot is free.
  bool PostParts(TaskContext& context, uint32_t index);
  bool OnHead(TaskContext& context, uint32_t index);
  bool Decode(TaskContext& context, uint32_t index);
  bool FinishDecode(TaskContext& context, uint32_t index);
  // Ends a block: drains its posted parts first if the task failed.
  bool Retire(TaskContext& context, uint32_t index);
  void Post(TaskContext& context, Block& block, void* data, uint64_t bytes, transport::MemoryType memory,
            transport::OpTag tag, std::shared_ptr<transport::Request>* keep = nullptr);
  uint8_t* Output(uint32_t index) const { return spec_.data + BlockFirst(index) * ElementSize(spec_.dtype); }

  std::vector<Block> blocks_;
  bool envelopes_posted_ = false;
  absl::Status out_of_step_;
};

}  // namespace ucclzip::pipeline
