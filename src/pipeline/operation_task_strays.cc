// Strays and notices: how a collective learns of a peer's disagreement or failure that reaches it
// through no receive of its own. Ranks that disagree on a call (a broadcast's root, say) send to
// ranks that do not receive from them and wait for ranks that send them nothing; a rank that
// heard from none of the ranks it waited for learnt of nothing until the operation timeout
// (until session 42; docs/COLLECTIVES.md, "Errors").
//
// - A collective's envelopes go on a tag stream of their call's ordinal (WireStream), and all
//   its envelope receives are posted when it begins: a message of that stream still unmatched
//   when the call looks (later, on the same lane, so that every receive had its chance first)
//   is a *stray*, which this call will never take. Its envelope names the peer's call; the task
//   fails naming both, and drops the parts that follow it, so that the sender does not wait for
//   them until op_timeout.
// - A collective that fails after it began sends every peer a *notice*: its own call, as an
//   abandoned envelope, on kNoticeStream, which nothing but these looks takes. A peer that
//   waits for what this rank will never send (a tree's root for the answers of its leaves, one
//   end of a cycle of ranks that each wait for the other) fails at its next look, naming it.
//
// A look happens only once a call has run for kStrayLookAfter, and then every
// kStrayLookInterval: 2 (n - 1) probes of UCX's unexpected queue.
#include "absl/strings/str_cat.h"
#include "logging/logging.h"
#include "pipeline/operation_task.h"

namespace ucclzip::pipeline {

namespace {

bool SameCall(const Envelope& envelope, const Schedule& mine, DataType dtype) {
  return envelope.operation == mine.kind && envelope.operation_count == mine.count && envelope.dtype == dtype &&
         envelope.root == mine.root && (!KindReduces(mine.kind) || envelope.op == mine.op);
}

}  // namespace

bool OperationTask::StrayLooksSettled() const {
  for (const auto& look : stray_looks_) {
    if (!look->request->Test()) return false;
  }
  for (const auto& notice : notices_) {
    if (!notice->request->Test()) return false;
  }
  return true;
}

bool OperationTask::LookForStrays(TaskContext& context) {
  // Advance posted every envelope receive of the task before it first got here.
  if (spec_.schedule.kind == OperationKind::kSendRecv) return false;
  bool moved = false;
  for (auto it = stray_looks_.begin(); it != stray_looks_.end();) {
    if (!(*it)->request->Test()) {
      ++it;
      continue;
    }
    // NotFound: nothing there; any other failure (the peer's) fails the task by its own way.
    if ((*it)->request->Wait(absl::InfinitePast()).ok()) {
      OnStray(context, **it);
      moved = true;
    }
    it = stray_looks_.erase(it);
  }
  if (!status_.ok()) {
    SendNotices(context);
    return moved;
  }
  const absl::Time now = absl::Now();
  if (!stray_looks_.empty() || now < next_stray_look_) return moved;
  next_stray_look_ = now + kStrayLookInterval;
  const uint32_t envelope_stream = WireStream(kEnvelopeStream, spec_.schedule.kind, spec_.schedule.ordinal);
  for (int peer = 0; peer < static_cast<int>(send_order_.size()); ++peer) {
    if (peer == rank_) continue;
    for (const bool notice : {false, true}) {
      auto look = std::make_unique<StrayLook>();
      look->peer = peer;
      look->notice = notice;
      look->request = context.lanes->ForRecv(peer).TakeStray(peer, notice ? kNoticeStream : envelope_stream,
                                                             look->bytes.data(), look->bytes.size(), &look->found,
                                                             context.wake);
      stray_looks_.push_back(std::move(look));
    }
  }
  return moved;  // a look posted is no progress
}

void OperationTask::OnStray(TaskContext& context, const StrayLook& look) {
  const Schedule& mine = spec_.schedule;
  absl::StatusOr<Envelope> envelope = DecodeEnvelope(look.bytes.data());
  if (!envelope.ok()) {
    return Fail(absl::Status(envelope.status().code(),
                             absl::StrCat("peer ", look.peer, " sent a message this call does not receive, and ",
                                          envelope.status().message())));
  }
  if (!look.notice) DropStrayParts(context, look.peer, look.found, *envelope);
  // What an earlier call left (its rank had already finished it, or failed it for the same
  // cause): nothing of this call's.
  if (envelope->collective_ordinal != mine.ordinal) return;
  const std::string theirs = DescribeOperation(envelope->operation, envelope->operation_count, envelope->dtype,
                                               envelope->op, envelope->root);
  const std::string my_call = DescribeOperation(mine.kind, mine.count, spec_.dtype, mine.op, mine.root);
  const bool same = SameCall(*envelope, mine, spec_.dtype);
  const std::string failed_with =
      envelope->kind == BlockKind::kAbandoned
          ? absl::StrCat("its call failed with ", absl::StatusCodeToString(envelope->abandoned_code),
                         envelope->failed_peer >= 0 ? absl::StrCat(", and peer ", envelope->failed_peer, " had failed there")
                                                    : "",
                         "; its own error says why")
          : "";
  if (look.notice) {
    Fail(same ? absl::AbortedError(absl::StrCat("peer ", look.peer, " gave up its call (", failed_with, ")"))
              : absl::InvalidArgumentError(absl::StrCat("peer ", look.peer, " called ", theirs, " where rank ", rank_,
                                                        " called ", my_call, " (", failed_with, ")")));
    return;
  }
  MarkOutOfStep(look.peer);
  if (absl::Status unplaced = UnplacedMismatch(*envelope, look.peer); !unplaced.ok()) return Fail(unplaced);
  const std::string abandoned = failed_with.empty() ? "" : absl::StrCat(" (abandoned: ", failed_with, ")");
  // Calls alike are out of step for an earlier call's disagreement (as PairingMismatch says).
  Fail(same ? absl::FailedPreconditionError(absl::StrCat(
                  "peer ", look.peer, " sent rank ", rank_, " a block of its call at a place this call (", my_call,
                  ") does not have", abandoned,
                  ": the ranks disagreed in an earlier call, which left their link out of step"))
            : absl::InvalidArgumentError(absl::StrCat("peer ", look.peer, " called ", theirs, " where rank ", rank_,
                                                      " called ", my_call, ", and sent rank ", rank_,
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
  // are told by its transport's end.
  if (notices_sent_ || !spec_.refused.ok() || absl::IsCancelled(status_)) return;
  notices_sent_ = true;
  pipeline::SendNotices(*context.lanes,
                        CallNotice(spec_.schedule, spec_.dtype, status_.code(), context.lanes->FirstFailedPeer()),
                        notices_, context.wake);
  UCCLZIP_LOG(kDebug) << "rank " << rank_ << ": operation " << number_ << " (" << spec_.schedule.name
                      << ") failed and told every peer: " << status_;
}

}  // namespace ucclzip::pipeline
