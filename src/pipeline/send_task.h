// A Send: per block, the compress-or-not decision, then either the plain bytes or a frame.
// Host blocks are encoded by the CPU codec on the pipeline thread. Device blocks are encoded on
// a device slot, and the raw plane leaves as soon as the split stage is done (split-send),
// while the symbols are still being coded; the head and the coded symbols follow.
#pragma once

#include "pipeline/message_task.h"

namespace ucclzip::pipeline {

class SendTask : public MessageTask {
 public:
  explicit SendTask(MessageSpec spec);
  bool Advance(TaskContext& context) override;
  bool finished() const override;
  bool waits_on_gpu() const override;
  bool caller_buffer_idle() const override { return finished(); }

 private:
  enum class Stage { kWaiting, kEncoding, kSending, kDone };
  struct Block {
    Stage stage = Stage::kWaiting;
    std::array<uint8_t, kEnvelopeBytes> envelope{};
    FramePlan plan{};
    std::unique_ptr<uint8_t[]> host_frame;
    DeviceSlot* slot = nullptr;
    bool raw_posted = false;
    uint64_t window_bytes = 0;  // taken from the send window while the block is in flight
    absl::Time codec_start;
    std::vector<std::shared_ptr<transport::Request>> requests;
  };

  bool Start(TaskContext& context, uint32_t index);
  void StartPlain(TaskContext& context, uint32_t index);
  void StartHostFrame(TaskContext& context, uint32_t index);
  bool StartDeviceFrame(TaskContext& context, uint32_t index);
  bool AdvanceEncoding(TaskContext& context, uint32_t index);
  bool AdvanceSending(TaskContext& context, uint32_t index);
  // The block is over (sent or failed, nothing in flight): gives back its slot, frame and room.
  void Retire(TaskContext& context, Block& block);
  // Sends the head and the coded symbols of a finished frame of `frame_bytes` bytes.
  void SendRest(TaskContext& context, uint32_t index, const uint8_t* head, const uint8_t* frame, uint64_t frame_bytes,
                transport::MemoryType frame_memory);
  void Post(TaskContext& context, Block& block, const void* data, uint64_t bytes, transport::MemoryType memory,
            transport::OpTag tag);

  std::vector<Block> blocks_;
  uint32_t next_block_ = 0;
};

}  // namespace ucclzip::pipeline
