// Strays and notices: how a collective learns of a peer's disagreement or failure that reaches it
// through no receive of its own. Ranks that disagree on a call (a broadcast's root, say) send to
// ranks that do not receive from them and wait for ranks that send them nothing; a rank that
// heard from none of the ranks it waited for learnt of nothing until the operation timeout
// (until session 42; docs/COLLECTIVES.md, "Errors").
//
// Once a collective has run for kStrayLookAfter, and then every kStrayLookInterval, it looks on
// each peer's lane (Transport::TakeStray, at once, on the pipeline thread: no other task posts
// a receive meanwhile):
// - for this call's notice from the peer (notices.h): a collective that fails after it began,
//   or is refused before it could take its places, sends every peer its call;
// - for a *stray*: an envelope the peer sent that no receive takes. Every collective posts all
//   its envelope receives when it begins, and the transport leaves alone what a receive posted
//   there awaits, so a stray is no envelope of a call that this rank has begun and that has a
//   place for it. Its envelope says whose it is: this call's fails the task, naming both calls,
//   and its parts are drained so that the sender's transfers complete; a later call's, or a
//   point-to-point message's next block (whose receive is posted once the block before it has
//   come), is kept for its receive (TaskContext::early_envelopes); an earlier call's (what a
//   disagreement left) is dropped, its parts drained.
// - for notices of calls that no longer run here, which it drops.
#include "absl/strings/str_cat.h"
#include "logging/logging.h"
#include "pipeline/operation_task.h"

namespace ucclzip::pipeline {

namespace {

bool SameCall(const Envelope& envelope, const Schedule& mine, DataType dtype) {
  return envelope.operation == mine.kind && envelope.operation_count == mine.count && envelope.dtype == dtype &&
         envelope.root == mine.root && (!KindReduces(mine.kind) || envelope.op == mine.op);
}

// Whether collective ordinal `a` comes after `b` (they wrap).
bool Later(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }

// "its call failed with INVALID_ARGUMENT; its own error says why", for an abandoned envelope.
std::string FailedWith(const Envelope& envelope) {
  return absl::StrCat("its call failed with ", absl::StatusCodeToString(envelope.abandoned_code),
                      envelope.failed_peer >= 0 ? absl::StrCat(", and peer ", envelope.failed_peer, " had failed there") : "",
                      "; its own error says why");
}

}  // namespace

bool OperationTask::NoticesSent() const {
  for (const auto& notice : notices_) {
    if (!notice->request->Test()) return false;
  }
  return true;
}

bool OperationTask::LookForStrays(TaskContext& context, bool progressed) {
  if (spec_.schedule.kind == OperationKind::kSendRecv) return false;
  if (!status_.ok()) {
    SendNotices(context);
    return false;
  }
  // One look for every collective here: a large queue of them costs no more, and the others
  // read no clock on this hot path (one that becomes the looking one may look once early).
  if (spec_.schedule.ordinal != context.looking_ordinal) return false;
  const absl::Time now = absl::Now();
  if (progressed) next_stray_look_ = std::max(next_stray_look_, now + kStrayLookAfter);
  if (now < next_stray_look_) return false;
  next_stray_look_ = now + kStrayLookInterval;
  const transport::StrayQuery any_envelope{.stream = kEnvelopeStream};
  // Notices of calls before every collective here are no one's; those of the calls from the
  // looking one to the last queued go to their call.
  const transport::StrayQuery stale_notices{.stream = kNoticeStream,
                                            .end = context.oldest_collective_ordinal & transport::kMaxSequence,
                                            .window = (transport::kMaxSequence + 1) / 2};
  const transport::StrayQuery notices_here{
      .stream = kNoticeStream,
      .end = context.next_collective_ordinal & transport::kMaxSequence,
      .window = (context.next_collective_ordinal - context.looking_ordinal) & transport::kMaxSequence};
  std::array<uint8_t, kEnvelopeBytes> bytes{};
  transport::OpTag found;
  bool moved = false;
  for (int peer = 0; peer < static_cast<int>(send_order_.size()); ++peer) {
    if (peer == rank_) continue;
    for (int taken = 0; taken < kMaxTakenPerLook; ++taken) {
      if (TakeStray(context, peer, stale_notices, bytes, found)) {
        // dropped
      } else if (notices_here.window > 0 && TakeStray(context, peer, notices_here, bytes, found)) {
        // Its sequence is its call's ordinal modulo 2^20, within the window from the looking one.
        const uint32_t ordinal =
            context.looking_ordinal + ((found.sequence - context.looking_ordinal) & transport::kMaxSequence);
        if (OperationTask* owner = context.collective_task(ordinal); owner != nullptr) owner->OnNotice(peer, bytes);
      } else if (TakeStray(context, peer, any_envelope, bytes, found)) {
        OnStrayEnvelope(context, peer, found, bytes);
      } else {
        break;
      }
      moved = true;
    }
  }
  return moved;
}

bool OperationTask::TakeStray(TaskContext& context, int peer, const transport::StrayQuery& query,
                              std::array<uint8_t, kEnvelopeBytes>& bytes, transport::OpTag& found) {
  // Completes at once, on the lane's progress thread; waited for here so that no task posts a
  // receive for what it takes before OnStrayEnvelope has kept it for that receive.
  const std::shared_ptr<transport::Request> take =
      context.lanes->ForRecv(peer).TakeStray(peer, query, bytes.data(), bytes.size(), &found);
  // NotFound: nothing there; any other failure (the peer's, a transport block shorter than an
  // envelope) leaves the task to fail, or not, by its own way.
  return take->Wait(absl::InfiniteFuture()).ok();
}

void OperationTask::OnNotice(int peer, const std::array<uint8_t, kEnvelopeBytes>& bytes) {
  const Schedule& mine = spec_.schedule;
  absl::StatusOr<Envelope> notice = DecodeEnvelope(bytes.data());
  if (!notice.ok()) {
    return Fail(absl::Status(notice.status().code(), absl::StrCat("peer ", peer, " sent a notice that is no envelope: ",
                                                                  notice.status().message())));
  }
  // Its sequence is this call's ordinal modulo 2^20: one of a call 2^20 calls away is no news.
  if (notice->collective_ordinal != mine.ordinal || notice->kind != BlockKind::kAbandoned) return;
  told_by_notice_ = true;
  if (SameCall(*notice, mine, spec_.dtype)) {
    return Fail(absl::AbortedError(absl::StrCat("peer ", peer, " gave up its call (", FailedWith(*notice), ")")));
  }
  Fail(absl::InvalidArgumentError(absl::StrCat(
      "peer ", peer, " called ",
      DescribeOperation(notice->operation, notice->operation_count, notice->dtype, notice->op, notice->root), " where rank ",
      rank_, " called ", DescribeOperation(mine.kind, mine.count, spec_.dtype, mine.op, mine.root), " (",
      FailedWith(*notice), ")")));
}

void OperationTask::OnStrayEnvelope(TaskContext& context, int peer, transport::OpTag tag,
                                    const std::array<uint8_t, kEnvelopeBytes>& bytes) {
  const Schedule& mine = spec_.schedule;
  absl::StatusOr<Envelope> envelope = DecodeEnvelope(bytes.data());
  if (!envelope.ok()) {
    return Fail(absl::Status(envelope.status().code(),
                             absl::StrCat("peer ", peer, " sent a message that no receive takes, and ",
                                          envelope.status().message())));
  }
  const bool collective = envelope->operation != OperationKind::kSendRecv;
  if (collective && envelope->collective_ordinal == mine.ordinal) return FailForStray(context, peer, tag, *envelope);
  OperationTask* owner = collective && context.collective_task ? context.collective_task(envelope->collective_ordinal) : nullptr;
  if (owner != nullptr && owner->envelopes_posted()) return owner->FailForStray(context, peer, tag, *envelope);
  // A sequence the engine has assigned belongs to a call that took its place there; one of an
  // ended call is a late message for that place, and dropped. Any other waits for its place's
  // receive, which pairs it (and fails as out of step, where an earlier call left it).
  const uint32_t next = context.next_recv_sequences[peer];
  const bool assigned = ((next - tag.sequence - 1) & transport::kMaxSequence) < (transport::kMaxSequence + 1) / 2;
  if (!collective || owner != nullptr || Later(envelope->collective_ordinal, mine.ordinal) || !assigned) {
    (*context.early_envelopes)[{peer, tag.sequence}] = bytes;
    return;
  }
  DropStrayParts(context, peer, tag, *envelope);
}

void OperationTask::FailForStray(TaskContext& context, int peer, transport::OpTag tag, const Envelope& envelope) {
  const Schedule& mine = spec_.schedule;
  DropStrayParts(context, peer, tag, envelope);
  MarkOutOfStep(peer);
  if (absl::Status unplaced = UnplacedMismatch(envelope, peer); !unplaced.ok()) return Fail(unplaced);
  const std::string abandoned =
      envelope.kind == BlockKind::kAbandoned ? absl::StrCat(" (abandoned: ", FailedWith(envelope), ")") : "";
  const std::string my_call = DescribeOperation(mine.kind, mine.count, spec_.dtype, mine.op, mine.root);
  // Calls alike are out of step for an earlier call's disagreement (as PairingMismatch says).
  if (SameCall(envelope, mine, spec_.dtype)) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(
        "peer ", peer, " sent rank ", rank_, " a block of its call at a place this call (", my_call, ") does not have",
        abandoned, ": the ranks disagreed in an earlier call, which left their link out of step")));
  }
  Fail(absl::InvalidArgumentError(absl::StrCat(
      "peer ", peer, " called ",
      DescribeOperation(envelope.operation, envelope.operation_count, envelope.dtype, envelope.op, envelope.root),
      " where rank ", rank_, " called ", my_call, ", and sent rank ", rank_,
      " a block that this call does not receive from it", abandoned)));
}

void OperationTask::DropStrayParts(TaskContext& context, int peer, transport::OpTag tag, const Envelope& envelope) {
  std::vector<PartStream> parts;
  if (envelope.kind == BlockKind::kFrame) parts = {kRawStream, kHeadStream, kCodedStream};
  if (envelope.kind == BlockKind::kPlain) parts = {kRawStream};  // a collective's blocks go one by one
  for (PartStream part : parts) {
    context.lanes->ForRecv(peer).Discard(peer, transport::OpTag{tag.sequence, part});
  }
}

void OperationTask::SendNotices(TaskContext& context) {
  // A call refused by its own checks is refused alike on its peers as a rule, and its places
  // tell the peers that receive from it (abandoned envelopes); a destroyed communicator's peers
  // are told by its transport's end; a peer's notice went to every rank.
  if (notices_sent_ || !spec_.refused.ok() || absl::IsCancelled(status_) || told_by_notice_) return;
  notices_sent_ = true;
  pipeline::SendNotices(*context.lanes,
                        CallNotice(spec_.schedule, spec_.dtype, status_.code(), context.lanes->FirstFailedPeer()),
                        notices_, WakeOnNews(context));
  UCCLZIP_LOG(kDebug) << "rank " << rank_ << ": operation " << number_ << " (" << spec_.schedule.name
                      << ") failed and told every peer: " << status_;
}

}  // namespace ucclzip::pipeline
