// Send blocks: each starts in its link's sequence order once its source is ready and the send
// window has room. A block of the caller's elements, or of a reduced result, is sent plainly
// or as a frame (compress-or-not per block); device frames leave in parts, the raw plane as
// soon as the split stage is done (split-send). A frame may also start encoding ahead, while
// the window is full (a device frame in a send slot beyond the window's blocks, a host frame in
// a buffer of its own), and takes the window in link order once there is room: the blocks on
// their way share the link and land about together, and without encoding ahead the link waited
// for the next frames' encodes (H200 run s6-1; a host chain's blocks, which go alone, for the
// previous block's transfer). A plain block of a point-to-point send takes the following blocks
// that go plainly too into one plain run, whose bytes leave as one transport message
// (plain_run.h). A forwarded block re-sends the parts of a received block exactly as they
// arrived, with no re-coding.
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "pipeline/operation_task.h"

namespace ucclzip::pipeline {

using transport::MemoryType;

namespace {

// Lanes of a frame the CPU codes (host memory): 1024 symbols, the longest that keeps the tiles at
// 64 Ki elements (frame_format.h). The default lengths shrink with the frame, down to 64 symbols
// at 4 MB of bf16, so that a GPU has thousands of lanes to run; the CPU codes a few at a time
// whatever their length, and shorter lanes only flush more states: a 4 MB bf16 frame codes at
// 1.515 in 1024-symbol lanes against 1.493 in 64, and decodes 1.3x faster (benchmarks/RESULTS.md,
// nineteenth session).
constexpr uint32_t kHostLaneSymbols = 1024;

uint64_t ReadFrameBytes(const uint8_t* head) {
  uint64_t value;
  std::memcpy(&value, head + kFrameBytesFieldOffset, sizeof(value));
  return value;
}

}  // namespace

Envelope OperationTask::BlockEnvelope(const SendBlock& block, BlockKind kind) const {
  const SendStep& step = spec_.schedule.sends[block.step];
  Envelope envelope = OperationEnvelope();
  envelope.kind = kind;
  envelope.block_index = block.index;
  envelope.block_count = BlockCount(step.chunk.count, spec_.block_elements);
  envelope.message_count = step.chunk.count;
  envelope.block_elements = BlockElements(step.chunk.count, block.index);
  envelope.run_first = block.run_first;
  envelope.run_blocks = block.run_blocks;
  envelope.unplaced = UnplacedOn(step.peer);
  envelope.collective_ordinal = spec_.schedule.ordinal;
  if (kind == BlockKind::kAbandoned) {
    envelope.run_first = block.index;
    envelope.run_blocks = 1;
    envelope.abandoned_code = status_.ok() ? absl::StatusCode::kUnknown : status_.code();
  }
  if (kind == BlockKind::kFrame) {
    envelope.raw_offset = block.plan.raw_offset;
    envelope.raw_bytes = block.plan.raw_bytes;
    envelope.coded_offset = block.plan.coded_offset;
    envelope.lane_symbols_log2 = static_cast<uint8_t>(std::countr_zero(block.plan.lane_symbols));
  }
  return envelope;
}

OperationTask::RecvBlock* OperationTask::SourceBlock(const SendBlock& block) {
  const SendStep& step = spec_.schedule.sends[block.step];
  if (step.recv_step < 0) return nullptr;
  return &recv_blocks_[recv_step_first_[step.recv_step] + block.index];
}

bool OperationTask::SourceReady(const SendBlock& block) const {
  const SendStep& step = spec_.schedule.sends[block.step];
  if (step.recv_step < 0) return true;
  const RecvBlock& source = recv_blocks_[recv_step_first_[step.recv_step] + block.index];
  if (step.source == SendStep::Source::kForward) return source.landed;
  return source.stage == RecvStage::kDone;
}

bool OperationTask::AdvanceSends(TaskContext& context) {
  bool moved = false;
  for (SendBlock& block : send_blocks_) {
    if (block.stage == SendStage::kWaiting && !status_.ok()) {
      SendAbandoned(context, block);
      moved = true;
    }
    if (block.stage == SendStage::kEncoding) {
      moved |= spec_.memory == MemoryType::kHost ? AdvanceHostFrame(context, block) : AdvanceEncoding(context, block);
    }
    // A carried block completes with the first block of its run.
    if (block.stage == SendStage::kSending && block.run_first == block.index) {
      if (std::optional<absl::Status> done = Completed(block.requests)) {
        FailBlock("send", block.step, block.index, *done);
        RetireSend(context, block, done->ok());
        moved = true;
      }
    }
  }
  // Each link's blocks start strictly in sequence order (after every earlier task's on that
  // link), each once its source is ready and the window to the peer has room; a device frame of
  // the caller's elements also needs a slot. Frames may start ahead of the window, and take it
  // in the same order. A plain run starts all its blocks at once and takes the window's
  // room of its first block only: it is one transfer, as a block is, and the next may start
  // beside it (send_window.h).
  for (size_t peer = 0; peer < send_order_.size(); ++peer) {
    const std::vector<uint32_t>& link = send_order_[peer];
    if (!(*context.sends_open)[peer]) continue;
    while (status_.ok() && next_window_[peer] < next_send_[peer] && TakeWindow(context, send_blocks_[link[next_window_[peer]]])) {
      ++next_window_[peer];
      moved = true;
    }
    while (status_.ok() && next_send_[peer] < link.size() && InputReady()) {
      SendBlock& block = send_blocks_[link[next_send_[peer]]];
      if (!SourceReady(block)) break;
      const SendStep& step = spec_.schedule.sends[block.step];
      const uint64_t bytes = WindowRoom(context, block);
      if (next_window_[peer] == next_send_[peer] && context.send_window->TryTake(step.peer, bytes)) {
        block.window_bytes = bytes;
        if (!StartSend(context, block)) {
          context.send_window->Release(step.peer, bytes);
          block.window_bytes = 0;
          break;
        }
        next_window_[peer] += block.run_blocks;
      } else if (!StartAhead(context, block)) {
        break;
      }
      TraceBlock("send", block.step, block.index, "started");
      next_send_[peer] += block.run_blocks;
      moved = true;
    }
  }
  return moved;
}

void OperationTask::SendAbandoned(TaskContext& context, SendBlock& block) {
  // Every place of a call sends one envelope (envelope.h): its receiver fails at once, naming
  // this rank, instead of waiting until op_timeout and then failing the link, and the next calls
  // on the link pair as they should.
  Envelope envelope = BlockEnvelope(block, BlockKind::kAbandoned);
  // A collective fails once any peer has: name it, so that every rank names a dead one.
  if (spec_.schedule.kind != OperationKind::kSendRecv) envelope.failed_peer = context.lanes->FirstFailedPeer();
  block.envelope = EncodeEnvelope(envelope);
  PostSend(context, block, block.envelope.data(), kEnvelopeBytes, MemoryType::kHost, kEnvelopeStream);
  block.stage = SendStage::kSending;
  block.abandoned = true;
  TraceBlock("send", block.step, block.index, "abandoned");
}

void OperationTask::PostSend(TaskContext& context, SendBlock& block, const void* data, uint64_t bytes, MemoryType memory,
                             PartStream stream) {
  const int peer = spec_.schedule.sends[block.step].peer;
  if (stream == kEnvelopeStream) block.envelope_sent = true;
  block.requests.push_back(context.lanes->ForSend().Send(
      peer, data, bytes, memory, Tag(first_send_sequence_[peer], block.link_position, stream), WakeOnNews(context)));
  context.stats->wire_bytes_sent += bytes;
  ++context.stats->transport_messages_sent;
}

std::optional<FramePlan> OperationTask::FramePlanOf(TaskContext& context, SendBlock& block) {
  const SendStep& step = spec_.schedule.sends[block.step];
  const uint64_t elements = BlockElements(step.chunk.count, block.index);
  if (!block.compress) {
    block.compress = context.policy->ShouldCompress(spec_.compression, spec_.dtype, elements * ElementSize(spec_.dtype),
                                                    step.peer, spec_.memory, spec_.tensor);
  }
  if (!*block.compress) return std::nullopt;
  // A frame that would store the elements as they are (too few to code) goes plainly instead.
  const CodecOptions options{.lane_symbols = spec_.memory == MemoryType::kHost ? kHostLaneSymbols : 0};
  absl::StatusOr<FramePlan> plan = PlanFrame(spec_.dtype, elements, options);
  if (!plan.ok() || !plan->split) return std::nullopt;
  return *plan;
}

PlainRun OperationTask::FormPlainRun(TaskContext& context, const SendBlock& block) {
  const SendStep& step = spec_.schedule.sends[block.step];
  const size_t width = ElementSize(spec_.dtype);
  const uint64_t first_bytes = BlockElements(step.chunk.count, block.index) * width;
  // Staged, a run's transport message would hold staging blocks until its receiver posts, which
  // the sends to other peers may need first (CollectivesDeviceGroups.
  // SendsToPeersThatDependOnEachOtherDoNotDeadlock); the send window bounds a block's.
  if (spec_.schedule.kind != OperationKind::kSendRecv || context.lanes->Stages(spec_.memory)) {
    return PlainRun{.blocks = 1, .bytes = first_bytes};
  }
  // A point-to-point send is one step, whose link order is its block order: the candidates are
  // the blocks after this one.
  const uint32_t candidates = BlockCount(step.chunk.count, spec_.block_elements) - block.index - 1;
  return ExtendPlainRun(
      first_bytes, candidates, context.max_run_bytes,
      [&](uint32_t k) { return BlockElements(step.chunk.count, block.index + k) * width; },
      [&](uint32_t k) { return !FramePlanOf(context, SendBlockOf(block.step, block.index + k)).has_value(); });
}

bool OperationTask::StartSend(TaskContext& context, SendBlock& block) {
  const SendStep& step = spec_.schedule.sends[block.step];
  if (step.source == SendStep::Source::kForward) {
    StartForward(context, block);
    return true;
  }
  RecvBlock* reduced = step.source == SendStep::Source::kReduced ? SourceBlock(block) : nullptr;
  const uint8_t* source = reduced != nullptr ? reduced->result : ChunkAddress(step.chunk, block.index * spec_.block_elements);
  const std::optional<FramePlan> plan = FramePlanOf(context, block);
  if (!plan) {
    StartPlain(context, block, source);
    return true;
  }
  block.plan = *plan;
  if (spec_.memory == MemoryType::kHost) {
    StartHostFrame(context, block, source);
    return true;
  }
  if (reduced != nullptr) {
    // The reduced result lies in the receive block's slot: it is encoded there, on the stream
    // that reduced it.
    block.slot = reduced->slot;
    block.slot_borrowed = true;
  }
  return StartDeviceFrame(context, block, source, block.window_bytes != 0);
}

bool OperationTask::StartAhead(TaskContext& context, SendBlock& block) {
  const SendStep& step = spec_.schedule.sends[block.step];
  if (step.source == SendStep::Source::kForward || !FramePlanOf(context, block)) return false;
  if (spec_.memory == MemoryType::kHost) {
    if (!context.host_frames_ahead->TryTake(step.peer)) return false;
    block.encoding_ahead = true;
  }
  return StartSend(context, block);
}

uint64_t OperationTask::WindowRoom(const TaskContext& context, const SendBlock& block) const {
  const SendStep& step = spec_.schedule.sends[block.step];
  const bool one_of_several = BlockCount(step.chunk.count, spec_.block_elements) > 1;
  return context.send_window->RoomOf(BlockElements(step.chunk.count, block.index) * ElementSize(spec_.dtype),
                                     one_of_several, one_of_several && spec_.schedule.chain_hops > 1);
}

bool OperationTask::TakeWindow(TaskContext& context, SendBlock& block) {
  // Only while the task is well: a block that failed (and with it the task) takes no window.
  const SendStep& step = spec_.schedule.sends[block.step];
  const uint64_t bytes = WindowRoom(context, block);
  if (!context.send_window->TryTake(step.peer, bytes)) return false;
  block.window_bytes = bytes;
  EndEncodeAhead(context, block);
  block.envelope = EncodeEnvelope(BlockEnvelope(block, BlockKind::kFrame));
  PostSend(context, block, block.envelope.data(), kEnvelopeBytes, MemoryType::kHost, kEnvelopeStream);
  return true;
}

void OperationTask::EndEncodeAhead(TaskContext& context, SendBlock& block) {
  if (!block.encoding_ahead) return;
  context.host_frames_ahead->Release(spec_.schedule.sends[block.step].peer);
  block.encoding_ahead = false;
}

void OperationTask::StartForward(TaskContext& context, SendBlock& block) {
  RecvBlock& source = *SourceBlock(block);
  // The block's envelope as it came, but for the count of unplaced calls, which is the next
  // link's, not the one it came over: the two differ where refusals named one link only.
  Envelope forwarded = source.header;
  forwarded.unplaced = UnplacedOn(spec_.schedule.sends[block.step].peer);
  block.envelope = EncodeEnvelope(forwarded);
  PostSend(context, block, block.envelope.data(), kEnvelopeBytes, MemoryType::kHost, kEnvelopeStream);
  const Landing landing = LandingOf(source);
  if (source.on_host) ++context.stats->blocks_forwarded_from_host;
  if (source.header.kind == BlockKind::kPlain) {
    const uint64_t bytes = source.header.block_elements * ElementSize(spec_.dtype);
    StartMeter(context, block, SendBlock::Meter::kPlain, bytes, bytes, absl::Now());
    PostSend(context, block, landing.bytes, bytes, landing.memory, kRawStream);
    ++context.stats->blocks_bypassed;
  } else {
    // Frames forwarded count as compressed traffic: where blocks are forwarded (rings,
    // chains) most of what a compressed link carries is theirs, as most of a plain link's is
    // plain forwards.
    StartMeter(context, block, SendBlock::Meter::kCompressed, source.header.block_elements * ElementSize(spec_.dtype),
               source.frame_bytes, absl::Now());
    PostSend(context, block, landing.bytes + source.plan.raw_offset, source.plan.raw_bytes, landing.memory, kRawStream);
    PostSend(context, block, landing.head, source.plan.raw_offset, MemoryType::kHost, kHeadStream);
    PostSend(context, block, landing.bytes + source.plan.coded_offset, source.frame_bytes - source.plan.coded_offset,
             landing.memory, kCodedStream);
    ++context.stats->blocks_compressed;
  }
  block.stage = SendStage::kSending;
}

void OperationTask::StartPlain(TaskContext& context, SendBlock& block, const uint8_t* source) {
  const PlainRun run = FormPlainRun(context, block);
  block.run_blocks = run.blocks;
  block.envelope = EncodeEnvelope(BlockEnvelope(block, BlockKind::kPlain));
  // The run is one sample of the plain rate: its bytes over its time on the link.
  StartMeter(context, block, SendBlock::Meter::kPlain, run.bytes, run.bytes, absl::Now());
  PostSend(context, block, block.envelope.data(), kEnvelopeBytes, MemoryType::kHost, kEnvelopeStream);
  // The run's envelope names the blocks it carries, which send none of their own: each would
  // cost a small message and a hand-off at both ends (streamed 256 MB GPU-direct messages took
  // 1.4-1.5x as long in 16 MB blocks as in one, H200 run s8-3). Their bytes travel on the first
  // block's raw stream.
  for (uint32_t k = 1; k < run.blocks; ++k) {
    SendBlock& carried = SendBlockOf(block.step, block.index + k);
    carried.run_first = block.index;
    carried.run_blocks = run.blocks;
    carried.stage = SendStage::kSending;
    TraceBlock("send", carried.step, carried.index, "started");
  }
  PostSend(context, block, source, run.bytes, spec_.memory, kRawStream);
  context.stats->blocks_bypassed += run.blocks;
  block.stage = SendStage::kSending;
}

void OperationTask::StartHostFrame(TaskContext& context, SendBlock& block, const uint8_t* source) {
  const SendStep& step = spec_.schedule.sends[block.step];
  const uint64_t elements = BlockElements(step.chunk.count, block.index);
  block.host_frame.reset(new uint8_t[block.plan.max_frame_bytes]);
  block.codec_start = absl::Now();
  block.host_job = context.host_jobs->Run(
      elements * ElementSize(spec_.dtype),
      [source, elements, dtype = spec_.dtype, frame = block.host_frame.get(), capacity = block.plan.max_frame_bytes,
       options = CodecOptions{.lane_symbols = block.plan.lane_symbols}](HostCodecThreads* threads) {
        return CompressHost(source, elements, dtype, frame, capacity, options, threads);
      });
  block.stage = SendStage::kEncoding;
  // Within the window the envelope goes now, as a device frame's does: the receiver checks it
  // while the frame is coded, and learns of a disagreement even if this task fails meanwhile.
  // Ahead of it, the envelope goes with the window (TakeWindow).
  if (block.window_bytes != 0) {
    block.envelope = EncodeEnvelope(BlockEnvelope(block, BlockKind::kFrame));
    PostSend(context, block, block.envelope.data(), kEnvelopeBytes, MemoryType::kHost, kEnvelopeStream);
  }
}

bool OperationTask::AdvanceHostFrame(TaskContext& context, SendBlock& block) {
  bool moved = false;
  if (!block.encoded) {
    if (!block.host_job->done()) return false;
    const std::shared_ptr<const HostCodecJobs::Job> job = std::move(block.host_job);
    context.stats->codec_seconds += absl::ToDoubleSeconds(job->took());
    const absl::StatusOr<uint64_t>& frame_bytes = job->result();
    // A frame whose envelope went (it holds the window) is sent whole though the task failed
    // meanwhile: its receiver has posted, or will post, receives for every part, and one cut
    // short after the envelope left it waiting for the head until the operation timeout, which
    // then failed the link for the calls after it (CI, session 39: a broadcast root that learnt
    // of a disagreement while it encoded for a rank that agreed with it).
    if (!frame_bytes.ok() || (!status_.ok() && block.window_bytes == 0)) {
      FailBlock("send", block.step, block.index, frame_bytes.status());
      if (block.envelope_sent) {
        block.stage = SendStage::kSending;  // what was posted completes, then the block retires
      } else {
        SendAbandoned(context, block);
      }
      return true;
    }
    block.encoded = true;
    block.host_frame_bytes = *frame_bytes;
    const SendStep& step = spec_.schedule.sends[block.step];
    context.policy->HostEncoded(BlockElements(step.chunk.count, block.index) * ElementSize(spec_.dtype), job->took());
    TraceBlock("send", block.step, block.index, "encoded");
    moved = true;
  }
  // Encoded ahead: the frame waits for the window (AdvanceSends), or for the task's end.
  if (block.window_bytes == 0) {
    if (status_.ok()) return moved;
    SendAbandoned(context, block);
    return true;
  }
  PostSend(context, block, block.host_frame.get() + block.plan.raw_offset, block.plan.raw_bytes, MemoryType::kHost,
           kRawStream);
  SendRest(context, block, block.host_frame.get(), block.host_frame.get(), block.host_frame_bytes, MemoryType::kHost);
  return true;
}

bool OperationTask::StartDeviceFrame(TaskContext& context, SendBlock& block, const uint8_t* source, bool windowed) {
  const SendStep& step = spec_.schedule.sends[block.step];
  if (block.slot == nullptr) {
    block.slot = context.send_slots[step.peer]->TryAcquire();
    if (block.slot == nullptr) return false;
  }
  DeviceSlot* slot = block.slot;
  const uint64_t elements = BlockElements(step.chunk.count, block.index);
  block.codec_start = absl::Now();
  // The slot's stream runs after the caller's stream has produced the input (a borrowed slot's
  // stream has also just reduced the source).
  absl::Status status = slot->CheckFits(block.plan);
  if (status.ok()) {
    status = CudaStatus(cudaStreamWaitEvent(slot->stream, spec_.input_ready, 0), "ordering after the caller's stream");
  }
  if (status.ok()) {
    status = slot->codec->Compress(source, elements, spec_.dtype, slot->frame, slot->frame_capacity, slot->stream, {},
                                   slot->split_done);
  }
  // The head (whose header holds the frame's final size) is copied to pinned memory: the size
  // decides how much to send, and the head is sent from there.
  if (status.ok()) {
    status = CudaStatus(cudaMemcpyAsync(slot->head, slot->frame, block.plan.raw_offset, cudaMemcpyDeviceToHost, slot->stream),
                        "copying the frame head");
  }
  if (status.ok()) status = slot->RecordCodecDone();
  if (!status.ok()) {
    FailBlock("send", block.step, block.index, status);
    // What was queued before the failure may still read the caller's input, and an abandoned
    // block does not keep the call from being reported.
    cudaStreamSynchronize(slot->stream);
    SendAbandoned(context, block);
    return true;
  }
  block.stage = SendStage::kEncoding;
  if (windowed) {
    block.envelope = EncodeEnvelope(BlockEnvelope(block, BlockKind::kFrame));
    PostSend(context, block, block.envelope.data(), kEnvelopeBytes, MemoryType::kHost, kEnvelopeStream);
  }
  return true;
}

bool OperationTask::AdvanceEncoding(TaskContext& context, SendBlock& block) {
  DeviceSlot* slot = block.slot;
  const bool windowed = block.window_bytes != 0;
  bool moved = false;
  if (!block.raw_posted && windowed && !block.encoded) {
    absl::StatusOr<bool> split = EventDone(slot->split_done);
    if (split.ok() && *split) {
      PostSend(context, block, slot->frame + block.plan.raw_offset, block.plan.raw_bytes, MemoryType::kDevice, kRawStream);
      block.raw_posted = true;
      moved = true;
    } else if (!split.ok()) {
      FailBlock("send", block.step, block.index, split.status());
    }
  }
  if (!block.encoded) {
    absl::StatusOr<bool> encoded = EventDone(slot->codec_done);
    // Within the window the frame is finished and sent whole even if the task has failed
    // (AdvanceHostFrame says why).
    if (encoded.ok() && !*encoded && (status_.ok() || windowed)) return moved;
    absl::Status status = encoded.status();
    status.Update(slot->CodecStatus(encoded.ok() && *encoded));
    context.stats->codec_seconds += absl::ToDoubleSeconds(absl::Now() - block.codec_start);
    if (!status.ok() || (!status_.ok() && !windowed)) {
      FailBlock("send", block.step, block.index, status);
      if (block.envelope_sent) {
        block.stage = SendStage::kSending;  // drains what was posted, then releases the slot
      } else {
        SendAbandoned(context, block);
      }
      return true;
    }
    block.encoded = true;
    const SendStep& step = spec_.schedule.sends[block.step];
    context.policy->DeviceEncoded(BlockElements(step.chunk.count, block.index) * ElementSize(spec_.dtype),
                                  block.codec_start, absl::Now());
    TraceBlock("send", block.step, block.index, "encoded");
    moved = true;
  }
  // Encoded ahead: the frame waits for the window (AdvanceSends), or for the task's end.
  if (!windowed) {
    if (status_.ok()) return moved;
    SendAbandoned(context, block);
    return true;
  }
  if (!block.raw_posted) {
    PostSend(context, block, slot->frame + block.plan.raw_offset, block.plan.raw_bytes, MemoryType::kDevice, kRawStream);
    block.raw_posted = true;
  }
  SendRest(context, block, slot->head, slot->frame, ReadFrameBytes(slot->head), MemoryType::kDevice);
  return true;
}

void OperationTask::SendRest(TaskContext& context, SendBlock& block, const uint8_t* head, const uint8_t* frame,
                             uint64_t frame_bytes, MemoryType frame_memory) {
  block.stage = SendStage::kSending;
  if (frame_bytes < block.plan.coded_offset || frame_bytes > block.plan.max_frame_bytes) {
    FailBlock("send", block.step, block.index,
              absl::InternalError(absl::StrCat("block ", block.index, ": the encoder reported a frame of ", frame_bytes,
                                               " bytes outside [", block.plan.coded_offset, ", ",
                                               block.plan.max_frame_bytes, "]")));
    return;
  }
  PostSend(context, block, head, block.plan.raw_offset, MemoryType::kHost, kHeadStream);
  PostSend(context, block, frame + block.plan.coded_offset, frame_bytes - block.plan.coded_offset, frame_memory,
           kCodedStream);
  const SendStep& step = spec_.schedule.sends[block.step];
  const uint64_t payload = BlockElements(step.chunk.count, block.index) * ElementSize(spec_.dtype);
  context.policy->Record(step.peer, spec_.tensor, payload, frame_bytes);
  // The frame joins the link now that all of it is posted; its encode counts from its start
  // where it left the link idle (LinkShare).
  StartMeter(context, block, SendBlock::Meter::kCompressed, payload, frame_bytes, block.codec_start);
  ++context.stats->blocks_compressed;
}

void OperationTask::StartMeter(TaskContext& context, SendBlock& block, SendBlock::Meter meter, uint64_t payload,
                               uint64_t wire_bytes, absl::Time start) {
  const int peer = spec_.schedule.sends[block.step].peer;
  // A plain block's pipeline is its post (its caller's `start`).
  block.meter_ticket =
      meter == SendBlock::Meter::kPlain
          ? context.policy->PlainSendStarted(peer, spec_.memory, payload, start)
          : context.policy->CompressedSendStarted(peer, spec_.memory, payload, wire_bytes, start, absl::Now());
  block.meter = meter;
}

void OperationTask::RetireSend(TaskContext& context, SendBlock& block, bool delivered) {
  const SendStep& step = spec_.schedule.sends[block.step];
  const uint64_t payload = RunElements(step.chunk.count, block.index, block.run_blocks) * ElementSize(spec_.dtype);
  // The block's own outcome: a block that arrived after its task failed for another reason still
  // shows what the link delivered.
  if (block.meter == SendBlock::Meter::kPlain) {
    context.policy->PlainSendDone(step.peer, spec_.memory, payload, block.meter_ticket, delivered, absl::Now());
  } else if (block.meter == SendBlock::Meter::kCompressed) {
    context.policy->CompressedSendDone(step.peer, spec_.memory, payload, block.meter_ticket, delivered, absl::Now());
  }
  block.meter = SendBlock::Meter::kNone;
  block.meter_ticket = 0;
  // The slot's stream is idle after a successful encode; after a failure ReleaseIdle waits. A
  // borrowed slot goes back with its receive block.
  if (block.slot != nullptr && !block.slot_borrowed) context.send_slots[step.peer]->ReleaseIdle(&block.slot);
  if (block.slot_borrowed && block.slot != nullptr) cudaStreamSynchronize(block.slot->stream);
  block.slot = nullptr;
  block.host_frame.reset();
  EndEncodeAhead(context, block);
  context.send_window->Release(step.peer, block.window_bytes);
  block.window_bytes = 0;
  block.stage = SendStage::kDone;
  TraceBlock("send", block.step, block.index, "done");
  for (uint32_t k = 1; k < block.run_blocks; ++k) {
    SendBlock& carried = SendBlockOf(block.step, block.index + k);
    carried.stage = SendStage::kDone;
    TraceBlock("send", carried.step, carried.index, "done");
  }
  if (RecvBlock* source = SourceBlock(block); source != nullptr && step.source != SendStep::Source::kChunk) {
    --source->consumers;
  }
}

}  // namespace ucclzip::pipeline
