#include "pipeline/engine.h"

#include <pthread.h>
#include <sys/prctl.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "pipeline/group_overlaps.h"
#include "pipeline/held_streams.h"
#include "pipeline/reduce.h"
#include "pipeline/self_transfers.h"
#include "transport/message_tag.h"

namespace ucclzip::pipeline {

using transport::MemoryType;
using transport::Request;

namespace {

// Poll interval while a task waits on the GPU (CUDA events cannot wake a thread), and the
// longest sleep otherwise (deadlines are checked at least this often). Linux lets a timed wait
// run late by the thread's timer slack, 50 us unless set: on the CPU machine a 20 us wait took
// 95 us with it and 45 us with 1 us (benchmarks/gpu/timer-slack.sh), so the pipeline thread sets 1 us.
constexpr absl::Duration kGpuPoll = absl::Microseconds(20);
constexpr unsigned long kTimerSlackNs = 1000;
constexpr absl::Duration kIdleSleep = absl::Milliseconds(5);
constexpr uint64_t kMaxBlocksPerMessage = 1u << 16;
// Half the transport's sequences (message_tag.h): what one call may take on one link.
constexpr uint64_t kMaxBlocksPerLink = (uint64_t{transport::kMaxSequence} + 1) / 2;

// Receive blocks from `peer` that may hold buffers at once: device slots, or a host block's
// frame and scratch. A ring sends a block on up to its link's group (LinkGroupBlocks) places
// after it arrived and holds its buffers until then: more than that keep every ring moving
// (docs/COLLECTIVES.md), device_slots more keep its blocks in flight meanwhile.
int ReceiveBlocksFrom(int peer, int rank, int world, const CommunicatorOptions& options) {
  return options.device_slots + static_cast<int>(LinkGroupBlocks(peer, rank, world));
}

std::vector<int> ReceiveBlocksPerPeer(int rank, int world, const CommunicatorOptions& options) {
  std::vector<int> places(world);
  for (int peer = 0; peer < world; ++peer) places[peer] = ReceiveBlocksFrom(peer, rank, world, options);
  return places;
}

// "send to peer 1 (1000 elements of bf16" or "allreduce (1000 elements of bf16, sum"; the caller
// closes it.
std::string CallName(const Call& call, int rank) {
  const Schedule& schedule = call.schedule;
  std::string name = absl::StrCat("rank ", rank, ": ", schedule.name, " (", schedule.count, " elements of ",
                                  DataTypeName(call.dtype));
  if (KindReduces(schedule.kind)) absl::StrAppend(&name, ", ", ReduceOpName(schedule.op));
  if (KindHasRoot(schedule.kind)) absl::StrAppend(&name, ", root ", schedule.root);
  return name;
}

// Whether the schedule reads or writes `role` at all.
bool Uses(const Schedule& schedule, BufferRole role) {
  auto uses = [role](const Chunk& chunk) { return chunk.buffer == role && chunk.count > 0; };
  for (const SendStep& step : schedule.sends) {
    if (step.source == SendStep::Source::kChunk && uses(step.chunk)) return true;
  }
  for (const RecvStep& step : schedule.recvs) {
    if ((step.into && uses(*step.into)) || (step.reduce_with && uses(*step.reduce_with))) return true;
  }
  for (const LocalCopy& copy : schedule.copies) {
    if (uses(copy.from) || uses(copy.to)) return true;
  }
  return false;
}

}  // namespace

Engine::Engine(TransportLanes& lanes, const CommunicatorOptions& options,
               std::unique_ptr<HostCodecThreads> cpu_codec_threads)
    : lanes_(lanes),
      options_(options),
      rank_(lanes.rank()),
      next_send_sequence_(lanes.size()),
      next_recv_sequence_(lanes.size()),
      recv_out_of_step_(lanes.size()),
      unplaced_(lanes.size()),
      cpu_codec_threads_(std::move(cpu_codec_threads)),
      host_jobs_(std::make_unique<HostCodecJobs>(cpu_codec_threads_.get(), [this] { Wake(); })),
      policy_(options.min_compress_bytes),
      send_window_(lanes.size(), options.device_slots, std::max<uint64_t>(options.pipeline_block_bytes, 1)),
      host_frames_ahead_(lanes.size(), kEncodeAheadBlocks),
      host_receive_blocks_(ReceiveBlocksPerPeer(lanes.rank(), lanes.size(), options)) {
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), "ucclzip-engine");
}

void Engine::Stop() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    wake_ = true;
    woken_.store(true, std::memory_order_release);
  }
  thread_.join();
  LetGoOfStreams();
}

void Engine::LetGoOfStreams() {
  // The tasks the thread left may have host codec jobs queued on their buffers: those run first.
  host_jobs_.reset();
  {
    absl::MutexLock lock(&mutex_);
    for (auto& task : submitted_) active_.push_back(std::move(task));
    submitted_.clear();
  }
  // What the tasks left queued on the GPU reads and writes the callers' buffers (an encode of
  // the input, a decode or a local copy into the output) and the slots: it ends before a
  // caller's stream goes on, and before the slots are freed. It waits only on the callers'
  // positions recorded before their holds (input_ready, seen complete before any of it was
  // queued), so it ends whatever the holds.
  if (copy_stream_ != nullptr) cudaStreamSynchronize(copy_stream_);
  for (const auto* pools : {&send_slots_, &recv_slots_}) {
    for (const auto& pool : *pools) {
      if (pool != nullptr) pool->WaitForIdle();
    }
  }
  // Their Operations fail only in the destructor, once the transports are gone; their streams go
  // on now (the transports' Shutdown ended their staging copies). Only UCX may still hold a
  // buffer of theirs then: staging memory, or a host buffer that a receive from a live peer
  // still lands in, which a stream released here might see written late; a stream held until
  // then would hang the transports' destruction instead (their pinned memory's free may wait
  // for the device to idle).
  for (auto& task : active_) LetGoOfStream(*task);
}

Engine::~Engine() {
  Stop();
  // Each task that Stop left (LetGoOfStreams took the submitted ones in) fails its caller's
  // Operation, which would otherwise wait for ever.
  for (auto& task : active_) {
    task->Fail(absl::CancelledError("the communicator was destroyed with the operation pending"));
    Report(*task);
  }
  active_.clear();
  if (copy_stream_ != nullptr) {
    cudaStreamSynchronize(copy_stream_);
    cudaStreamDestroy(copy_stream_);
  }
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
  // Everything page-locked is allocated here, and every kernel loaded, before this
  // communicator queues any stream wait: a page-locked allocation or a lazy kernel load may
  // wait for the device to idle, and a stream wait only ends when the pipeline has finished,
  // which could then never happen.
  if (absl::Status s = lanes_.PrepareDeviceStaging(device); !s.ok()) return s;
  if (absl::Status s = PreloadReduceKernel(); !s.ok()) return s;
  absl::StatusOr<StreamFlags*> flags = StreamFlags::ForDevice(device);
  if (!flags.ok()) return flags.status();
  const uint64_t block_bytes = std::max<uint64_t>(options_.pipeline_block_bytes, 1);
  const int world = lanes_.size();
  // Only the receive slots of the peer whose blocks this rank forwards get pinned host frames:
  // one peer's worth of pinned memory, not world - 1 (a block forwarded from another peer would
  // go through the device).
  const int forwarded_peer = ForwardedPeer(rank_, world);
  const bool staged = lanes_.Stages(transport::MemoryType::kDevice);
  std::vector<std::unique_ptr<DeviceSlotPool>> send(world), recv(world);
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank_) continue;
    absl::StatusOr<std::unique_ptr<DeviceSlotPool>> s =
        DeviceSlotPool::Create(options_.device_slots + kEncodeAheadBlocks, block_bytes, SlotExtras{});
    if (!s.ok()) return s.status();
    // Where device memory is staged, a block to forward lands in the slot's pinned host frame
    // and leaves from there (operation_task_recv.cc).
    absl::StatusOr<std::unique_ptr<DeviceSlotPool>> r = DeviceSlotPool::Create(
        ReceiveBlocksFrom(peer, rank_, world, options_), block_bytes,
        SlotExtras{.scratch = true, .host_frame = options_.forward_from_host && staged && peer == forwarded_peer});
    if (!r.ok()) return r.status();
    send[peer] = std::move(*s);
    recv[peer] = std::move(*r);
  }
  if (absl::Status s = CudaStatus(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "creating a stream");
      !s.ok()) {
    return s;
  }
  flags_ = *flags;
  send_slots_ = std::move(send);
  recv_slots_ = std::move(recv);
  device_ = device;
  return absl::OkStatus();
}

absl::StatusOr<OperationSpec> Engine::Prepare(Call& call) {
  const std::string name = CallName(call, rank_);
  auto invalid = [&](auto... why) { return absl::InvalidArgumentError(absl::StrCat(name, "): ", why...)); };
  if (!IsValidDataType(static_cast<uint8_t>(call.dtype))) return invalid("invalid dtype ", static_cast<int>(call.dtype));
  const Schedule& schedule = call.schedule;
  // A Send or Recv may name this rank itself: the Communicator pairs those into copies within
  // a group (self_transfers.h); a collective's steps always go to other ranks.
  // A refused call never becomes a copy: it only takes its places on links to other ranks.
  const bool refused = !call.refused.ok();
  // A call refused already still takes its places on its links (below), which these two checks
  // do not stop it from counting; they refuse only a call not refused yet.
  if (!refused && call.compression && !IsValidCompressionMode(*call.compression)) {
    return invalid("compression mode ", static_cast<int>(*call.compression), " is not one of kAuto (0), kOn (1), kOff (2)");
  }
  // The collectives check their counts (collective_args.cc); a Send or Recv of more bytes than
  // 64 bits hold got past the block limits where the blocks are as large (pipeline_block_bytes
  // near SIZE_MAX), and its byte count wrapped to a few bytes.
  if (!refused && schedule.count > std::numeric_limits<uint64_t>::max() / ElementSize(call.dtype)) {
    return invalid(schedule.count, " elements of ", ElementSize(call.dtype), " bytes overflow a 64-bit byte count");
  }
  const bool self_allowed = schedule.kind == OperationKind::kSendRecv && !refused;
  auto check_peer = [&](int peer) {
    return peer >= 0 && peer < lanes_.size() && (peer != rank_ || self_allowed);
  };
  const char* which = self_allowed ? " must be a rank of " : " must be another rank of ";
  for (const SendStep& step : schedule.sends) {
    if (!check_peer(step.peer)) return invalid("peer ", step.peer, which, lanes_.size());
  }
  for (const RecvStep& step : schedule.recvs) {
    if (!check_peer(step.peer)) return invalid("peer ", step.peer, which, lanes_.size());
  }
  const bool needs_input = Uses(schedule, BufferRole::kInput), needs_output = Uses(schedule, BufferRole::kOutput);
  if (!refused && ((needs_input && call.input == nullptr) || (needs_output && call.output == nullptr))) {
    return invalid("null buffer");
  }
  OperationSpec spec;
  spec.block_elements = PipelineBlockElements(schedule.count, ElementSize(call.dtype), options_.pipeline_block_bytes,
                                              options_.min_pipeline_block_bytes, schedule.chain_hops);
  // Counted in 64 bits: a step's blocks must fit the tag's block numbers.
  auto too_many_blocks = [&](uint64_t count) { return count > 0 && (count - 1) / spec.block_elements >= kMaxBlocksPerMessage; };
  for (const SendStep& step : schedule.sends) {
    if (too_many_blocks(step.chunk.count)) {
      return invalid(step.chunk.count, " elements take more than ", kMaxBlocksPerMessage, " pipeline blocks of ",
                     spec.block_elements * ElementSize(call.dtype), " bytes");
    }
  }
  for (const RecvStep& step : schedule.recvs) {
    if (too_many_blocks(step.count)) {
      return invalid(step.count, " elements take more than ", kMaxBlocksPerMessage, " pipeline blocks of ",
                     spec.block_elements * ElementSize(call.dtype), " bytes");
    }
  }
  // Every block takes a transport sequence on its link, and a call posts its receives at once:
  // one call's blocks on a link must stay well inside the sequences' wrap (message_tag.h), or
  // a late block would match an early one's tag.
  std::vector<uint64_t> link_blocks(2 * lanes_.size(), 0);
  for (const SendStep& step : schedule.sends) link_blocks[step.peer] += BlockCount(step.chunk.count, spec.block_elements);
  for (const RecvStep& step : schedule.recvs) {
    link_blocks[lanes_.size() + step.peer] += BlockCount(step.count, spec.block_elements);
  }
  const size_t world = lanes_.size();
  for (size_t link = 0; link < link_blocks.size(); ++link) {
    if (link_blocks[link] > kMaxBlocksPerLink) {
      const size_t peer = link % world;
      return invalid(link_blocks[link], " pipeline blocks of ", spec.block_elements * ElementSize(call.dtype), " bytes ",
                     link < world ? "to" : "from", " peer ", peer, ", more than the ", kMaxBlocksPerLink,
                     " one call may have on a link");
    }
  }
  if (refused) {
    // Its places on its links, and nothing else: no buffer, stream or device is touched.
    spec.dtype = call.dtype;
    spec.description = absl::StrCat(name, ", refused)");
    spec.request = std::make_shared<Request>(transport::CompletionCallback{}, lanes_.wait_spin(), spec.description);
    spec.refused = call.refused;
    spec.schedule = std::move(call.schedule);
    return spec;
  }
  // Both buffers must live in the same kind of memory, on the same device.
  const absl::StatusOr<transport::PointerInfo> input_info =
      transport::ClassifyPointer(needs_input ? call.input : nullptr);
  const absl::StatusOr<transport::PointerInfo> output_info =
      transport::ClassifyPointer(needs_output ? call.output : nullptr);
  for (const absl::StatusOr<transport::PointerInfo>* info : {&input_info, &output_info}) {
    if (!info->ok()) return absl::Status(info->status().code(), absl::StrCat(name, "): ", info->status().message()));
  }
  const transport::PointerInfo input = *input_info, output = *output_info;
  transport::PointerInfo pointer = needs_input ? input : output;
  if (needs_input && needs_output && (input.type != output.type || input.device != output.device)) {
    return invalid("the input is ", transport::MemoryTypeName(input.type), " memory (device ", input.device,
                   ") but the output ", transport::MemoryTypeName(output.type), " memory (device ", output.device,
                   "): both must be host memory or memory of one device");
  }
  spec.input = static_cast<uint8_t*>(const_cast<void*>(call.input));
  spec.output = static_cast<uint8_t*>(call.output);
  spec.dtype = call.dtype;
  spec.compression = call.compression.value_or(options_.compression);
  spec.tensor = call.tensor_id != 0 ? call.tensor_id
                                    : reinterpret_cast<uintptr_t>(call.input != nullptr ? call.input : call.output) ^
                                          (schedule.count << 40) ^ static_cast<uint64_t>(schedule.kind);
  spec.deadline = absl::Now() + call.timeout;
  spec.memory = pointer.type;
  spec.description = absl::StrCat(name, ", ", transport::MemoryTypeName(pointer.type), " memory)");
  const bool streamed = pointer.type == MemoryType::kDevice || call.stream != nullptr;
  // The caller waits on this request, so it busy-polls as a transport request would.
  spec.request = std::make_shared<Request>(transport::CompletionCallback{}, lanes_.wait_spin(), spec.description);
  if (!streamed) {
    spec.schedule = std::move(call.schedule);
    return spec;
  }
  if (transport::CudaDeviceCount() == 0) {
    return absl::FailedPreconditionError(absl::StrCat(name, "): a CUDA stream was given but no CUDA device is usable"));
  }
  int device = pointer.device;
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat(name, "): no current CUDA device"));
  }
  if (absl::Status s = EnsureDevice(device); !s.ok()) return absl::Status(s.code(), absl::StrCat(name, "): ", s.message()));
  HeldStreams& held_streams = HeldStreams::ForDevice(device);
  spec.stream_order = ChooseStreamOrder(options_.hold_caller_stream, !lanes_.Stages(MemoryType::kDevice), pointer.type,
                                        held_streams.capacity(), IsLegacyStream(call.stream));
  // A held call on host memory needs none of the pipeline's GPU work, so with too few queues to
  // count it (no device call is held then) it is held uncounted.
  if (spec.stream_order == StreamOrder::kHoldStream && held_streams.capacity() > 0) spec.held_streams = &held_streams;
  absl::Status status = CudaStatus(cudaEventCreateWithFlags(&spec.input_ready, cudaEventDisableTiming), "creating an event");
  if (status.ok()) status = CudaStatus(cudaEventRecord(spec.input_ready, call.stream), "recording on the caller's stream");
  if (!status.ok()) {
    if (spec.input_ready != nullptr) cudaEventDestroy(spec.input_ready);
    return absl::Status(status.code(), absl::StrCat(name, "): ", status.message()));
  }
  spec.stream = call.stream;
  spec.schedule = std::move(call.schedule);
  return spec;
}

void Engine::Discard(std::vector<OperationSpec> specs, const absl::Status& why) {
  for (OperationSpec& spec : specs) {
    if (spec.input_ready != nullptr) cudaEventDestroy(spec.input_ready);
    spec.request->Complete(absl::Status(why.code(), absl::StrCat(spec.description, ": ", why.message())));
  }
}

void Engine::Submit(std::vector<OperationSpec> specs, std::vector<UnplacedCall> unplaced) {
  // Calls of the group that race for a buffer fail, taking their places all the same (as a
  // refused call does), and hold no stream.
  const std::vector<absl::Status> conflicts = GroupOverlaps(specs);
  // The group's streams to hold, all at once: a group that waited for room one stream at a
  // time could wait for itself. A communicator has one device, so its calls share one bound.
  auto holds = [](const OperationSpec& spec) {
    return spec.input_ready != nullptr && spec.stream_order == StreamOrder::kHoldStream;
  };
  HeldStreams* bound = nullptr;
  std::vector<cudaStream_t> counted;
  absl::Time deadline = absl::InfiniteFuture();
  for (size_t i = 0; i < specs.size(); ++i) {
    const OperationSpec& spec = specs[i];
    if (!holds(spec) || spec.held_streams == nullptr || !conflicts[i].ok()) continue;
    bound = spec.held_streams;
    counted.push_back(spec.stream);
    deadline = std::min(deadline, spec.deadline);
  }
  const absl::Status room = bound == nullptr ? absl::OkStatus() : bound->Acquire(counted, deadline);
  std::vector<std::unique_ptr<OperationTask>> tasks;
  // The callers' streams wait only now, after every call of the group has recorded its position.
  for (size_t i = 0; i < specs.size(); ++i) {
    auto task = std::make_unique<OperationTask>(std::move(specs[i]), lanes_.size(), rank_);
    if (!task->spec().refused.ok()) {
      task->Fail(task->spec().refused);
      tasks.push_back(std::move(task));
      continue;
    }
    // Without room for the group's streams none of its calls starts: a part of a group would
    // leave its peers waiting for the rest.
    if (!conflicts[i].ok()) {
      task->Fail(conflicts[i]);
    } else if (!room.ok()) {
      task->Fail(room);
    } else if (holds(task->spec())) {
      absl::StatusOr<StreamFlags::Ticket> ticket = flags_->EnqueueWait(task->spec().stream);
      if (ticket.ok()) {
        task->set_done_flag(*ticket);
      } else {
        if (task->spec().held_streams != nullptr) task->spec().held_streams->Release(task->spec().stream);
        task->Fail(ticket.status());
      }
    }
    tasks.push_back(std::move(task));
  }
  // The calls that keep their streams' order by returning only once done (stream_order.h).
  std::vector<std::shared_ptr<Request>> return_when_done;
  for (const auto& task : tasks) {
    if (task->spec().stream_order == StreamOrder::kReturnWhenDone) return_when_done.push_back(task->spec().request);
  }
  Queue(std::move(tasks), unplaced);
  for (const UnplacedCall& refused : unplaced) {
    if (refused.call.schedule.kind != OperationKind::kSendRecv) TellUnplaced(refused.call);
  }
  if (ReturnWhenDoneScope::Keep(return_when_done)) return;
  // As long as a held stream would wait: until the call is done, fails, or reaches its timeout.
  for (const std::shared_ptr<Request>& request : return_when_done) request->Wait(absl::InfiniteFuture()).IgnoreError();
}

void Engine::Queue(std::vector<std::unique_ptr<OperationTask>> tasks, std::vector<UnplacedCall>& unplaced) {
  absl::MutexLock lock(&mutex_);
  auto next_unplaced = unplaced.begin();
  // The unplaced calls made before the `calls`-th of the tasks on a link are counted, and take
  // their ordinals.
  auto count_unplaced = [&](size_t calls) {
    for (; next_unplaced != unplaced.end() && next_unplaced->calls_before <= calls; ++next_unplaced) {
      for (int peer : next_unplaced->peers) ++unplaced_[peer];
      any_unplaced_ = any_unplaced_ || !next_unplaced->peers.empty();
      if (next_unplaced->call.schedule.kind != OperationKind::kSendRecv) {
        next_unplaced->call.schedule.ordinal = collective_calls_++;
      }
    }
  };
  size_t calls_on_links = 0;
  for (auto& task : tasks) {
    // A call refused above takes its places in its links' order all the same, as a call that
    // fails later does: its peers' matching calls took theirs, and this rank's next call must
    // pair with their next one, not with the message meant for this one.
    const bool refused = !task->status().ok();
    if (!IsOrWasSelfTransfer(task->spec(), rank_)) count_unplaced(calls_on_links++);
    // Copied only after a refusal that took no places, which few programs ever make.
    if (any_unplaced_) task->set_unplaced(unplaced_);
    if (task->spec().schedule.kind != OperationKind::kSendRecv) task->set_collective_ordinal(collective_calls_++);
    std::vector<uint32_t> send(lanes_.size()), recv(lanes_.size());
    for (int peer = 0; peer < lanes_.size(); ++peer) {
      send[peer] = next_send_sequence_[peer];
      recv[peer] = next_recv_sequence_[peer];
      next_send_sequence_[peer] = (next_send_sequence_[peer] + task->SendBlocksTo(peer)) & transport::kMaxSequence;
      next_recv_sequence_[peer] = (next_recv_sequence_[peer] + task->RecvBlocksFrom(peer)) & transport::kMaxSequence;
      if (task->RecvBlocksFrom(peer) > 0 && !recv_out_of_step_[peer].ok()) task->Fail(recv_out_of_step_[peer]);
    }
    if (refused) {
      // A call its own checks refused fails with their words alone, now; its task still runs,
      // sending an abandoned envelope for each of its send places and taking its peers'
      // envelopes at its receive places, so that their matching calls fail at once, naming this
      // rank, and the link stays usable (envelope.h).
      const absl::Status& own = task->spec().refused;
      task->spec().request->Complete(own.ok() ? task->status() : own);
    }
    task->set_first_sequences(std::move(send), std::move(recv));
    task->set_number(submitted_count_++);
    submitted_.push_back(std::move(task));
  }
  count_unplaced(std::numeric_limits<size_t>::max());
  wake_ = true;
  woken_.store(true, std::memory_order_release);
}

void Engine::Abort(const absl::Status& why) {
  absl::MutexLock lock(&mutex_);
  if (aborted_.ok()) aborted_ = why;
  wake_ = true;
  woken_.store(true, std::memory_order_release);
}

void Engine::TellUnplaced(const Call& refused) {
  std::vector<std::unique_ptr<SentNotice>> sent;
  SendNotices(lanes_, CallNotice(refused.schedule, refused.dtype, refused.refused.code(), lanes_.FirstFailedPeer()),
              sent, {});
  absl::MutexLock lock(&mutex_);
  std::erase_if(unplaced_notices_, [](const auto& notice) { return notice->request->Test(); });
  for (auto& notice : sent) unplaced_notices_.push_back(std::move(notice));
}

void Engine::StartSequencesAt(uint32_t first) {
  absl::MutexLock lock(&mutex_);
  std::fill(next_send_sequence_.begin(), next_send_sequence_.end(), first & transport::kMaxSequence);
  std::fill(next_recv_sequence_.begin(), next_recv_sequence_.end(), first & transport::kMaxSequence);
}

CommunicatorStats Engine::stats() const {
  CommunicatorStats stats;
  {
    absl::MutexLock lock(&mutex_);
    stats = published_stats_;
  }
  for (const auto& lane : lanes_.All()) stats.recycled_device_bytes_staged += lane->recycled_device_bytes_staged();
  return stats;
}

void Engine::Wake() {
  absl::MutexLock lock(&mutex_);
  wake_ = true;
  woken_.store(true, std::memory_order_release);
}

// Before it sleeps the pipeline thread busy-polls for wake-ups as long as a caller's Wait does
// (CommunicatorOptions::wait_spin, none on machines of fewer than 8 cores): a small message
// crosses it several times (post, envelope, parts, completion), and a sleeping thread's wake-up
// costs about 10 us each time. At most kIdleSleep, as the sleep after it: the loop checks the
// calls' deadlines and the peers' failures at least that often, whatever wait_spin says.
void Engine::SpinForWake() const {
  const absl::Duration spin = std::min(lanes_.wait_spin(), kIdleSleep);
  if (spin <= absl::ZeroDuration()) return;
  const absl::Time until = absl::Now() + spin;
  while (!woken_.load(std::memory_order_acquire) && absl::Now() < until) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

void Engine::Report(OperationTask& task) {
  if (task.spec().request->Test()) return;
  LetGoOfStream(task);
  task.spec().request->Complete(task.status());
}

void Engine::LetGoOfStream(OperationTask& task) {
  const std::optional<StreamFlags::Ticket> flag = task.take_done_flag();
  if (!flag) return;
  flags_->Signal(*flag);
  if (task.spec().held_streams != nullptr) task.spec().held_streams->Release(task.spec().stream);
}

void Engine::Loop() {
  prctl(PR_SET_TIMERSLACK, kTimerSlackNs);
  TaskContext context;
  context.lanes = &lanes_;
  context.policy = &policy_;
  context.send_window = &send_window_;
  context.host_frames_ahead = &host_frames_ahead_;
  context.host_receive_blocks = &host_receive_blocks_;
  // A run is one transport message, which the transport cuts into at most kMaxBlocks blocks.
  context.max_run_bytes =
      std::min<uint64_t>(kMaxRunBytes, uint64_t{transport::kMaxBlocks - 1} * *lanes_.options().block_bytes);
  context.stats = &stats_;
  context.host_jobs = host_jobs_.get();
  context.wake = [this](const absl::Status&) { Wake(); };
  context.early_envelopes = &early_envelopes_;
  context.collective_task = [this](uint32_t ordinal) -> OperationTask* {
    for (const auto& task : active_) {
      if (task->spec().schedule.kind != OperationKind::kSendRecv && task->spec().schedule.ordinal == ordinal) return task.get();
    }
    return nullptr;
  };
  bool stopping = false;
  int device = -1;
  bool poll_gpu = false;
  bool watching_peers = false;
  absl::Status aborted;  // aborted_, as of the pass
  absl::Time last_progress = absl::Now();  // when a pass last moved a task, or news came
  absl::Time stop_by = absl::InfiniteFuture();  // set once stopping: kStopGrace from then (Stop)
  while (!stopping || (!active_.empty() && absl::Now() < stop_by)) {
    // A task waits on the GPU: for wait_spin after the last progress its events are polled
    // again at once, as a caller's Wait polls (CommunicatorOptions::wait_spin), since a CUDA
    // event cannot wake a thread and a copy or kernel of a few microseconds would otherwise be
    // seen up to kGpuPoll late; after that every kGpuPoll.
    const bool spin_on_gpu = poll_gpu && absl::Now() - last_progress < lanes_.wait_spin();
    if (!poll_gpu) SpinForWake();
    {
      absl::MutexLock lock(&mutex_);
      woken_.store(false, std::memory_order_relaxed);
      auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mutex_) { return wake_; };
      if (!spin_on_gpu) mutex_.AwaitWithTimeout(absl::Condition(&woken), poll_gpu ? kGpuPoll : kIdleSleep);
      if (wake_) last_progress = absl::Now();  // news (a call submitted, a transfer done) counts as progress
      wake_ = false;
      for (auto& task : submitted_) active_.push_back(std::move(task));
      submitted_.clear();
      // Tasks are here in the order the calls were queued, as their ordinals are.
      context.next_recv_sequences = next_recv_sequence_;
      context.next_collective_ordinal = context.oldest_collective_ordinal = context.looking_ordinal = collective_calls_;
      bool oldest_seen = false;
      for (const auto& task : active_) {
        if (task->spec().schedule.kind == OperationKind::kSendRecv) continue;
        if (!oldest_seen) context.oldest_collective_ordinal = task->spec().schedule.ordinal;
        oldest_seen = true;
        if (!task->status().ok()) continue;
        context.looking_ordinal = task->spec().schedule.ordinal;
        break;
      }
      stopping = stopping_;
      aborted = aborted_;
      if (stopping && stop_by == absl::InfiniteFuture()) stop_by = absl::Now() + kStopGrace;
      if (device_ != device) {
        device = device_;
        cudaSetDevice(device);
        context.send_slots.clear();
        context.recv_slots.clear();
        for (auto& pool : send_slots_) context.send_slots.push_back(pool.get());
        for (auto& pool : recv_slots_) context.recv_slots.push_back(pool.get());
        context.copy_stream = copy_stream_;
      }
    }
    bool moved = true;
    for (bool first_pass = true; moved; first_pass = false) {
      moved = false;
      poll_gpu = false;
      const absl::Time now = absl::Now();
      if (!first_pass) last_progress = now;
      // A collective needs every rank: once any peer has failed, none can complete.
      const absl::Status peer_failure = lanes_.FirstPeerFailure();
      // Per peer, whether the tasks so far have started all their sends to it and posted all
      // their receives from it: the next task may then go on with that link.
      std::vector<bool> sends_open(lanes_.size(), true), recvs_open(lanes_.size(), true);
      context.sends_open = &sends_open;
      context.recvs_open = &recvs_open;
      for (auto it = active_.begin(); it != active_.end();) {
        OperationTask& task = **it;
        const bool collective = task.spec().schedule.kind != OperationKind::kSendRecv;
        // A parked task moves only for news of its own transfers, or when it is to fail; the
        // collective that looks for strays looks on a clock. Passing it by leaves the links as
        // they are: those it would close are closed already.
        if (task.Parked(sends_open, recvs_open) && !task.TakeNews() && !stopping && aborted.ok() && task.status().ok() &&
            now <= task.spec().deadline &&
            (!collective || (peer_failure.ok() && task.spec().schedule.ordinal != context.looking_ordinal))) {
          ++it;
          continue;
        }
        if (stopping) task.Fail(absl::CancelledError("the communicator is being destroyed"));
        task.Fail(aborted);  // OK unless aborted
        if (!peer_failure.ok() && collective) task.Fail(peer_failure);
        if (now > task.spec().deadline) {
          task.Fail(absl::DeadlineExceededError("the operation's timeout passed"));
        }
        moved |= task.Advance(context);
        for (int peer = 0; peer < lanes_.size(); ++peer) {
          sends_open[peer] = sends_open[peer] && task.sends_started_to(peer);
          recvs_open[peer] = recvs_open[peer] && task.recvs_posted_from(peer);
        }
        if (!task.out_of_step().empty()) {
          absl::MutexLock lock(&mutex_);
          for (const auto& [peer, why] : task.out_of_step()) recv_out_of_step_[peer] = why;
        }
        if (!task.status().ok() && task.caller_buffer_idle()) Report(task);
        if (!task.finished()) {
          poll_gpu |= task.waits_on_gpu();
          ++it;
          continue;
        }
        // What moved: a failed call (a mismatched receive, a timeout) delivered no message. The
        // transport's counters (wire bytes, transport messages) count what was handed to it.
        if (task.status().ok()) {
          stats_.messages_sent += task.spec().schedule.sends.size();
          stats_.messages_received += task.spec().schedule.recvs.size();
          stats_.payload_bytes_sent += task.payload_bytes_sent();
          stats_.payload_bytes_received += task.payload_bytes_received();
          stats_.transfer_seconds += absl::ToDoubleSeconds(absl::Now() - task.started());
        }
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
    // A call that waits on local work (a codec, the caller's stream) may have no transfer in
    // flight through which to see a peer exit, and a collective's peers fail at their timeout and
    // leave: the transport watches them whenever a call is here (s37-1: a rank waited 60 s past
    // its peers' exits without it).
    if (const bool busy = !active_.empty(); busy != watching_peers) {
      lanes_.WatchPeers(busy);
      watching_peers = busy;
    }
    absl::MutexLock lock(&mutex_);
    published_stats_ = stats_;
  }
}

}  // namespace ucclzip::pipeline
