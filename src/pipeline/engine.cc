#include "pipeline/engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "pipeline/recv_task.h"
#include "pipeline/send_task.h"

namespace ucclzip::pipeline {

using transport::MemoryType;
using transport::Request;

namespace {

// Poll interval while a task waits on the GPU (CUDA events cannot wake a thread), and the
// longest sleep otherwise (deadlines are checked at least this often).
constexpr absl::Duration kGpuPoll = absl::Microseconds(20);
constexpr absl::Duration kIdleSleep = absl::Milliseconds(5);
constexpr uint64_t kMaxBlocksPerMessage = 1u << 16;

std::string CallName(const Call& call, int rank) {
  return absl::StrCat("rank ", rank, ": ", call.send ? "send to" : "recv from", " peer ", call.peer, " (", call.count,
                      " elements of ", DataTypeName(call.dtype), ")");
}

}  // namespace

Engine::Engine(transport::Transport& transport, const CommunicatorOptions& options)
    : transport_(transport),
      options_(options),
      rank_(transport.rank()),
      next_send_sequence_(transport.size()),
      next_recv_sequence_(transport.size()),
      recv_out_of_step_(transport.size()),
      policy_(options.min_compress_bytes),
      send_window_(transport.size(),
                   uint64_t(std::max(options.device_slots, 1)) * std::max<uint64_t>(options.pipeline_block_bytes, 1)) {
  thread_ = std::thread([this] { Loop(); });
}

Engine::~Engine() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    wake_ = true;
  }
  thread_.join();
}

absl::Status Engine::EnsureDevice(int device) {
  absl::MutexLock lock(&mutex_);
  if (device_ == device) return absl::OkStatus();
  if (device_ != -1) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": this communicator uses CUDA device ", device_,
                                                   ", not device ", device));
  }
  // Allocate on the buffers' device, and leave the caller's current device as it was.
  int caller_device = device;
  cudaGetDevice(&caller_device);
  cudaSetDevice(device);
  struct RestoreDevice {
    int device;
    ~RestoreDevice() { cudaSetDevice(device); }
  } restore{caller_device};
  // Everything page-locked is allocated here, before this communicator queues any stream wait:
  // a page-locked allocation may wait for the device to idle, and a stream wait only ends when
  // the pipeline has finished, which could then never happen.
  if (absl::Status s = transport_.PrepareDeviceStaging(device); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<StreamFlags>> flags = StreamFlags::Create();
  if (!flags.ok()) return flags.status();
  const uint64_t block_bytes = std::max<uint64_t>(options_.pipeline_block_bytes, 1);
  absl::StatusOr<std::unique_ptr<DeviceSlotPool>> send = DeviceSlotPool::Create(options_.device_slots, block_bytes);
  if (!send.ok()) return send.status();
  absl::StatusOr<std::unique_ptr<DeviceSlotPool>> recv = DeviceSlotPool::Create(options_.device_slots, block_bytes);
  if (!recv.ok()) return recv.status();
  flags_ = std::move(*flags);
  send_slots_ = std::move(*send);
  recv_slots_ = std::move(*recv);
  device_ = device;
  return absl::OkStatus();
}

absl::StatusOr<MessageSpec> Engine::Prepare(const Call& call) {
  const std::string name = CallName(call, rank_);
  if (call.peer < 0 || call.peer >= transport_.size() || call.peer == rank_) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": peer must be another rank of ", transport_.size()));
  }
  if (!IsValidDataType(static_cast<uint8_t>(call.dtype))) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": invalid dtype ", static_cast<int>(call.dtype)));
  }
  if (call.data == nullptr && call.count > 0) return absl::InvalidArgumentError(absl::StrCat(name, ": null buffer"));
  MessageSpec spec;
  spec.send = call.send;
  spec.data = static_cast<uint8_t*>(const_cast<void*>(call.data));
  spec.count = call.count;
  spec.dtype = call.dtype;
  spec.peer = call.peer;
  spec.compression = call.compression;
  spec.tensor = call.tensor_id != 0 ? call.tensor_id : reinterpret_cast<uintptr_t>(call.data) ^ (call.count << 40);
  spec.deadline = absl::Now() + call.timeout;
  spec.block_elements = std::max<uint64_t>(options_.pipeline_block_bytes / ElementSize(call.dtype), 1);
  const uint64_t blocks = std::max<uint64_t>((call.count + spec.block_elements - 1) / spec.block_elements, 1);
  if (blocks > kMaxBlocksPerMessage) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", blocks, " pipeline blocks of ", options_.pipeline_block_bytes,
                                                   " bytes exceed the limit of ", kMaxBlocksPerMessage));
  }
  spec.block_count = static_cast<uint32_t>(blocks);
  const transport::PointerInfo pointer = transport::ClassifyPointer(call.data);
  spec.memory = pointer.type;
  const bool streamed = pointer.type == MemoryType::kDevice || call.stream != nullptr;
  if (!streamed) {
    spec.request = std::make_shared<Request>();
    return spec;
  }
  if (transport::CudaDeviceCount() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(name, ": a CUDA stream was given but no CUDA device is usable"));
  }
  int device = pointer.device;
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat(name, ": no current CUDA device"));
  }
  if (absl::Status s = EnsureDevice(device); !s.ok()) return absl::Status(s.code(), absl::StrCat(name, ": ", s.message()));
  absl::Status status = CudaStatus(cudaEventCreateWithFlags(&spec.input_ready, cudaEventDisableTiming), "creating an event");
  if (status.ok()) status = CudaStatus(cudaEventRecord(spec.input_ready, call.stream), "recording on the caller's stream");
  if (!status.ok()) {
    if (spec.input_ready != nullptr) cudaEventDestroy(spec.input_ready);
    return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
  }
  spec.stream = call.stream;
  spec.request = std::make_shared<Request>();
  return spec;
}

void Engine::Submit(std::vector<MessageSpec> specs) {
  std::vector<std::unique_ptr<MessageTask>> tasks;
  // The callers' streams wait only now, after every call of the group has recorded its position.
  for (MessageSpec& spec : specs) {
    std::unique_ptr<MessageTask> task;
    if (spec.send) {
      task = std::make_unique<SendTask>(std::move(spec));
    } else {
      task = std::make_unique<RecvTask>(std::move(spec));
    }
    task->set_rank(rank_);
    if (task->spec().input_ready != nullptr) {
      absl::StatusOr<StreamFlags::Ticket> ticket = flags_->EnqueueWait(task->spec().stream);
      if (!ticket.ok()) {
        task->Fail(ticket.status());
        task->spec().request->Complete(task->status());
        continue;
      }
      task->set_done_flag(*ticket);
    }
    tasks.push_back(std::move(task));
  }
  absl::MutexLock lock(&mutex_);
  for (auto& task : tasks) {
    const int peer = task->spec().peer;
    std::vector<uint32_t>& next = task->spec().send ? next_send_sequence_ : next_recv_sequence_;
    task->set_first_sequence(next[peer]);
    next[peer] = (next[peer] + task->spec().block_count) & transport::kMaxSequence;
    if (!task->spec().send && !recv_out_of_step_[peer].ok()) task->Fail(recv_out_of_step_[peer]);
    submitted_.push_back(std::move(task));
  }
  wake_ = true;
}

CommunicatorStats Engine::stats() const {
  absl::MutexLock lock(&mutex_);
  return published_stats_;
}

void Engine::Wake() {
  absl::MutexLock lock(&mutex_);
  wake_ = true;
}

void Engine::Report(MessageTask& task) {
  if (task.spec().request->Test()) return;
  if (task.spec().done_flag) flags_->Signal(*task.spec().done_flag);
  task.spec().request->Complete(task.status());
}

void Engine::Loop() {
  TaskContext context;
  context.transport = &transport_;
  context.policy = &policy_;
  context.send_window = &send_window_;
  context.stats = &stats_;
  context.wake = [this](const absl::Status&) { Wake(); };
  bool stopping = false;
  int device = -1;
  bool poll_gpu = false;
  while (!stopping || !active_.empty()) {
    {
      absl::MutexLock lock(&mutex_);
      auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mutex_) { return wake_; };
      mutex_.AwaitWithTimeout(absl::Condition(&woken), poll_gpu ? kGpuPoll : kIdleSleep);
      wake_ = false;
      for (auto& task : submitted_) active_.push_back(std::move(task));
      submitted_.clear();
      stopping = stopping_;
      if (device_ != device) {
        device = device_;
        cudaSetDevice(device);
        context.send_slots = send_slots_.get();
        context.recv_slots = recv_slots_.get();
      }
    }
    bool moved = true;
    while (moved) {
      moved = false;
      poll_gpu = false;
      const absl::Time now = absl::Now();
      for (auto it = active_.begin(); it != active_.end();) {
        MessageTask& task = **it;
        if (stopping) task.Fail(absl::CancelledError("the communicator is being destroyed"));
        if (now > task.spec().deadline) {
          task.Fail(absl::DeadlineExceededError("the operation's timeout passed"));
        }
        moved |= task.Advance(context);
        if (!task.spec().send) {
          if (const absl::Status& step = static_cast<RecvTask&>(task).out_of_step(); !step.ok()) {
            absl::MutexLock lock(&mutex_);
            recv_out_of_step_[task.spec().peer] = step;
          }
        }
        if (!task.status().ok() && task.caller_buffer_idle()) Report(task);
        if (!task.finished()) {
          poll_gpu |= task.waits_on_gpu();
          ++it;
          continue;
        }
        const uint64_t bytes = task.spec().count * ElementSize(task.spec().dtype);
        if (task.spec().send) {
          ++stats_.messages_sent;
          stats_.payload_bytes_sent += bytes;
        } else {
          ++stats_.messages_received;
          stats_.payload_bytes_received += bytes;
        }
        stats_.transfer_seconds += absl::ToDoubleSeconds(absl::Now() - task.started());
        {
          // Published before the caller hears of completion, so that stats() then includes it.
          absl::MutexLock lock(&mutex_);
          published_stats_ = stats_;
        }
        Report(task);
        it = active_.erase(it);
        moved = true;
      }
    }
    absl::MutexLock lock(&mutex_);
    published_stats_ = stats_;
  }
}

}  // namespace ucclzip::pipeline
