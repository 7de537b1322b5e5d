#include "pipeline/device_slots.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ucclzip::pipeline {
namespace {

absl::Status CudaCheck(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::ResourceExhaustedError(absl::StrCat("pipeline device slot: ", what, ": ", cudaGetErrorString(err)));
}

void Destroy(DeviceSlot& slot) {
  if (slot.stream != nullptr) cudaStreamSynchronize(slot.stream);
  if (slot.frame != nullptr) cudaFree(slot.frame);
  if (slot.scratch != nullptr) cudaFree(slot.scratch);
  if (slot.head != nullptr) cudaFreeHost(slot.head);
  if (slot.host_frame != nullptr) cudaFreeHost(slot.host_frame);
  if (slot.split_done != nullptr) cudaEventDestroy(slot.split_done);
  if (slot.codec_done != nullptr) cudaEventDestroy(slot.codec_done);
  if (slot.stream != nullptr) cudaStreamDestroy(slot.stream);
}

absl::Status Init(DeviceSlot& slot, uint64_t block_bytes, SlotExtras extras) {
  // A block holds block_bytes of one type: fp8 gives the most elements (the codec's bound), and
  // each type's frame and head are sized from its own element count.
  absl::StatusOr<std::unique_ptr<GpuCodec>> codec = GpuCodec::Create(block_bytes);
  if (!codec.ok()) return codec.status();
  slot.codec = std::move(*codec);
  slot.frame_capacity = 0;
  slot.head_capacity = 0;
  for (DataType dtype : {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32, DataType::kFloat8E4M3,
                         DataType::kFloat8E5M2}) {
    const uint64_t elements = block_bytes / ElementSize(dtype);
    slot.frame_capacity = std::max(slot.frame_capacity, MaxFrameBytes(dtype, elements));
    slot.head_capacity = std::max(slot.head_capacity, MaxFrameHeadBytes(dtype, elements));
  }
  if (absl::Status s = CudaCheck(cudaMalloc(reinterpret_cast<void**>(&slot.frame), slot.frame_capacity), "cudaMalloc frame"); !s.ok()) return s;
  if (extras.scratch) {
    if (absl::Status s = CudaCheck(cudaMalloc(reinterpret_cast<void**>(&slot.scratch), block_bytes), "cudaMalloc scratch"); !s.ok()) {
      return s;
    }
  }
  if (extras.host_frame) {
    if (absl::Status s = CudaCheck(cudaHostAlloc(reinterpret_cast<void**>(&slot.host_frame), slot.frame_capacity,
                                                 cudaHostAllocDefault),
                                   absl::StrCat("cudaHostAlloc of a ", slot.frame_capacity,
                                                "-byte host frame for forwarded blocks (UCCLZIP_FORWARD_FROM_HOST=0 "
                                                "forwards through the device without them)"));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = CudaCheck(cudaHostAlloc(reinterpret_cast<void**>(&slot.head), slot.head_capacity, cudaHostAllocDefault), "cudaHostAlloc head");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaCheck(cudaStreamCreateWithFlags(&slot.stream, cudaStreamNonBlocking), "stream"); !s.ok()) return s;
  if (absl::Status s = CudaCheck(cudaEventCreateWithFlags(&slot.split_done, cudaEventDisableTiming), "event"); !s.ok()) return s;
  return CudaCheck(cudaEventCreateWithFlags(&slot.codec_done, cudaEventDisableTiming), "event");
}

}  // namespace

absl::Status DeviceSlot::CheckFits(const FramePlan& plan) const {
  if (plan.raw_offset <= head_capacity && plan.max_frame_bytes <= frame_capacity) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("a frame of ", plan.max_frame_bytes, " bytes with a ", plan.raw_offset,
                                          "-byte head does not fit the device slot (", frame_capacity, " and ",
                                          head_capacity, " bytes)"));
}

absl::Status DeviceSlot::RecordCodecDone() const {
  if (absl::Status s = codec->QueueStatusRead(stream); !s.ok()) return s;
  const cudaError_t err = cudaEventRecord(codec_done, stream);
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat("pipeline device slot: recording the codec's event: ", cudaGetErrorString(err)));
}

absl::Status DeviceSlot::CodecStatus(bool codec_done_fired) const {
  return codec_done_fired ? codec->CompletedStatus(stream) : codec->StreamStatus(stream);
}

absl::StatusOr<std::unique_ptr<DeviceSlotPool>> DeviceSlotPool::Create(int count, uint64_t block_bytes, SlotExtras extras) {
  std::unique_ptr<DeviceSlotPool> pool(new DeviceSlotPool(extras));
  for (int i = 0; i < std::max(count, 1); ++i) {
    pool->slots_.push_back(std::make_unique<DeviceSlot>());
    if (absl::Status s = Init(*pool->slots_.back(), block_bytes, extras); !s.ok()) return s;
    pool->free_.push_back(pool->slots_.back().get());
  }
  return pool;
}

DeviceSlotPool::~DeviceSlotPool() {
  for (auto& slot : slots_) Destroy(*slot);
}

DeviceSlot* DeviceSlotPool::TryAcquire() {
  if (free_.empty()) return nullptr;
  DeviceSlot* slot = free_.back();
  free_.pop_back();
  return slot;
}

void DeviceSlotPool::Release(DeviceSlot* slot) { free_.push_back(slot); }

void DeviceSlotPool::WaitForIdle() const {
  for (const auto& slot : slots_) cudaStreamSynchronize(slot->stream);
}

void DeviceSlotPool::ReleaseIdle(DeviceSlot** slot) {
  if (*slot == nullptr) return;
  cudaStreamSynchronize((*slot)->stream);
  Release(*slot);
  *slot = nullptr;
}

}  // namespace ucclzip::pipeline
