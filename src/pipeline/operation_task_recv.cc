// Receive blocks: a collective's envelope receives are all posted at once; a point-to-point
// message's one after the other, since the blocks that a plain run carries have none (the run's
// first envelope names them: envelope.h). Each envelope is checked against what this rank's own
// schedule expects (operation, counts, type, operator, root, and the plain run it names) before
// anything lands in the caller's buffer. Then, in the link's sequence order, the block's parts
// are received: plain bytes straight into the caller's buffer where nothing else is to be done
// with them, otherwise into scratch; frames into a host buffer or a device slot of that peer. A
// plain run's bytes arrive as one receive of its first block, which the blocks it carries share.
// Last the frame is decoded and the result combined with local elements where the step says so
// (a device frame in one kernel that does both).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "pipeline/operation_task.h"
#include "pipeline/reduce.h"

namespace ucclzip::pipeline {

using transport::MemoryType;

std::string DescribeOperation(OperationKind kind, uint64_t count, DataType dtype, ReduceOp op, int root) {
  // A peer's call refused for its type or operator names the byte it was given.
  const std::string type = IsValidDataType(static_cast<uint8_t>(dtype))
                               ? DataTypeName(dtype)
                               : absl::StrCat("invalid dtype ", static_cast<int>(dtype));
  const std::string reduction = IsValidReduceOp(static_cast<uint8_t>(op))
                                    ? ReduceOpName(op)
                                    : absl::StrCat("invalid reduction operator ", static_cast<int>(op));
  std::string text = absl::StrCat(OperationKindName(kind), " of ", count, " elements of ", type);
  if (KindReduces(kind) && KindHasRoot(kind)) return absl::StrCat(text, " (", reduction, ", root ", root, ")");
  if (KindReduces(kind)) return absl::StrCat(text, " (", reduction, ")");
  if (KindHasRoot(kind)) return absl::StrCat(text, " (root ", root, ")");
  return text;
}

namespace {

// How an envelope says its block's bytes travel: "alone", "as the first of a run of 3 blocks",
// "in block 2's run of 3 blocks".
std::string RunOf(const Envelope& e) {
  if (e.run_first != e.block_index) return absl::StrCat("in block ", e.run_first, "'s run of ", e.run_blocks, " blocks");
  if (e.run_blocks == 1) return "alone";
  return absl::StrCat("as the first of a run of ", e.run_blocks, " blocks");
}

}  // namespace

uint8_t* OperationTask::Destination(const RecvStep& step, uint32_t block) const {
  if (!step.into) return nullptr;
  return ChunkAddress(*step.into, uint64_t{block} * spec_.block_elements);
}

OperationTask::Landing OperationTask::LandingOf(const RecvBlock& block) const {
  if (block.on_host) return Landing{block.slot->host_frame, block.slot->host_frame, MemoryType::kHost};
  const bool frame = block.header.kind == BlockKind::kFrame;
  if (block.slot != nullptr) return Landing{frame ? block.slot->frame : block.result, block.slot->head, spec_.memory};
  return Landing{frame ? block.host_frame.get() : block.result, block.host_frame.get(), spec_.memory};
}

void OperationTask::PostRecv(TaskContext& context, RecvBlock& block, void* data, uint64_t bytes, MemoryType memory,
                             PartStream stream, std::shared_ptr<transport::Request>* keep) {
  const int peer = spec_.schedule.recvs[block.step].peer;
  block.requests.push_back(context.lanes->ForRecv(peer).Recv(
      peer, data, bytes, memory, Tag(first_recv_sequence_[peer], block.link_position, stream), WakeOnNews(context)));
  context.stats->wire_bytes_received += bytes;
  ++context.stats->transport_messages_received;
  if (keep != nullptr) *keep = block.requests.back();
}

void OperationTask::PostEnvelope(TaskContext& context, RecvBlock& block) {
  // A look may have taken it already (operation_task_strays.cc); as a rule none has.
  if (!context.early_envelopes->empty()) {
    const int peer = spec_.schedule.recvs[block.step].peer;
    const uint32_t sequence = Tag(first_recv_sequence_[peer], block.link_position, kEnvelopeStream).sequence;
    if (const auto early = context.early_envelopes->find({peer, sequence}); early != context.early_envelopes->end()) {
      block.envelope = early->second;
      context.early_envelopes->erase(early);
      block.envelope_request = std::make_shared<transport::Request>();
      block.envelope_request->Complete(absl::OkStatus());
      return;
    }
  }
  PostRecv(context, block, block.envelope.data(), kEnvelopeBytes, MemoryType::kHost, kEnvelopeStream,
           &block.envelope_request);
}

bool OperationTask::AdvanceRecvs(TaskContext& context) {
  if (!envelopes_posted_ && !recv_blocks_.empty()) {
    // Envelopes are tiny and host-side: posting them early lets every block's sender go ahead
    // (one that arrives before its receive waits in UCX's unexpected queue, not at the sender).
    // A task that failed before it began (a call refused by its own checks) posts them too, and
    // gives them up at once: every place of its peers' matching calls sends an envelope, real
    // or abandoned, which this place takes, and it drops the parts that follow.
    const bool one_by_one = spec_.schedule.kind == OperationKind::kSendRecv;
    for (RecvBlock& block : recv_blocks_) {
      if (!one_by_one || block.index == 0) PostEnvelope(context, block);
    }
    envelopes_posted_ = true;
    return true;
  }
  bool moved = false;
  for (RecvBlock& block : recv_blocks_) moved |= AdvanceRecv(context, block);
  return moved;
}

bool OperationTask::AdvanceRecv(TaskContext& context, RecvBlock& block) {
  if (block.retired) return false;
  if (!status_.ok() && block.stage == RecvStage::kEnvelope) GiveUpEnvelope(context, block);
  if (!status_.ok() && block.stage != RecvStage::kProcessing) {
    if (!DiscardUnposted(context, block)) return false;
    return RetireRecv(context, block);
  }
  switch (block.stage) {
    case RecvStage::kEnvelope: return OnEnvelope(context, block);
    case RecvStage::kParts: return PostParts(context, block);
    case RecvStage::kHead: return OnHead(context, block);
    case RecvStage::kReceiving: return Process(context, block);
    case RecvStage::kProcessing: return FinishProcessing(context, block);
    case RecvStage::kDone: return RetireRecv(context, block);
  }
  return false;
}

void OperationTask::GiveUpEnvelope(TaskContext& context, RecvBlock& block) {
  // A failed task's envelope receive that nothing matched yet: left counting against the peer,
  // the transport's op_timeout found it without progress and failed the peer, and every later
  // call with it. Given up, it still takes the envelope the peer's call sends for this place
  // (DiscardUnposted then drops the parts), or is cancelled at op_timeout (docs/TRANSPORT.md,
  // GiveUpRecv).
  if (block.envelope_request == nullptr || block.envelope_given_up || block.envelope_request->Test()) return;
  context.lanes->ForRecv(spec_.schedule.recvs[block.step].peer).GiveUpRecv(block.envelope_request);
  block.envelope_given_up = true;
}

bool OperationTask::DiscardUnposted(TaskContext& context, RecvBlock& block) {
  // A failed task's block whose envelope came has the parts that envelope announced on their way
  // (a sender finishes a block it began: operation_task_send.cc), and posts none of them, or not
  // the coded symbols. Left unreceived, a part too large to go eagerly kept its sender waiting
  // until op_timeout, which then failed this rank at the sender for every later call.
  if (block.parts_discarded) return true;
  Envelope header = block.header;
  if (block.stage == RecvStage::kEnvelope) {
    // A given-up envelope receive is settled once it completes: with the peer's envelope for this
    // place, or cancelled at op_timeout.
    if (block.envelope_request != nullptr && !block.envelope_request->Test()) return false;
    // A point-to-point block whose envelope was never posted waits for the block before it,
    // which may yet post it (below).
    if (block.envelope_request == nullptr && spec_.schedule.kind == OperationKind::kSendRecv && block.index > 0) {
      const RecvBlock& before = RecvBlockOf(block.step, block.index - 1);
      if (before.stage == RecvStage::kEnvelope && !before.parts_discarded) return false;
    }
    block.parts_discarded = true;
    // Matched but not yet read when the task failed (perhaps the very envelope that failed it).
    if (block.envelope_request == nullptr || !block.envelope_request->Wait(absl::InfinitePast()).ok()) return true;
    absl::StatusOr<Envelope> decoded = DecodeEnvelope(block.envelope.data());
    if (!decoded.ok()) return true;
    header = *decoded;
    // Taken by a given-up receive, it is checked all the same: one that is not this place's
    // message (the peer's call differs) leaves the link out of step, as OnEnvelope would, so
    // that the calls made after it fail rather than pair with the peer's later messages.
    if (!PairingMismatch(header, block).ok()) MarkOutOfStep(spec_.schedule.recvs[block.step].peer);
    // A point-to-point message's next envelope is posted once this one is known (ExpectNextBlocks):
    // the places after the sender's run, or after this block, still take what it sends there.
    if (spec_.schedule.kind == OperationKind::kSendRecv) {
      const uint64_t next = uint64_t{block.index} + (LeadsRun(header) ? header.run_blocks : 1);
      if (next < BlockCount(spec_.schedule.recvs[block.step].count, spec_.block_elements)) {
        RecvBlock& following = recv_blocks_[recv_step_first_[block.step] + next];
        if (following.envelope_request == nullptr) {
          PostEnvelope(context, following);
          GiveUpEnvelope(context, following);
        }
      }
    }
  } else if (block.stage != RecvStage::kParts && block.stage != RecvStage::kHead) {
    return true;
  }
  block.parts_discarded = true;
  std::vector<PartStream> streams;
  if (block.stage == RecvStage::kHead) {
    streams = {kCodedStream};
  } else if (header.kind == BlockKind::kFrame) {
    streams = {kRawStream, kHeadStream, kCodedStream};
  } else if (header.kind == BlockKind::kPlain && header.run_first == header.block_index) {
    streams = {kRawStream};  // a carried block's bytes are its run's; an abandoned block has none
  }
  const int peer = spec_.schedule.recvs[block.step].peer;
  for (PartStream stream : streams) {
    context.lanes->ForRecv(peer).Discard(peer, Tag(first_recv_sequence_[peer], block.link_position, stream));
  }
  return true;
}

absl::Status OperationTask::UnplacedMismatch(const Envelope& envelope, int peer) const {
  // A call refused on one side only before it could take its places leaves this rank's call
  // paired with another than the peer's, however alike the two look (Engine::UnplacedCall).
  if (envelope.unplaced == UnplacedOn(peer)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "peer ", peer, " counts ", envelope.unplaced, " and rank ", rank_, " ", UnplacedOn(peer),
      " calls between them refused before they took their places on the link (modulo 65536): one side refused a "
      "call that the other made, and this call pairs with another of the peer's"));
}

absl::Status OperationTask::PairingMismatch(const Envelope& envelope, const RecvBlock& block) const {
  const RecvStep& step = spec_.schedule.recvs[block.step];
  const Schedule& mine = spec_.schedule;
  const uint64_t elements = BlockElements(step.count, block.index);
  const uint32_t blocks = BlockCount(step.count, spec_.block_elements);
  if (absl::Status unplaced = UnplacedMismatch(envelope, step.peer); !unplaced.ok()) return unplaced;
  // A point-to-point message is checked by its count and type alone, below. A call refused for
  // its operator took its places all the same: its abandoned envelopes carry that operator, and
  // its own given-up receives compare it with the peers'.
  const bool collective = mine.kind != OperationKind::kSendRecv;
  const bool op_differs = KindReduces(mine.kind) && envelope.op != mine.op &&
                          IsValidReduceOp(static_cast<uint8_t>(envelope.op)) &&
                          IsValidReduceOp(static_cast<uint8_t>(mine.op));
  if (envelope.operation != mine.kind ||
      (collective && (envelope.operation_count != mine.count || envelope.root != mine.root ||
                      envelope.dtype != spec_.dtype || op_differs))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer ", step.peer, " called ",
        DescribeOperation(envelope.operation, envelope.operation_count, envelope.dtype, envelope.op, envelope.root),
        " where rank ", rank_, " called ", DescribeOperation(mine.kind, mine.count, spec_.dtype, mine.op, mine.root)));
  }
  if (collective && envelope.collective_ordinal != mine.ordinal) {
    return absl::FailedPreconditionError(absl::StrCat(
        "peer ", step.peer, " sent this for its collective call ", envelope.collective_ordinal, " where rank ", rank_,
        " waits for that of its call ", mine.ordinal, " (counted from 0, modulo 2^32): the ranks disagreed in an "
        "earlier call, which left a message on the link"));
  }
  if (envelope.dtype != spec_.dtype || envelope.message_count != step.count || envelope.block_index != block.index ||
      envelope.block_count != blocks || envelope.block_elements != elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the sender sent ", envelope.message_count, " elements of ", DataTypeName(envelope.dtype), " (block ",
        envelope.block_index, " of ", envelope.block_count, ", ", envelope.block_elements,
        " elements) where this receive expects ", step.count, " elements of ", DataTypeName(spec_.dtype), " (block ",
        block.index, " of ", blocks, ", ", elements, " elements)"));
  }
  return absl::OkStatus();
}

void OperationTask::MarkOutOfStep(int peer) {
  out_of_step_.emplace_back(peer, absl::FailedPreconditionError(absl::StrCat(
                                      "rank ", rank_, ": receives from peer ", peer,
                                      " are out of step after a mismatched receive")));
}

bool OperationTask::OnEnvelope(TaskContext& context, RecvBlock& block) {
  // A point-to-point block's envelope is posted once the one before it has arrived.
  if (block.envelope_request == nullptr || !block.envelope_request->Test()) return false;
  if (absl::Status s = block.envelope_request->Wait(absl::InfinitePast()); !s.ok()) {
    FailBlock("recv", block.step, block.index, s);
    return true;
  }
  absl::StatusOr<Envelope> envelope = DecodeEnvelope(block.envelope.data());
  if (!envelope.ok()) {
    FailBlock("recv", block.step, block.index, envelope.status());
    return true;
  }
  block.header = *envelope;
  const RecvStep& step = spec_.schedule.recvs[block.step];
  const Schedule& mine = spec_.schedule;
  const uint64_t elements = BlockElements(step.count, block.index);
  const size_t width = ElementSize(spec_.dtype);
  const uint32_t blocks = BlockCount(step.count, spec_.block_elements);
  if (absl::Status why = PairingMismatch(*envelope, block); !why.ok()) {
    MarkOutOfStep(step.peer);
    // A later call's block where this call waits for one: the peer ended this call without
    // sending it, for it disagreed (on a root, say). What it or another peer did send this call
    // names the disagreement better than the ordinals do: look for it now.
    if (mine.kind != OperationKind::kSendRecv && static_cast<int32_t>(envelope->collective_ordinal - mine.ordinal) > 0) {
      next_stray_look_ = absl::InfinitePast();
      LookForStrays(context, /*progressed=*/false);
    }
    FailBlock("recv", block.step, block.index, why);
    return true;
  }
  if (envelope->kind == BlockKind::kAbandoned) {
    // No parts follow. The task fails, and its places still take their peers' envelopes.
    const std::string failed_there =
        envelope->failed_peer >= 0 ? absl::StrCat(", and peer ", envelope->failed_peer, " had failed there") : "";
    FailBlock("recv", block.step, block.index,
              absl::AbortedError(absl::StrCat("peer ", step.peer, " gave up its call before it sent this block (its call "
                                              "failed there with ", absl::StatusCodeToString(envelope->abandoned_code),
                                              failed_there, "; its own error says why)")));
    return true;
  }
  // Runs carry point-to-point messages only (collectives go block by block; a receive of a
  // point-to-point message lands in the caller's buffer as it is), never past the last block.
  if (envelope->run_blocks > 1 &&
      (mine.kind != OperationKind::kSendRecv || uint64_t{envelope->run_first} + envelope->run_blocks > blocks)) {
    FailBlock("recv", block.step, block.index,
              absl::DataLossError(absl::StrCat(
                  "block ", block.index, " of ", blocks, ": the envelope says its bytes travel in a plain run of ",
                  envelope->run_blocks, " blocks from block ", envelope->run_first, ", ",
                  mine.kind != OperationKind::kSendRecv ? "but a collective's blocks go one by one"
                                                        : absl::StrCat("past the message's ", blocks, " blocks of ",
                                                                       step.count * width, " bytes"))));
    return true;
  }
  if (envelope->kind == BlockKind::kFrame) {
    const uint32_t lane_symbols = 1u << envelope->lane_symbols_log2;
    absl::StatusOr<FramePlan> plan = PlanFrame(spec_.dtype, elements, CodecOptions{.lane_symbols = lane_symbols});
    if (!plan.ok() || !plan->split || plan->raw_offset != envelope->raw_offset || plan->raw_bytes != envelope->raw_bytes ||
        plan->coded_offset != envelope->coded_offset) {
      FailBlock("recv", block.step, block.index,
                absl::DataLossError(absl::StrCat("block ", block.index, ": the envelope's frame layout (raw ",
                                                 envelope->raw_offset, "+", envelope->raw_bytes, ", coded at ",
                                                 envelope->coded_offset, ", lanes of ", lane_symbols,
                                                 " symbols) is not the one of ", elements, " elements of ",
                                                 DataTypeName(spec_.dtype))));
      return true;
    }
    block.plan = *plan;
  }
  block.stage = RecvStage::kParts;
  if (mine.kind == OperationKind::kSendRecv) ExpectNextBlocks(context, block);
  return true;
}

void OperationTask::ExpectNextBlocks(TaskContext& context, const RecvBlock& block) {
  const RecvStep& step = spec_.schedule.recvs[block.step];
  // The blocks a run carries come with no envelope: theirs is the run's, for their own place.
  const uint32_t end = LeadsRun(block.header) ? block.index + block.header.run_blocks : block.index + 1;
  for (uint32_t b = block.index + 1; b < end; ++b) {
    RecvBlock& carried = recv_blocks_[recv_step_first_[block.step] + b];
    carried.header = block.header;
    carried.header.block_index = b;
    carried.header.block_elements = BlockElements(step.count, b);
    carried.stage = RecvStage::kParts;
  }
  if (end < BlockCount(step.count, spec_.block_elements)) {
    PostEnvelope(context, recv_blocks_[recv_step_first_[block.step] + end]);
  }
}

bool OperationTask::PostParts(TaskContext& context, RecvBlock& block) {
  const RecvStep& step = spec_.schedule.recvs[block.step];
  // Parts are posted in the link's sequence order, after every earlier task's on that link (this
  // is what bounds the slots a ring can hold: schedule.h), and nothing lands in the caller's
  // buffer before the caller's stream is done with it.
  if (recv_order_[step.peer][next_parts_[step.peer]] != static_cast<uint32_t>(&block - recv_blocks_.data())) return false;
  if (!(*context.recvs_open)[step.peer]) return false;
  if (!InputReady()) return false;
  if (block.header.run_first != block.index) return PostCarried(block);
  const uint64_t bytes = BlockElements(step.count, block.index) * ElementSize(spec_.dtype);
  const bool frame = block.header.kind == BlockKind::kFrame;
  // Plain elements whose result is the received elements themselves, in the caller's output.
  const bool lands_in_output = !frame && step.into && !step.reduce_with;
  // Where the transport would stage a block that this rank forwards through its pinned memory
  // to the device, and back out of the device to forward it, the block lands in its slot's
  // pinned host frame instead: the forward leaves from there and waits for no copy through
  // the GPU (on a GPU that several processes time-slice, each copy also waits for a slice),
  // and the copy to the device runs beside it.
  const bool on_host = spec_.memory == MemoryType::kDevice && recv_step_forwarded_[block.step] &&
                       context.recv_slots[step.peer]->host_frames();
  const bool direct = lands_in_output && !on_host;
  if (LeadsRun(block.header)) {
    // OnEnvelope let only point-to-point blocks, which land directly, lead a run.
    block.result = Destination(step, block.index);
    block.into_caller = true;
    PostRecv(context, block, block.result,
             RunElements(step.count, block.index, block.header.run_blocks) * ElementSize(spec_.dtype), spec_.memory,
             kRawStream, &block.run_request);
    block.stage = RecvStage::kReceiving;
    ++next_parts_[step.peer];
    return true;
  }
  if (direct) {
    block.result = Destination(step, block.index);
    block.into_caller = true;
    PostRecv(context, block, block.result, bytes, spec_.memory, kRawStream);
    block.stage = RecvStage::kReceiving;
    ++next_parts_[step.peer];
    return true;
  }
  if (spec_.memory == MemoryType::kHost) {
    if (!context.host_receive_blocks->TryTake(step.peer)) return false;
    block.holds_host_place = true;
    if (frame) block.host_frame.reset(new uint8_t[block.plan.max_frame_bytes]);
    if (!frame || step.reduce_with || !step.into) {
      block.host_scratch.reset(new uint8_t[bytes > 0 ? bytes : 1]);
      block.result = block.host_scratch.get();
    }
  } else {
    block.slot = context.recv_slots[step.peer]->TryAcquire();
    if (block.slot == nullptr) return false;
    if (absl::Status fits = frame ? block.slot->CheckFits(block.plan) : absl::OkStatus(); !fits.ok()) {
      context.recv_slots[step.peer]->Release(block.slot);
      block.slot = nullptr;
      FailBlock("recv", block.step, block.index, fits);
      return true;
    }
    block.on_host = on_host;
    if (lands_in_output) {
      block.result = Destination(step, block.index);
    } else if (!frame || step.reduce_with || !step.into) {
      block.result = block.slot->scratch;
    }
  }
  ++next_parts_[step.peer];
  const Landing landing = LandingOf(block);
  if (!frame) {
    PostRecv(context, block, landing.bytes, bytes, landing.memory, kRawStream);
    block.stage = RecvStage::kReceiving;
    return true;
  }
  PostRecv(context, block, landing.bytes + block.plan.raw_offset, block.plan.raw_bytes, landing.memory, kRawStream);
  PostRecv(context, block, landing.head, block.plan.raw_offset, MemoryType::kHost, kHeadStream, &block.head_request);
  block.stage = RecvStage::kHead;
  return true;
}

bool OperationTask::PostCarried(RecvBlock& block) {
  const RecvStep& step = spec_.schedule.recvs[block.step];
  // The run's first block came earlier on the link, so it has posted the run's receive, unless
  // it leads no such run: a block that follows a run, or a block alone, may name one that does
  // not exist.
  const RecvBlock& first = RecvBlockOf(block.step, block.header.run_first);
  if (!LeadsRun(first.header) || first.header.run_blocks != block.header.run_blocks || first.run_request == nullptr) {
    FailBlock("recv", block.step, block.index,
              absl::DataLossError(absl::StrCat("block ", block.index, "'s envelope says its bytes travel ",
                                               RunOf(block.header), ", but block ", block.header.run_first,
                                               "'s says its bytes travel ", RunOf(first.header))));
    return true;
  }
  block.result = Destination(step, block.index);
  block.into_caller = true;
  block.requests.push_back(first.run_request);
  block.stage = RecvStage::kReceiving;
  ++next_parts_[step.peer];
  return true;
}

bool OperationTask::OnHead(TaskContext& context, RecvBlock& block) {
  if (!block.head_request->Test()) return false;
  if (absl::Status s = block.head_request->Wait(absl::InfinitePast()); !s.ok()) {
    FailBlock("recv", block.step, block.index, s);
    return true;
  }
  const Landing landing = LandingOf(block);
  std::memcpy(&block.frame_bytes, landing.head + kFrameBytesFieldOffset, sizeof(block.frame_bytes));
  if (block.frame_bytes < block.plan.coded_offset || block.frame_bytes > block.plan.max_frame_bytes) {
    FailBlock("recv", block.step, block.index,
              absl::DataLossError(absl::StrCat("block ", block.index, ": the frame header claims ", block.frame_bytes,
                                               " bytes, outside [", block.plan.coded_offset, ", ",
                                               block.plan.max_frame_bytes, "]")));
    return true;
  }
  PostRecv(context, block, landing.bytes + block.plan.coded_offset, block.frame_bytes - block.plan.coded_offset,
           landing.memory, kCodedStream);
  block.stage = RecvStage::kReceiving;
  return true;
}

bool OperationTask::PredecessorsDone(const RecvStep& step, uint32_t block) {
  if (step.after_recv >= 0 && RecvBlockOf(step.after_recv, block).stage != RecvStage::kDone) return false;
  return step.after_send < 0 || SendBlockOf(step.after_send, block).stage == SendStage::kDone;
}

bool OperationTask::Process(TaskContext& context, RecvBlock& block) {
  std::optional<absl::Status> done = Completed(block.requests);
  if (!done) return false;
  if (!done->ok()) {
    FailBlock("recv", block.step, block.index, *done);
    return RetireRecv(context, block);
  }
  const bool newly_landed = !block.landed;
  if (newly_landed) {
    block.landed = true;
    TraceBlock("recv", block.step, block.index, "landed");
  }
  const RecvStep& step = spec_.schedule.recvs[block.step];
  if (!PredecessorsDone(step, block.index)) return newly_landed;
  const uint64_t elements = BlockElements(step.count, block.index);
  const bool frame = block.header.kind == BlockKind::kFrame;
  if (!frame && !step.reduce_with && !block.on_host) {
    block.stage = RecvStage::kDone;
    return true;
  }
  // The decoded block goes where the result goes, unless a reduction still has to combine it
  // (except a device frame to reduce, which is combined as it is decoded: below).
  uint8_t* decoded = step.reduce_with || !step.into ? block.result : Destination(step, block.index);
  uint8_t* result = step.into ? Destination(step, block.index) : block.result;
  const uint8_t* local = step.reduce_with ? ChunkAddress(*step.reduce_with, uint64_t{block.index} * spec_.block_elements)
                                          : nullptr;
  const Combiner combiner{spec_.dtype, spec_.schedule.op, step.divisor};
  block.codec_start = absl::Now();
  if (block.slot == nullptr) {
    ProcessOnHost(context, block, combiner, decoded, result, local);
    return true;
  }
  DeviceSlot* slot = block.slot;
  absl::Status status = CudaStatus(cudaStreamWaitEvent(slot->stream, spec_.input_ready, 0), "ordering after the caller's stream");
  if (status.ok() && block.on_host) {
    // The whole block to the device: a frame where the decoder reads it, plain elements where
    // they belong (block.result), while the forward leaves from the host frame.
    status = CudaStatus(cudaMemcpyAsync(frame ? slot->frame : block.result, slot->host_frame,
                                        frame ? block.frame_bytes : elements * ElementSize(spec_.dtype),
                                        cudaMemcpyHostToDevice, slot->stream),
                        "copying the block from its host frame to the device");
  } else if (status.ok() && frame) {
    status = CudaStatus(cudaMemcpyAsync(slot->frame, slot->head, block.plan.raw_offset, cudaMemcpyHostToDevice, slot->stream),
                        "copying the frame head to the device");
  }
  // A frame to reduce is decoded and combined by one kernel, straight into the result: on a GPU
  // that several processes time-slice, every kernel waits for a slice, so one fewer per hop
  // counts for more than the pass over the decoded copy that it also saves.
  if (status.ok() && frame && local != nullptr) {
    status = slot->codec->DecompressAndCombine(slot->frame, block.frame_bytes, spec_.dtype, local, result, elements,
                                               combiner.op, combiner.divisor, slot->stream);
  } else if (status.ok() && frame) {
    status = slot->codec->Decompress(slot->frame, block.frame_bytes, spec_.dtype, decoded, elements, slot->stream);
  } else if (status.ok() && local != nullptr) {
    status = ReduceDevice(combiner, decoded, local, result, elements, slot->stream);
  }
  if (status.ok()) status = slot->RecordCodecDone();
  FailBlock("recv", block.step, block.index, status);
  block.stage = RecvStage::kProcessing;
  return true;
}

void OperationTask::ProcessOnHost(TaskContext& context, RecvBlock& block, const Combiner& combiner, uint8_t* decoded,
                                  uint8_t* result, const uint8_t* local) {
  const uint64_t elements = BlockElements(spec_.schedule.recvs[block.step].count, block.index);
  const uint8_t* frame = block.header.kind == BlockKind::kFrame ? block.host_frame.get() : nullptr;
  auto work = [=, frame_bytes = block.frame_bytes, dtype = spec_.dtype](HostCodecThreads* threads) -> absl::StatusOr<uint64_t> {
    if (frame != nullptr) {
      if (absl::Status s = DecompressHost(frame, frame_bytes, dtype, decoded, elements, threads); !s.ok()) return s;
    }
    if (local != nullptr) ReduceHost(combiner, decoded, local, result, elements);
    return uint64_t{0};
  };
  block.host_job = context.host_jobs->Run(elements * ElementSize(spec_.dtype), std::move(work));
  block.stage = RecvStage::kProcessing;
}

bool OperationTask::FinishProcessing(TaskContext& context, RecvBlock& block) {
  if (block.host_job != nullptr) {
    // Whatever became of the task, the job has the block's buffers until it is done.
    if (!block.host_job->done()) return false;
    const std::shared_ptr<const HostCodecJobs::Job> job = std::move(block.host_job);
    if (block.header.kind == BlockKind::kFrame) context.policy->HostDecoded(job->took());
    context.stats->codec_seconds += absl::ToDoubleSeconds(job->took());
    FailBlock("recv", block.step, block.index, job->result().status());
    TraceBlock("recv", block.step, block.index, "processed");
    block.stage = RecvStage::kDone;
    return true;
  }
  absl::StatusOr<bool> decoded = EventDone(block.slot->codec_done);
  if (decoded.ok() && !*decoded && status_.ok()) return false;
  absl::Status status = decoded.status();
  // Reports a malformed frame (and, in a failed task, waits for what is left on the stream).
  status.Update(block.slot->CodecStatus(decoded.ok() && *decoded));
  FailBlock("recv", block.step, block.index, status);
  context.stats->codec_seconds += absl::ToDoubleSeconds(absl::Now() - block.codec_start);
  TraceBlock("recv", block.step, block.index, "processed");
  block.stage = RecvStage::kDone;
  return true;
}

bool OperationTask::RetireRecv(TaskContext& context, RecvBlock& block) {
  if (!Completed(block.requests)) return false;
  if (block.consumers > 0) {
    // Sends still read this block's buffers; after a failure only those already started do.
    if (status_.ok()) return false;
    for (SendBlock& send : send_blocks_) {
      if ((send.stage == SendStage::kEncoding || send.stage == SendStage::kSending) && !send.abandoned &&
          SourceBlock(send) == &block) {
        return false;
      }
    }
  }
  const int peer = spec_.schedule.recvs[block.step].peer;
  if (block.slot != nullptr) context.recv_slots[peer]->ReleaseIdle(&block.slot);
  block.host_frame.reset();
  block.host_scratch.reset();
  if (block.holds_host_place) context.host_receive_blocks->Release(peer);
  block.holds_host_place = false;
  block.stage = RecvStage::kDone;
  block.retired = true;
  return true;
}

}  // namespace ucclzip::pipeline
