// Device resources for one pipeline block in flight on the GPU: a codec (its workspace), a
// frame buffer, a pinned copy of the frame's head, a stream and two events (and for receives a
// block of scratch, where plain blocks land and partial reductions are formed, and, for the peer
// whose blocks are forwarded where the transport stages device memory, a pinned host frame). A
// bounded pool of them per direction is allocated once, on the first device operation; the hot
// path only takes and returns slots. Separate send and receive pools keep sends, which wait for
// the peer's receives, from starving the receives.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "ucclzip/codec.h"

namespace ucclzip::pipeline {

struct DeviceSlot {
  std::unique_ptr<GpuCodec> codec;
  cudaStream_t stream = nullptr;
  uint8_t* frame = nullptr;      // device, frame_capacity bytes
  uint8_t* scratch = nullptr;    // device, one block (receive slots: plain blocks, partial results)
  uint8_t* head = nullptr;       // pinned host, head_capacity bytes: header, table, index
  // Pinned host, frame_capacity bytes, or null: a received block that this rank forwards lands
  // here whole (a frame, or a plain block), is sent on from here and copied to the device beside
  // that, so that a relaying rank's forward waits for no copy through the GPU.
  uint8_t* host_frame = nullptr;
  uint64_t frame_capacity = 0;
  uint64_t head_capacity = 0;
  cudaEvent_t split_done = nullptr;  // raw plane final (send) / unused (recv)
  cudaEvent_t codec_done = nullptr;  // encode and head copy done (send) / decode done (recv)

  // Whether a frame of that plan fits the buffers; never expected to fail, since the pool
  // sizes them for every block, but a wrong size here would overrun pinned memory.
  absl::Status CheckFits(const FramePlan& plan) const;
  // Ends a block's work on the slot's stream: queues the read of the codec's errors, then
  // records codec_done.
  absl::Status RecordCodecDone() const;
  // The codec's errors on this slot (a malformed frame, an encoder's bound), given whether
  // codec_done has fired: if it has, read with no trip to the GPU (a trip per block, on a GPU
  // that four processes time-slice, waited for this process's next slice with the pipeline
  // thread blocked); if not (a failed task draining its slots), after waiting for the stream.
  absl::Status CodecStatus(bool codec_done_fired) const;
};

// What a pool's slots hold besides a codec, a frame, a head, a stream and events.
struct SlotExtras {
  bool scratch = false;     // a block of device scratch
  bool host_frame = false;  // a pinned host frame
};

class DeviceSlotPool {
 public:
  // `count` slots for pipeline blocks of up to `block_bytes` bytes of any compressible type.
  static absl::StatusOr<std::unique_ptr<DeviceSlotPool>> Create(int count, uint64_t block_bytes, SlotExtras extras);
  ~DeviceSlotPool();
  DeviceSlotPool(const DeviceSlotPool&) = delete;
  DeviceSlotPool& operator=(const DeviceSlotPool&) = delete;

  // A free slot, or null when all are taken. Pipeline thread only.
  DeviceSlot* TryAcquire();
  void Release(DeviceSlot* slot);
  // Returns `*slot` (if any) once its stream is idle and clears it: a slot given up after a
  // failure may still have codec work queued.
  void ReleaseIdle(DeviceSlot** slot);
  // Returns once no slot's stream has work queued (every slot, taken or free).
  void WaitForIdle() const;
  // Whether every slot has a pinned host frame.
  bool host_frames() const { return extras_.host_frame; }

 private:
  explicit DeviceSlotPool(SlotExtras extras) : extras_(extras) {}
  const SlotExtras extras_;
  std::vector<std::unique_ptr<DeviceSlot>> slots_;
  std::vector<DeviceSlot*> free_;
};

}  // namespace ucclzip::pipeline
