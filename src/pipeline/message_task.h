// One Send or Recv as the pipeline thread runs it: a non-blocking state machine (UCC-style
// post/progress) over the message's blocks. Advance() moves every block as far as it can without
// waiting and says whether anything moved; the engine calls it until the task is finished.
// A failed task stops starting blocks but stays until everything it handed to the transport or
// the GPU has completed, so that no buffer or slot is released while still in use.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "pipeline/compression_policy.h"
#include "pipeline/device_slots.h"
#include "pipeline/envelope.h"
#include "pipeline/send_window.h"
#include "pipeline/stream_flags.h"
#include "transport/transport.h"
#include "ucclzip/communicator.h"

namespace ucclzip::pipeline {

// Tag streams of the parts of one block (the block's sequence is the OpTag sequence).
enum PartStream : uint32_t { kEnvelopeStream = 0, kRawStream = 1, kHeadStream = 2, kCodedStream = 3 };

struct MessageSpec {
  bool send = true;
  uint8_t* data = nullptr;
  uint64_t count = 0;
  DataType dtype = DataType::kRaw;
  int peer = 0;
  transport::MemoryType memory = transport::MemoryType::kHost;
  CompressionMode compression = CompressionMode::kAuto;
  uint64_t tensor = 0;
  absl::Time deadline = absl::InfiniteFuture();
  // Recorded on the caller's stream at the call: the input (or the output's previous users) is
  // ready once it completes. Owned by the task.
  cudaEvent_t input_ready = nullptr;
  cudaStream_t stream = nullptr;
  // Raised when the task finishes, to release the caller's stream.
  std::optional<StreamFlags::Ticket> done_flag;
  uint32_t first_sequence = 0;
  uint32_t block_count = 1;
  uint64_t block_elements = 0;  // elements per block (the last one may be shorter)
  std::shared_ptr<transport::Request> request;
};

// What tasks use of the engine; pipeline thread only.
struct TaskContext {
  transport::Transport* transport = nullptr;
  CompressionPolicy* policy = nullptr;
  DeviceSlotPool* send_slots = nullptr;  // null until the first device operation
  DeviceSlotPool* recv_slots = nullptr;
  SendWindow* send_window = nullptr;
  transport::CompletionCallback wake;  // given to every transport request
  CommunicatorStats* stats = nullptr;
};

class MessageTask {
 public:
  explicit MessageTask(MessageSpec spec) : spec_(std::move(spec)) {}
  virtual ~MessageTask();
  MessageTask(const MessageTask&) = delete;
  MessageTask& operator=(const MessageTask&) = delete;

  // Moves the task on; true if anything changed.
  virtual bool Advance(TaskContext& context) = 0;
  // Done, or failed with nothing left in flight.
  virtual bool finished() const = 0;
  // True while the task waits on the GPU (the engine then polls instead of sleeping).
  virtual bool waits_on_gpu() const = 0;
  // True when nothing in flight reads or writes the caller's buffer: a failed task is then
  // reported to the caller at once, while it drains its own buffers in the background.
  virtual bool caller_buffer_idle() const = 0;

  const MessageSpec& spec() const { return spec_; }
  const absl::Status& status() const { return status_; }
  absl::Time started() const { return started_; }
  // Records the first failure, phrased with this task's description.
  void Fail(const absl::Status& why);
  // "rank 0: send to peer 1 (1000 elements of bf16, host memory)"
  std::string Describe(int rank) const;
  void set_rank(int rank) { rank_ = rank; }
  void set_first_sequence(uint32_t sequence) { spec_.first_sequence = sequence; }
  void set_done_flag(StreamFlags::Ticket ticket) { spec_.done_flag = ticket; }

 protected:
  // True once the caller's event says the input (or output) may be touched; fails the task on
  // a CUDA error.
  bool InputReady();
  uint64_t BlockFirst(uint32_t block) const { return uint64_t{block} * spec_.block_elements; }
  uint64_t BlockElements(uint32_t block) const;
  transport::OpTag Tag(uint32_t block, PartStream stream) const {
    return transport::OpTag{(spec_.first_sequence + block) & transport::kMaxSequence, stream};
  }
  // Completion of a set of requests: nullopt while any is pending, else the first error or OK.
  static std::optional<absl::Status> Completed(const std::vector<std::shared_ptr<transport::Request>>& requests);

  MessageSpec spec_;
  absl::Status status_;
  absl::Time started_ = absl::Now();
  int rank_ = 0;
};

// CUDA's answer for an event: true when done, false when pending; errors become a status.
absl::StatusOr<bool> EventDone(cudaEvent_t event);
absl::Status CudaStatus(cudaError_t err, const char* what);

}  // namespace ucclzip::pipeline
