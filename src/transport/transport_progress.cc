// The progress thread: posts what users submitted, drives UCX, moves staged blocks through
// copy / network / copy, enforces deadlines, turns peer failures into op failures, and
// completes requests.
//
// Passes. The thread runs pass after pass while there is work, and a pass costs what changed,
// not what is outstanding (the pipeline may keep hundreds of operations posted: a collective
// posts the receive of every block's envelope at once), because every completion is only
// acted on by a pass:
// - UCX's callbacks list their op in news_ with the block that left UCX (Op::NoteNetworkDone);
//   Advance handles just those blocks.
// - Staged ops are polled every pass while they have copies in flight (a copy's end is seen by
//   polling, with or without wake-ups) or blocks still to start (waiting for a staging block, a
//   receive also for its message to arrive): polled_, in posting order, so that staging blocks
//   go to the ops in the order they were posted.
// - An op that was started, advanced or failed is listed in changed_, and RetireFinished
//   completes those that finished.
// - Deadlines and giving up on failed ops depend on time alone: a sweep over every op each
//   sweep interval (SweepInterval) does them.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "logging/logging.h"
#include "transport/staging_path.h"
#include "transport/transport.h"

namespace ucclzip::transport {
namespace {

// How long the thread spins after its last piece of work before it sleeps on the worker's
// event fd: short waits stay cheap (latency), long ones leave the cores to others. On machines
// with few cores it yields its core between polls (SpinPolicy::progress_yields).
constexpr absl::Duration kSpinBeforeSleep = absl::Microseconds(200);
// How often the bootstrap connections are checked for hang-ups while operations are pending.
constexpr absl::Duration kWatchInterval = absl::Milliseconds(10);
// How long a failed op may wait for UCX to give its blocks back before it is abandoned (where
// that is safe: AbandonStuckOps).
constexpr absl::Duration kAbandonAfter = absl::Seconds(1);
// How often deadlines are checked and failed ops considered for abandoning: a two-hundredth of
// the operation timeout, within these bounds (50 ms under the default 60 s). Abandoning waits
// kAbandonAfter, and a deadline found that much late matters to no one, while the sweep walks
// every op: every 5 ms it took 15 % of the CPU of a group of 10 000 Sends to each of 2 peers
// (benchmarks/RESULTS.md, forty-fourth session), and every pass, until 2026-12-02, more.
constexpr absl::Duration kMinSweepInterval = absl::Milliseconds(5);
constexpr absl::Duration kMaxSweepInterval = absl::Milliseconds(50);
// How often posted receives look for a sender's block tagged otherwise than they expect: a
// probe per block in UCX's hash table of unexpected messages; a size mismatch is a
// disagreement between the two sides' code, never timing, so finding it this late costs little.
constexpr absl::Duration kSizeMismatchSearch = absl::Milliseconds(50);

// A staged op waits for staging blocks (a receive also for its message to arrive) and for its
// copies, which no callback reports: the progress thread polls it.
// Whether a failed transfer means the connection to its peer is broken: not a truncation or a
// size mismatch (InvalidArgument, the peers disagree) nor a cancellation (ours), but what UCX
// reports of the link itself (unreachable, reset, timed out, or its catch-all errors, such as
// a shared memory segment gone with its process).
bool BreaksConnection(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) || absl::IsInternal(status);
}

// Whether the bootstrap connection `fd` has hung up: its peer's process has exited.
bool HungUp(int fd) {
  pollfd entry{fd, POLLRDHUP, 0};
  return fd >= 0 && poll(&entry, 1, 0) > 0 && (entry.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

absl::Status ExitedStatus(int peer) {
  return absl::UnavailableError(
      absl::StrCat("peer ", peer, " failed: its bootstrap connection hung up (the process exited)"));
}

bool NeedsPolling(const Op& op) {
  return op.staged && (op.copies_in_flight > 0 || (op.error.ok() && op.next_block < op.blocks.size()));
}

void OnSendDone(void* request, ucs_status_t status, void* user_data) {
  auto& block = *static_cast<Block*>(user_data);
  block.network_status = UcxStatus(status, absl::StrCat("block ", block.index, " of ", block.op->blocks.size()));
  block.op->NoteNetworkDone(block);
  ucp_request_free(request);
}

absl::Status SizeMismatch(const Block& block, size_t sender_bytes, bool sender_last) {
  return absl::InvalidArgumentError(absl::StrCat(
      "size mismatch: the sender's block ", block.index, " holds ", sender_bytes, " bytes and ",
      sender_last ? "ends" : "does not end", " its message, but ", block.op->bytes, " bytes were expected (",
      block.op->blocks.size(), " blocks)"));
}

bool EndsMessage(const Block& block) { return block.index + 1 == block.op->blocks.size(); }

void OnRecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
  auto& block = *static_cast<Block*>(user_data);
  const size_t count = block.op->blocks.size();
  block.network_status = UcxStatus(status, absl::StrCat("block ", block.index, " of ", count));
  if (status == UCS_OK) {
    bool sender_last = MessageTag::Unpack(info->sender_tag).last;
    block.sender_continues = !sender_last;
    // A probed message (a staged receive's) may end otherwise than expected; a posted receive
    // takes only the `last` it expects.
    if (info->length != block.bytes || sender_last != EndsMessage(block)) {
      block.network_status = SizeMismatch(block, info->length, sender_last);
    }
  } else if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    block.sender_continues = !MessageTag::Unpack(info->sender_tag).last;
    block.network_status = absl::InvalidArgumentError(
        absl::StrCat("size mismatch: the sender's message is longer than the ", block.op->bytes, " bytes expected"));
  }
  block.op->NoteNetworkDone(block);
  ucp_request_free(request);
}

}  // namespace

void Transport::StartDrain(int peer, OpTag tag, uint32_t first_block) {
  UCCLZIP_LOG(kDebug) << "rank " << rank_ << ": dropping peer " << peer << "'s message (sequence " << tag.sequence
                      << ", stream " << tag.stream << ") from block " << first_block << ", which no receive takes";
  auto drain = std::make_unique<Drain>();
  drain->peer = peer;
  drain->tag = tag;
  drain->next_block = first_block;
  drain->deadline = absl::Now() + options_.op_timeout;
  drains_.push_back(std::move(drain));
}

bool Transport::AdvanceDrains(absl::Time now) {
  bool progressed = false;
  for (auto it = drains_.begin(); it != drains_.end();) {
    Drain& drain = **it;
    if (drain.receiving) {
      ++it;
      continue;
    }
    if (drain.landed) {
      progressed = true;
      drain.landed = false;
      drain.scratch.reset();
      if (drain.last) {
        it = drains_.erase(it);
        continue;
      }
      ++drain.next_block;
      drain.deadline = now + options_.op_timeout;
    }
    // The sender gave up (its own deadline), or its link failed: nothing more will come.
    if (drain.failed || now > drain.deadline || !peers_[drain.peer].failure.ok() || drain.next_block >= kMaxBlocks) {
      it = drains_.erase(it);
      continue;
    }
    ucp_tag_recv_info_t info{};
    const uint64_t tag = MessageTag{communicator_id_, static_cast<uint32_t>(drain.peer), drain.tag, false, drain.next_block}.Pack();
    ucp_tag_message_h message = ucp_tag_probe_nb(context_->worker(), tag, kMatchMask, /*remove=*/1, &info);
    if (message == nullptr) {
      ++it;
      continue;
    }
    progressed = true;
    drain.last = MessageTag::Unpack(info.sender_tag).last;
    drain.scratch.reset(new uint8_t[std::max<size_t>(info.length, 1)]);
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
    param.user_data = &drain;
    param.cb.recv = [](void* request, ucs_status_t status, const ucp_tag_recv_info_t*, void* user_data) {
      auto* done = static_cast<Drain*>(user_data);
      done->receiving = false;
      (status == UCS_OK ? done->landed : done->failed) = true;
      ucp_request_free(request);
    };
    drain.receiving = true;
    ucs_status_ptr_t request =
        ucp_tag_msg_recv_nbx(context_->worker(), drain.scratch.get(), info.length, message, &param);
    if (request == nullptr) {  // completed at once, without the callback
      drain.receiving = false;
      drain.landed = true;
    } else if (UCS_PTR_IS_ERR(request)) {
      drain.receiving = false;
      drain.failed = true;
    }
    // Taken (or dropped) in the next pass.
  }
  return progressed;
}

uint64_t Transport::TagOf(const Op& op, uint32_t block, bool last) const {
  uint32_t sender = op.kind == OpKind::kSend ? rank_ : op.peer;
  return MessageTag{communicator_id_, sender, op.tag, last, block}.Pack();
}

void Transport::ProgressLoop() {
  last_work_ = absl::Now();
  while (true) {
    bool stop = false;
    bool work = TakeSubmissions(&stop);
    if (stop) break;
    work |= ucp_worker_progress(context_->worker()) != 0;
    if (any_endpoint_error_) HandleEndpointErrors();
    work |= AdvanceChanged();
    if (!broken_peers_.empty()) FailBrokenPeers();
    const absl::Time now = absl::Now();
    if (!drains_.empty()) work |= AdvanceDrains(now);
    SweepIfDue(now);
    WatchBootstrapConnections(now);
    work |= RetireFinished();
    if (!closing_.empty()) PollClosingEndpoints();
    // Callbacks that ran after AdvanceChanged (the cancels and forced closes of a failure) left
    // news for the next pass, which must not wait for an event first.
    work |= !news_.empty();
    // Work right after a sleep that ran to its timeout: UCX had an event that its fd did not
    // signal, and whatever waited for it waited for the timeout.
    missed_wakeups_ += work && slept_to_timeout_;
    slept_to_timeout_ = false;
    if (work) {
      last_work_ = now;
    } else if (now - last_work_ > kSpinBeforeSleep) {
      WaitForEvents();
    } else if (spin_.progress_yields) {
      std::this_thread::yield();
    }
  }
  DrainForShutdown();
}

bool Transport::TakeSubmissions(bool* stop) {
  if (!submissions_pending_.load(std::memory_order_acquire)) return false;
  std::vector<std::unique_ptr<Op>> fresh;
  std::vector<std::pair<int, absl::Status>> reported;
  std::vector<std::shared_ptr<Request>> give_ups;
  std::vector<std::pair<int, OpTag>> discards;
  bool abort = false;
  absl::Status why;
  {
    absl::MutexLock lock(&mutex_);
    submissions_pending_.store(false, std::memory_order_relaxed);
    fresh.swap(submitted_);
    reported.swap(reported_failures_);
    give_ups.swap(give_ups_);
    discards.swap(discards_);
    *stop = stopping_;
    abort = abort_pending_;
    abort_pending_ = false;
    why = aborted_;
  }
  if (abort) {
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) FailPeer(r, absl::Status(why.code(), absl::StrCat("communicator aborted: ", why.message())));
    }
  }
  for (const auto& [peer, failure] : reported) FailPeer(peer, failure);
  for (auto& op : fresh) {
    active_.push_back(std::move(op));
    Op& started = *active_.back();
    started.position = std::prev(active_.end());
    started.news = &news_;
    Start(started);
  }
  const absl::Time now = absl::Now();
  for (const std::shared_ptr<Request>& request : give_ups) {
    for (auto& op : active_) {
      if (op->request != request || op->kind != OpKind::kRecv || op->finished()) continue;
      op->given_up = true;
      op->deadline = now + options_.op_timeout;
    }
  }
  for (const auto& [peer, tag] : discards) StartDrain(peer, tag, 0);
  return abort || !reported.empty() || !fresh.empty() || !give_ups.empty() || !discards.empty();
}

void Transport::Start(Op& op) {
  op.deadline = absl::Now() + options_.op_timeout;
  if (const absl::Status& failure = peers_[op.peer].failure; !failure.ok()) {
    op.Fail(failure);
  } else if (op.stray_found != nullptr) {
    StartStrayTake(op);
  } else if (op.staged) {
    if (absl::StatusOr<StagingPath*> path = StagingFor(op); !path.ok()) op.Fail(path.status());
    // Advance starts the blocks as staging blocks free up.
  } else {
    bool host = op.memory.type == MemoryType::kHost;
    for (Block& block : op.blocks) {
      PostNetwork(block, op.data == nullptr ? nullptr : op.data + block.offset, block.bytes, host);
      if (!op.error.ok()) break;
    }
  }
  MarkChanged(op);  // a failed op has finished, a staged one is polled
}

void Transport::StartStrayTake(Op& op) {
  if (op.blocks.size() != 1) {
    op.Fail(absl::InvalidArgumentError(absl::StrCat("a stray is taken whole, and ", op.bytes,
                                                    " bytes are more than one transport block of ",
                                                    *options_.block_bytes)));
    return;
  }
  // The first block of the first unexpected message on the stream, of any sequence (of the one
  // sequence a window of 1 allows, so that others before it hide nothing); its sequence
  // decides, then that very tag is taken.
  constexpr uint64_t kAnySequence = kMatchMask & ~(uint64_t{kMaxSequence} << 24);
  const bool one_sequence = op.stray.window == 1;
  const OpTag wanted{one_sequence ? (op.stray.end - 1) & kMaxSequence : 0, op.tag.stream};
  ucp_tag_recv_info_t info{};
  const uint64_t pattern = MessageTag{communicator_id_, static_cast<uint32_t>(op.peer), wanted, false, 0}.Pack();
  if (ucp_tag_probe_nb(context_->worker(), pattern, one_sequence ? kMatchMask : kAnySequence, /*remove=*/0, &info) ==
      nullptr) {
    op.Fail(absl::NotFoundError("no stray message"));
    return;
  }
  const OpTag first = MessageTag::Unpack(info.sender_tag).op;
  const bool outside = op.stray.window > 0 && ((op.stray.end - first.sequence - 1) & kMaxSequence) >= op.stray.window;
  const bool awaited = std::any_of(active_.begin(), active_.end(), [&](const std::unique_ptr<Op>& other) {
    return other.get() != &op && other->kind == OpKind::kRecv && other->stray_found == nullptr && other->peer == op.peer &&
           other->tag.sequence == first.sequence && other->tag.stream == first.stream && !other->finished();
  });
  ucp_tag_message_h message =
      outside || awaited
          ? nullptr
          : ucp_tag_probe_nb(context_->worker(), MessageTag{communicator_id_, static_cast<uint32_t>(op.peer), first, false, 0}.Pack(),
                             kMatchMask, /*remove=*/1, &info);
  if (message == nullptr) {
    op.Fail(absl::NotFoundError(absl::StrCat("no stray message (the first, sequence ", first.sequence,
                                             outside ? ", lies outside the query" : ", is awaited", ")")));
    return;
  }
  *op.stray_found = first;
  op.tag = first;  // so that the op describes the message it received
  PostNetwork(op.blocks[0], op.data, op.bytes, /*host_buffer=*/true, message);
}

absl::StatusOr<StagingPath*> Transport::StagingFor(const Op& op) {
  return StagingPathFor(op.memory.type, op.memory.device);
}

absl::StatusOr<StagingPath*> Transport::StagingPathFor(MemoryType type, int device) {
  absl::MutexLock lock(&staging_mutex_);
  std::unique_ptr<StagingPath>& path = type == MemoryType::kHost ? host_staging_ : device_staging_;
  if (path != nullptr) {
    if (path->device() != device) {
      return absl::InvalidArgumentError(absl::StrCat("device ", device, " memory, but this communicator stages for device ",
                                                     path->device(), "; use one device per communicator"));
    }
    return path.get();
  }
  // A pool smaller than one block per direction is sized up to that: host memory is never
  // staged, so the option only matters here, where the larger size is what works.
  const size_t pool_bytes = std::max(options_.staging_pool_bytes, 2 * *options_.block_bytes);
  const size_t blocks = StagingPath::BlocksPerDirection(*options_.block_bytes, pool_bytes);
  const size_t send_blocks = blocks + StagingPath::ReservedBlocks(size_, blocks);
  // Without wake-ups the progress thread polls the copies, and signals would only pile up.
  const int copy_done_fd = options_.staging_copy_wakeups ? wake_fd_ : -1;
  std::unique_ptr<StagingEngine> engine;
  if (type == MemoryType::kHost) {
    engine = options_.host_staging_engine ? options_.host_staging_engine(copy_done_fd) : MakeHostStagingEngine(copy_done_fd);
  } else {
    absl::StatusOr<std::unique_ptr<StagingEngine>> cuda = MakeCudaStagingEngine(device, send_blocks + blocks, copy_done_fd);
    if (!cuda.ok()) return cuda.status();
    engine = std::move(*cuda);
  }
  absl::StatusOr<std::unique_ptr<StagingPath>> created =
      StagingPath::Create(std::move(engine), *options_.block_bytes, pool_bytes, size_, device);
  if (!created.ok()) return created.status();
  path = std::move(*created);
  UCCLZIP_LOG(kDebug) << "rank " << rank_ << ": staging " << MemoryTypeName(type) << " memory"
                      << (type == MemoryType::kDevice ? absl::StrCat(" of device ", device) : "") << " through "
                      << (send_blocks + blocks) * *options_.block_bytes << " B of pinned host memory (" << send_blocks
                      << " blocks of " << *options_.block_bytes << " B to send, " << StagingPath::ReservedBlocks(size_, blocks)
                      << " of them kept for peers holding none, and " << blocks << " to receive)";
  return path.get();
}

void Transport::PostNetwork(Block& block, uint8_t* buffer, size_t capacity, bool host_buffer, ucp_tag_message_h probed) {
  static uint8_t empty_message;  // UCX wants an address even for 0 bytes
  Op& op = *block.op;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  if (host_buffer) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
  }
  param.user_data = &block;
  void* address = buffer != nullptr ? buffer : &empty_message;
  // UCX may run the callback before the call returns (NO_IMM_CMPL completes inline), so the
  // block is marked in flight first and the request kept only if it is still pending.
  block.stage = BlockStage::kNetwork;
  ucs_status_ptr_t request;
  if (op.kind == OpKind::kSend) {
    auto endpoint = static_cast<ucp_ep_h>(peers_[op.peer].endpoint);
    if (endpoint == nullptr) {
      block.stage = BlockStage::kWaiting;
      op.Fail(absl::UnavailableError(absl::StrCat("the endpoint to peer ", op.peer, " is closed")));
      return;
    }
    param.cb.send = OnSendDone;
    request = ucp_tag_send_nbx(endpoint, address, block.bytes, TagOf(op, block.index, EndsMessage(block)), &param);
  } else {
    param.cb.recv = OnRecvDone;
    request = probed != nullptr
                  ? ucp_tag_msg_recv_nbx(context_->worker(), address, capacity, probed, &param)
                  : ucp_tag_recv_nbx(context_->worker(), address, capacity, TagOf(op, block.index, EndsMessage(block)),
                                     kWholeTag, &param);
  }
  if (UCS_PTR_IS_ERR(request)) {
    block.stage = BlockStage::kWaiting;
    op.Fail(UcxStatus(UCS_PTR_STATUS(request), absl::StrCat("posting block ", block.index)));
    return;
  }
  if (block.stage == BlockStage::kNetwork) block.ucx_request = request;
}

bool Transport::AdvanceChanged() {
  bool progressed = false;
  // Advance may list news of its own (a cancel's callback can run at once): taken here too. A
  // polled op is advanced below, in its turn for staging blocks.
  for (size_t i = 0; i < news_.size(); ++i) {
    Op& op = *news_[i];
    op.listed_in_news = false;
    if (!op.polled) progressed |= Advance(op);
  }
  news_.clear();
  // Advance lists no op here but the one it advances, which is listed already.
  size_t kept = 0;
  for (Op* op : polled_) {
    progressed |= Advance(*op);
    if (NeedsPolling(*op)) {
      polled_[kept++] = op;
    } else {
      op->polled = false;
    }
  }
  polled_.resize(kept);
  return progressed;
}

void Transport::MarkChanged(Op& op) {
  if (!op.changed) {
    op.changed = true;
    changed_.push_back(&op);
  }
  if (!op.polled && NeedsPolling(op)) {
    op.polled = true;
    polled_.push_back(&op);
  }
}

bool Transport::Advance(Op& op) {
  bool progressed = false;
  StagingPath* path = nullptr;
  if (op.staged) {
    path = (op.memory.type == MemoryType::kHost ? host_staging_ : device_staging_).get();
    if (path != nullptr) {
      progressed |= op.kind == OpKind::kSend ? AdvanceStagedSend(op, *path) : AdvanceStagedRecv(op, *path);
    }
  }
  // The blocks that UCX finished, as its callbacks listed them; a failed block's CancelReceives
  // may finish more of them at once, which this loop takes too.
  for (size_t i = 0; i < op.blocks_with_news.size(); ++i) {
    Block& block = op.blocks[op.blocks_with_news[i]];
    if (block.stage != BlockStage::kNetworkDone) continue;
    progressed = true;
    if (!block.network_status.ok()) {
      // A transfer to a process that is exiting fails by whatever UCX met first (over shared
      // memory its segment is gone, "Shared memory error", while its sockets may still be open):
      // the peer has failed, and the op fails as every other op with it will (once this pass
      // has advanced its ops: FailBrokenPeers), by its exit where that already shows.
      absl::Status why = block.network_status;
      if (BreaksConnection(why)) {
        Peer& peer = peers_[op.peer];
        peer.gone |= HungUp(peer.bootstrap_fd);
        why = peer.gone ? ExitedStatus(op.peer)
                        : absl::UnavailableError(
                              absl::StrCat("peer ", op.peer, " failed: UCX failed a transfer with it (", why.message(), ")"));
        broken_peers_.emplace_back(op.peer, why);
      }
      op.Fail(why);
      CancelReceives(op);  // the other blocks of a failed receive would otherwise wait for the deadline
      if (op.kind == OpKind::kRecv && absl::IsInvalidArgument(block.network_status) && block.sender_continues) {
        StartDrain(op.peer, op.tag, block.index + 1);
      }
    }
    if (op.kind == OpKind::kRecv && op.staged && op.error.ok()) {
      absl::StatusOr<uint32_t> ticket = path->engine().Start(op.data + block.offset, block.staging, block.bytes,
                                                            CopyDirection::kFromStaging);
      if (ticket.ok()) {
        block.copy_ticket = *ticket;
        block.stage = BlockStage::kCopyOut;
        ++op.copies_in_flight;
        ++copies_in_flight_;
        TraceStagedBlock(op, block, "received into staging, copying out");
        continue;
      }
      op.Fail(ticket.status());
    }
    StagingPool* pool = path == nullptr ? nullptr : op.kind == OpKind::kSend ? &path->send_pool() : &path->recv_pool();
    if (op.staged && op.kind == OpKind::kSend) TraceStagedBlock(op, block, "sent");
    RetireBlock(op, block, pool, /*delivered=*/true);
  }
  op.blocks_with_news.clear();
  MarkChanged(op);
  return progressed;
}

bool Transport::CopyFinished(Op& op, StagingPath& path, Block& block) {
  absl::StatusOr<bool> done = path.engine().Poll(block.copy_ticket);
  if (done.ok() && !*done) return false;
  --op.copies_in_flight;
  --copies_in_flight_;
  if (!done.ok()) op.Fail(done.status());
  return true;
}

void Transport::RetireBlock(Op& op, Block& block, StagingPool* pool, bool delivered) {
  if (block.staging != nullptr) pool->Release(block.staging, op.peer);
  block.staging = nullptr;
  block.stage = BlockStage::kDone;
  if (delivered && op.error.ok()) {
    (op.kind == OpKind::kSend ? bytes_sent_ : bytes_received_).fetch_add(block.bytes, std::memory_order_relaxed);
    ++op.blocks_done;
    op.deadline = absl::Now() + options_.op_timeout;
  }
}

bool Transport::AdvanceStagedSend(Op& op, StagingPath& path) {
  bool progressed = false;
  for (uint32_t i = 0; i < op.next_block; ++i) {
    Block& block = op.blocks[i];
    if (block.stage != BlockStage::kCopyIn || !CopyFinished(op, path, block)) continue;
    progressed = true;
    if (op.error.ok()) {
      TraceStagedBlock(op, block, "copied into staging, sending");
      PostNetwork(block, block.staging, block.bytes, /*host_buffer=*/true);
      if (block.stage != BlockStage::kWaiting) continue;  // posted (perhaps already complete)
    }
    RetireBlock(op, block, &path.send_pool(), /*delivered=*/false);
  }
  while (op.error.ok() && op.next_block < op.blocks.size()) {
    uint8_t* staging = path.send_pool().Acquire(op.peer);
    if (staging == nullptr) break;
    Block& block = op.blocks[op.next_block++];
    absl::StatusOr<uint32_t> ticket =
        path.engine().Start(staging, op.data + block.offset, block.bytes, CopyDirection::kToStaging);
    if (!ticket.ok()) {
      path.send_pool().Release(staging, op.peer);
      op.Fail(ticket.status());
      break;
    }
    block.staging = staging;
    block.copy_ticket = *ticket;
    block.stage = BlockStage::kCopyIn;
    ++op.copies_in_flight;
    ++copies_in_flight_;
    TraceStagedBlock(op, block, "copying into staging");
    progressed = true;
  }
  return progressed;
}

void Transport::TraceStagedBlock(const Op& op, const Block& block, const char* what) const {
  UCCLZIP_LOG(kDebug) << "rank " << rank_ << ": staged " << (op.kind == OpKind::kSend ? "send to" : "receive from")
                      << " peer " << op.peer << " (sequence " << op.tag.sequence << ", stream " << op.tag.stream
                      << ", block " << (&block - op.blocks.data()) << " of " << op.blocks.size() << ", " << block.bytes
                      << " B): " << what;
}

bool Transport::AdvanceStagedRecv(Op& op, StagingPath& path) {
  bool progressed = false;
  for (uint32_t i = 0; i < op.next_block; ++i) {
    Block& block = op.blocks[i];
    if (block.stage != BlockStage::kCopyOut || !CopyFinished(op, path, block)) continue;
    progressed = true;
    TraceStagedBlock(op, block, "copied out");
    RetireBlock(op, block, &path.recv_pool(), /*delivered=*/true);
  }
  // A staging block is taken only for a message that has arrived (probe), so receives never hold
  // staging memory while they wait for senders: a bounded pool cannot deadlock.
  while (op.error.ok() && op.next_block < op.blocks.size()) {
    uint8_t* staging = path.recv_pool().Acquire(op.peer);
    if (staging == nullptr) break;
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = ucp_tag_probe_nb(context_->worker(), TagOf(op, op.next_block, false), kMatchMask,
                                                 /*remove=*/1, &info);
    if (message == nullptr) {
      path.recv_pool().Release(staging, op.peer);
      break;
    }
    Block& block = op.blocks[op.next_block++];
    block.staging = staging;
    TraceStagedBlock(op, block, "arrived (probed), receiving into staging");
    PostNetwork(block, staging, path.recv_pool().block_bytes(), /*host_buffer=*/true, message);
    progressed = true;
    if (block.stage == BlockStage::kWaiting) {  // the post failed
      path.recv_pool().Release(staging, op.peer);
      block.staging = nullptr;
    }
  }
  return progressed;
}

absl::Duration Transport::SweepInterval() const {
  return std::clamp(options_.op_timeout / 200, kMinSweepInterval, kMaxSweepInterval);
}

void Transport::SweepIfDue(absl::Time now) {
  if (now - last_sweep_ < SweepInterval()) return;
  last_sweep_ = now;
  CheckDeadlines(now);
  AbandonStuckOps(now);
  if (now - last_size_mismatch_search_ >= kSizeMismatchSearch) {
    last_size_mismatch_search_ = now;
    FindSizeMismatches();
  }
}

void Transport::FindSizeMismatches() {
  for (auto& op : active_) {
    if (op->kind != OpKind::kRecv || op->staged || !op->error.ok()) continue;
    for (Block& block : op->blocks) {
      if (block.stage != BlockStage::kNetwork) continue;
      ucp_tag_recv_info_t info{};
      const bool sender_last = !EndsMessage(block);
      if (ucp_tag_probe_nb(context_->worker(), TagOf(*op, block.index, sender_last), kWholeTag, /*remove=*/0, &info) ==
          nullptr) {
        continue;
      }
      // As a posted receive that took the block would fail (OnRecvDone, AdvanceChanged): the
      // sender's blocks from this one on are dropped, so that it completes.
      op->Fail(SizeMismatch(block, info.length, sender_last));
      CancelReceives(*op);
      StartDrain(op->peer, op->tag, block.index);
      MarkChanged(*op);
      break;
    }
  }
}

void Transport::CheckDeadlines(absl::Time now) {
  for (auto& op : active_) {
    if (op->given_up && op->error.ok() && now > op->deadline && !op->finished()) {
      // Failed first, so that nothing counts it against the peer while UCX completes the
      // cancels (a block it has already matched runs to its end).
      op->Fail(absl::CancelledError("given up by its caller, and nothing came within the operation timeout"));
      CancelReceives(*op);
      MarkChanged(*op);
      continue;
    }
    if (op->error.ok() && now > op->deadline && !op->finished()) {
      FailPeer(op->peer, absl::DeadlineExceededError(absl::StrCat(
                             "peer ", op->peer, " failed: an operation with it made no progress for ",
                             absl::FormatDuration(options_.op_timeout), " (the operation timeout)")));
    }
  }
}

void Transport::AbandonStuckOps(absl::Time now) {
  const absl::Time abandon_failed_before = now - kAbandonAfter;
  // A failed op whose blocks UCX keeps is given up on after a while: a send (UCX may never
  // give the blocks back; it sends nothing on its own on a force-closed endpoint, but serves a
  // live peer that takes the message later, reading the caller's buffer: so that buffer stays
  // in use until the communicator is destroyed, docs/TRANSPORT.md "Faults"), or a receive
  // from a peer that is gone. A receive from a live peer is not: UCX's TCP writes rendezvous
  // data that arrives after a cancel or a forced close (openucx/ucx#11929), so its buffer stays
  // UCX's until the data has landed, the peer is gone, or the worker is destroyed.
  for (auto it = active_.begin(); it != active_.end();) {
    Op& op = **it++;  // Retire erases the op's own position only
    // Not while a staging copy runs: its block goes back to the pool with the op (Retire).
    if (op.failed_at < abandon_failed_before && (op.kind == OpKind::kSend || peers_[op.peer].gone) &&
        op.copies_in_flight == 0 && !op.finished()) {
      Retire(op, /*abandon=*/true);
    }
  }
  // An abandoned staged send to a healthy peer kept the blocks UCX still had (the peer may yet
  // take them): each goes back to its pool once UCX is done with it. Kept for good, they left
  // the pool short after every such failure, until a staged send waited for a block that never
  // came and the timeout failed a healthy peer (found by review in session 38).
  for (const std::unique_ptr<Op>& op : abandoned_) {
    if (!op->staged) continue;
    StagingPath* path = (op->memory.type == MemoryType::kHost ? host_staging_ : device_staging_).get();
    if (path == nullptr) continue;
    for (Block& block : op->blocks) {
      if (block.staging == nullptr || block.stage != BlockStage::kNetworkDone) continue;
      (op->kind == OpKind::kSend ? path->send_pool() : path->recv_pool()).Release(block.staging, op->peer);
      block.staging = nullptr;
    }
  }
}

void Transport::HandleEndpointErrors() {
  any_endpoint_error_ = false;
  for (Peer& peer : peers_) {
    if (peer.endpoint_error == UCS_OK) continue;
    ucs_status_t status = peer.endpoint_error;
    peer.endpoint_error = UCS_OK;
    peer.gone = true;
    FailPeer(peer.rank, UcxStatus(status, absl::StrCat("peer ", peer.rank, " failed: UCX reports its connection broken")));
  }
}

void Transport::WatchBootstrapConnections(absl::Time now) {
  if ((active_.empty() && !watch_peers_.load(std::memory_order_relaxed)) || now - last_watch_ < kWatchInterval) {
    return;
  }
  last_watch_ = now;
  std::vector<pollfd> fds;
  for (const Peer& peer : peers_) {
    if (peer.bootstrap_fd >= 0 && !peer.gone) fds.push_back({peer.bootstrap_fd, POLLRDHUP, 0});
  }
  if (poll(fds.data(), fds.size(), 0) <= 0) return;
  for (const pollfd& entry : fds) {
    if (!(entry.revents & (POLLRDHUP | POLLHUP | POLLERR))) continue;
    for (Peer& peer : peers_) {
      if (peer.bootstrap_fd != entry.fd) continue;
      peer.gone = true;
      FailPeer(peer.rank, ExitedStatus(peer.rank));
    }
  }
}

void Transport::FailBrokenPeers() {
  std::vector<std::pair<int, absl::Status>> broken;
  broken.swap(broken_peers_);
  for (const auto& [peer, why] : broken) FailPeer(peer, why);
}

void Transport::FailPeer(int rank, const absl::Status& why) {
  Peer& peer = peers_[rank];
  if (peer.failure.ok()) {
    // A shutdown cancels what is left with every peer: no failure to report.
    if (absl::IsCancelled(why)) {
      UCCLZIP_LOG(kDebug) << "rank " << rank_ << ": shutting down, closing the connection to peer " << rank;
    } else {
      UCCLZIP_LOG(kWarning) << "rank " << rank_ << ": " << why;
    }
    peer.failure = why;
    CloseEndpoint(peer, /*force=*/true);  // UCX then fails the sends to it
    PeerFailureListener listener;
    {
      absl::MutexLock lock(&mutex_);
      if (first_peer_failure_.ok()) first_peer_failure_ = why, first_failed_peer_ = rank;
      any_peer_failed_.store(true, std::memory_order_release);
      if (!absl::IsCancelled(why)) listener = peer_failure_listener_;
    }
    if (listener) listener(rank, why);
  }
  for (auto& op : active_) {
    if (op->peer != rank || op->finished()) continue;
    op->Fail(peer.failure);
    CancelReceives(*op);  // receives are not tied to an endpoint; closing it does not end them
    MarkChanged(*op);
  }
}

void Transport::CancelReceives(Op& op) {
  if (op.kind != OpKind::kRecv) return;
  for (Block& block : op.blocks) {
    if (block.stage == BlockStage::kNetwork && block.ucx_request != nullptr) {
      ucp_request_cancel(context_->worker(), block.ucx_request);
    }
  }
}

void Transport::CloseEndpoint(Peer& peer, bool force) {
  if (peer.endpoint == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t request = ucp_ep_close_nbx(static_cast<ucp_ep_h>(peer.endpoint), &param);
  peer.endpoint = nullptr;
  if (UCS_PTR_IS_PTR(request)) closing_.push_back(request);
}

void Transport::PollClosingEndpoints() {
  std::erase_if(closing_, [](void* request) {
    if (ucp_request_check_status(request) == UCS_INPROGRESS) return false;
    ucp_request_free(request);
    return true;
  });
}

bool Transport::RetireFinished() {
  bool retired = false;
  for (Op* op : changed_) {
    op->changed = false;  // so that Retire leaves changed_ alone
    if (!op->finished()) continue;
    Retire(*op, /*abandon=*/false);
    retired = true;
  }
  changed_.clear();
  return retired;
}

void Transport::Retire(Op& op, bool abandon) {
  // Off every list first: an abandoned op lives on, and no list may hand it to Advance again.
  if (op.listed_in_news) std::erase(news_, &op);
  if (op.polled) std::erase(polled_, &op);
  if (op.changed) std::erase(changed_, &op);
  op.listed_in_news = op.polled = op.changed = false;
  op.news = nullptr;
  // An abandoned staged op gives its staging blocks back, as it gives the caller its buffer:
  // UCX will neither read them (its endpoint is force-closed) nor write them (its peer is
  // gone). Kept, they would leave the pool short for good, and a later staged op with a
  // healthy peer would wait for a block that never comes until the timeout failed that peer.
  if (abandon && op.staged && (op.kind == OpKind::kRecv || !peers_[op.peer].failure.ok())) {
    StagingPath* path = (op.memory.type == MemoryType::kHost ? host_staging_ : device_staging_).get();
    for (Block& block : op.blocks) {
      if (block.staging == nullptr || block.stage != BlockStage::kNetwork || path == nullptr) continue;
      (op.kind == OpKind::kSend ? path->send_pool() : path->recv_pool()).Release(block.staging, op.peer);
      block.staging = nullptr;
    }
  }
  std::unique_ptr<Op> owned = std::move(*op.position);
  active_.erase(op.position);
  owned->request->Complete(owned->error);
  if (abandon) abandoned_.push_back(std::move(owned));
}

void Transport::WaitForEvents() {
  // Without staging_copy_wakeups nothing signals wake_fd_ when a copy finishes: keep polling
  // the copies, politely. With it every finished copy does, so the thread sleeps as otherwise.
  if (copies_in_flight_ > 0 && !options_.staging_copy_wakeups) {
    std::this_thread::yield();
    return;
  }
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {context_->event_fd(), POLLIN, 0}};
  int count = 1;
  if (context_->event_fd() >= 0) {
    ucs_status_t armed = ucp_worker_arm(context_->worker());
    if (armed == UCS_ERR_BUSY) return;  // events arrived meanwhile
    if (armed == UCS_OK) count = 2;
  }
  // While operations are pending the thread wakes at least every millisecond, for the sweep
  // (every SweepInterval) and to poll the copies, should a wake-up ever go missing.
  // A drain waits for its next block by probing (a block in UCX wakes the worker's fd itself).
  const bool pending = !active_.empty() || !closing_.empty() ||
                       std::any_of(drains_.begin(), drains_.end(), [](const auto& drain) { return !drain->receiving; });
  const int ready = poll(fds, count, pending ? 1 : 100);
  if (ready > 0 && (fds[0].revents & POLLIN)) {
    uint64_t wakeups = 0;
    [[maybe_unused]] ssize_t got = read(wake_fd_, &wakeups, sizeof(wakeups));
  }
  pending_sleeps_ += pending;
  slept_to_timeout_ = pending && ready == 0;
  last_work_ = absl::Now();
}

void Transport::DrainForShutdown() {
  const absl::Time deadline = absl::Now() + options_.shutdown_timeout;
  bool stop = false;
  TakeSubmissions(&stop);
  for (Peer& peer : peers_) {
    if (peer.rank != rank_) {
      FailPeer(peer.rank, absl::CancelledError("the communicator was shut down with the operation pending"));
    }
  }
  while ((!active_.empty() || !closing_.empty()) && absl::Now() < deadline) {
    ucp_worker_progress(context_->worker());
    AdvanceChanged();
    SweepIfDue(absl::Now());
    RetireFinished();
    PollClosingEndpoints();
  }
  DropUnmatched(deadline);
}

void Transport::DropUnmatched(absl::Time deadline) {
  std::vector<uint8_t> scratch;
  ucp_tag_recv_info_t info{};
  while (absl::Now() < deadline) {
    ucp_tag_message_h message = ucp_tag_probe_nb(context_->worker(), 0, 0, /*remove=*/1, &info);
    if (message == nullptr) return;
    scratch.resize(std::max<size_t>(info.length, 1));
    // On the heap: a receive still running at the deadline (a sender that left before it was
    // delivered) keeps it, and UCX may complete it at the worker's end.
    auto* done = new bool(false);
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
    param.user_data = done;
    param.cb.recv = [](void* request, ucs_status_t, const ucp_tag_recv_info_t*, void* user_data) {
      *static_cast<bool*>(user_data) = true;
      ucp_request_free(request);
    };
    ucs_status_ptr_t request = ucp_tag_msg_recv_nbx(context_->worker(), scratch.data(), info.length, message, &param);
    if (request == nullptr || UCS_PTR_IS_ERR(request)) {
      delete done;
      continue;
    }
    while (!*done && absl::Now() < deadline) ucp_worker_progress(context_->worker());
    if (!*done) {
      // Left to UCX's request, which may still write: the flag and the buffer are not freed.
      new std::vector<uint8_t>(std::move(scratch));
      return;
    }
    delete done;
  }
}

}  // namespace ucclzip::transport
