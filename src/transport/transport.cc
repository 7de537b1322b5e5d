// Transport: creation (address exchange, endpoints), posting, abort and shutdown. The progress
// thread's side is in transport_progress.cc.
#include "transport/transport.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "logging/logging.h"
#include "transport/direct_allocations.h"
#include "transport/event_fd.h"
#include "transport/staging_path.h"
#include "transport/status_context.h"
#include "transport/wire_bytes.h"

namespace ucclzip::transport {
namespace {

absl::Status CheckOptions(const TransportOptions& options, int rank, int size) {
  auto context = absl::StrCat("rank ", rank, ": transport options");
  if (size > kMaxRanks) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": world size ", size, " exceeds ", kMaxRanks));
  }
  if (options.block_bytes && (*options.block_bytes == 0 || *options.block_bytes > kMaxBlockBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": block_bytes is ", *options.block_bytes, ", not in 1 to ", kMaxBlockBytes));
  }
  // Named with its value: "timeouts must be positive" left the caller to guess which of two.
  if (options.op_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": op_timeout is ", absl::FormatDuration(options.op_timeout),
                                                   "; it must be positive"));
  }
  if (options.shutdown_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": shutdown_timeout is ",
                                                   absl::FormatDuration(options.shutdown_timeout),
                                                   "; it must not be negative"));
  }
  return absl::OkStatus();
}

// UCX peer error handling is used only where it costs nothing, which leaves out the transports
// of a single node:
// - Shared memory (UCX 1.13 to 1.22): UCX cannot handle peer failures there, so asking for it
//   drops those transports (intra-node traffic then goes over TCP) or, with shared memory
//   alone, makes every endpoint unreachable.
// - TCP: UCX then wants rendezvous lanes that can invalidate remote access, which its TCP
//   cannot (openucx/ucx#11929), so rendezvous data goes as active messages instead of TCP's
//   zero-copy put: 16 MB one-way lost 28 % of its bandwidth with UCX 1.13 and 77 % with UCX
//   1.22, whose protocols copy it through 8 KB bounce buffers (docs/TRANSPORT.md).
// So it is on only when the transports are named and none is one of these (e.g. rc, ud);
// otherwise dead peers are found by the bootstrap connections hanging up, and stalled ones by
// the deadlines.
bool WantsPeerErrorHandling(const std::string& configured) {
  const char* env = std::getenv("UCX_TLS");
  std::string tls = !configured.empty() ? configured : env != nullptr ? env : "";
  if (tls.empty() || tls[0] == '^') return false;  // UCX's choice, or "all but": shared memory or TCP may be in
  for (absl::string_view name : absl::StrSplit(tls, ',')) {
    // "mm" is UCX's older alias of posix, sysv and xpmem: missed, UCX_TLS=mm asked for peer error
    // handling on shared memory alone, and every endpoint was unreachable.
    for (absl::string_view costly : {"sm", "shm", "mm", "posix", "sysv", "cma", "knem", "xpmem", "all", "tcp"}) {
      if (name == costly) return false;
    }
  }
  return true;
}

uint8_t RandomCommunicatorId() { return static_cast<uint8_t>(std::random_device()()); }

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> Transport::Create(Bootstrap& bootstrap, const TransportOptions& requested) {
  const int rank = bootstrap.rank();
  if (absl::Status s = CheckOptions(requested, rank, bootstrap.size()); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<UcxContext>> context = UcxContext::Create(requested.ucx_transports, rank);
  if (!context.ok()) return context.status();
  TransportOptions options = requested;
  options.block_bytes =
      requested.block_bytes.value_or((*context)->cuda_memory_supported() ? kCudaUcxBlockBytes : kDefaultBlockBytes);

  // Everyone takes rank 0's communicator id and checks that the block sizes and lane counts agree.
  WireWriter mine;
  mine.U8(RandomCommunicatorId())
      .U64(*options.block_bytes)
      .U32(static_cast<uint32_t>(options.transport_lanes))
      .String((*context)->address());
  absl::StatusOr<std::vector<std::string>> all = bootstrap.AllGather(mine.bytes(), absl::Now() + options.op_timeout);
  if (!all.ok()) return WithContext(all.status(), absl::StrCat("rank ", rank, ": exchanging UCX worker addresses"));
  std::vector<std::string> addresses(all->size());
  uint8_t communicator_id = 0;
  for (size_t r = 0; r < all->size(); ++r) {
    WireReader reader((*all)[r]);
    uint8_t id = 0;
    uint64_t block_bytes = 0;
    uint32_t lanes = 0;
    if (!reader.U8(&id) || !reader.U64(&block_bytes) || !reader.U32(&lanes) ||
        !reader.String(&addresses[r], (*all)[r].size())) {
      return absl::DataLossError(absl::StrCat("rank ", rank, ": malformed transport record from rank ", r));
    }
    if (r == 0) communicator_id = id;
    if (block_bytes != *options.block_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": block_bytes ", *options.block_bytes,
                                                     " differs from rank ", r, "'s ", block_bytes,
                                                     "; every rank must use the same"));
    }
    if (lanes != static_cast<uint32_t>(options.transport_lanes)) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, ": transport_lanes ", options.transport_lanes,
                                                     " differs from rank ", r, "'s ", lanes,
                                                     "; every rank must use the same"));
    }
  }
  std::unique_ptr<Transport> transport(
      new Transport(rank, bootstrap.size(), options, std::move(*context), communicator_id));
  for (int r = 0; r < transport->size_; ++r) transport->peers_[r].bootstrap_fd = bootstrap.peer_fd(r);
  transport->peer_error_handling_ = WantsPeerErrorHandling(options.ucx_transports);
  if (absl::Status s = transport->ConnectEndpoints(addresses); !s.ok()) return s;
  UCCLZIP_LOG(kDebug) << "rank " << rank << ": UCX endpoints to " << transport->size_ - 1 << " peers created (transports "
                      << (options.ucx_transports.empty() ? "UCX's choice" : options.ucx_transports)
                      << ", UCX peer error handling " << (transport->peer_error_handling_ ? "on" : "off")
                      << ", device memory " << (transport->device_memory_direct() ? "direct" : "staged") << ")";
  transport->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (transport->wake_fd_ < 0) return absl::InternalError(absl::StrCat("rank ", rank, ": eventfd failed"));
  transport->progress_thread_ = std::thread([t = transport.get()] { t->ProgressLoop(); });
  pthread_setname_np(transport->progress_thread_.native_handle(), "ucclzip-progress");
  if (absl::Status s = transport->ConnectEveryPeer(absl::Now() + options.op_timeout); !s.ok()) return s;
  return transport;
}

Transport::Transport(int rank, int size, const TransportOptions& options, std::unique_ptr<UcxContext> context,
                     uint8_t communicator_id)
    : rank_(rank),
      size_(size),
      options_(options),
      spin_(SpinPolicyFor(std::thread::hardware_concurrency(), options.wait_spin)),
      context_(std::move(context)),
      communicator_id_(communicator_id),
      peers_(size) {
  for (int r = 0; r < size; ++r) {
    peers_[r].owner = this;
    peers_[r].rank = r;
  }
}

absl::Status Transport::ConnectEndpoints(const std::vector<std::string>& addresses) {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(addresses[r].data());
    params.err_mode = peer_error_handling_ ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb = &Transport::OnEndpointError;
    params.err_handler.arg = &peers_[r];
    ucp_ep_h endpoint = nullptr;
    ucs_status_t status = ucp_ep_create(context_->worker(), &params, &endpoint);
    if (status != UCS_OK) {
      return UcxStatus(status, absl::StrCat("rank ", rank_, ": creating the UCX endpoint to rank ", r));
    }
    peers_[r].endpoint = endpoint;
  }
  return absl::OkStatus();
}

void Transport::OnEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  peer->endpoint_error = status;
  peer->owner->any_endpoint_error_ = true;
}

std::shared_ptr<Request> Transport::Send(int peer, const void* data, size_t bytes, MemoryType type, OpTag tag,
                                         CompletionCallback on_complete) {
  // The buffer is only read; the Op holds one pointer type for both directions.
  return Post(OpKind::kSend, peer, const_cast<uint8_t*>(static_cast<const uint8_t*>(data)), bytes, type, tag,
              std::move(on_complete));
}

std::shared_ptr<Request> Transport::Recv(int peer, void* data, size_t bytes, MemoryType type, OpTag tag,
                                         CompletionCallback on_complete) {
  return Post(OpKind::kRecv, peer, static_cast<uint8_t*>(data), bytes, type, tag, std::move(on_complete));
}

std::shared_ptr<Request> Transport::TakeStray(int peer, const StrayQuery& query, void* data, size_t bytes, OpTag* found,
                                              CompletionCallback on_complete) {
  return Post(OpKind::kRecv, peer, static_cast<uint8_t*>(data), bytes, MemoryType::kHost, OpTag{0, query.stream},
              std::move(on_complete), found, query);
}

absl::Status Transport::Validate(Op& op, MemoryType type) const {
  auto fail = [&op](absl::StatusCode code, absl::string_view why) {
    return absl::Status(code, absl::StrCat(op.Describe(), ": ", why));
  };
  if (op.peer < 0 || op.peer >= size_ || op.peer == rank_) {
    return fail(absl::StatusCode::kInvalidArgument, absl::StrCat("invalid peer (world size ", size_, ")"));
  }
  if (op.bytes > 0 && op.data == nullptr) return fail(absl::StatusCode::kInvalidArgument, "null buffer");
  if (op.tag.sequence > kMaxSequence || op.tag.stream > kMaxStream) {
    return fail(absl::StatusCode::kInvalidArgument,
                absl::StrCat("tag out of range (sequence <= ", kMaxSequence, ", stream <= ", kMaxStream, ")"));
  }
  if (op.bytes / *options_.block_bytes >= kMaxBlocks) {
    return fail(absl::StatusCode::kInvalidArgument,
                absl::StrCat("more than ", kMaxBlocks, " blocks of ", *options_.block_bytes, " bytes"));
  }
  if (op.bytes == 0) return absl::OkStatus();
  absl::StatusOr<PointerInfo> classified = ClassifyPointer(op.data);
  if (!classified.ok()) return fail(classified.status().code(), classified.status().message());
  const PointerInfo actual = *classified;
  if (type == MemoryType::kDevice && CudaDeviceCount() == 0) {
    return fail(absl::StatusCode::kFailedPrecondition, "device memory posted but no usable CUDA device");
  }
  if (actual.type != type) {
    return fail(absl::StatusCode::kInvalidArgument,
                absl::StrCat("the buffer is ", MemoryTypeName(actual.type), " memory, posted as ", MemoryTypeName(type)));
  }
  op.memory = actual;
  return absl::OkStatus();
}

bool Transport::AtRecycledDeviceAddresses(const Op& op) {
  if (op.memory.type != MemoryType::kDevice || !device_memory_direct()) return false;
  absl::StatusOr<DeviceAllocation> allocation = FindDeviceAllocation(op.data);
  if (!allocation.ok()) {
    // Staging is safe for any device buffer; going directly is not, for an unknown one.
    UCCLZIP_LOG(kWarning) << op.Describe() << ": staging a device buffer the driver cannot place: " << allocation.status();
    recycled_device_bytes_staged_.fetch_add(op.bytes, std::memory_order_relaxed);
    return true;
  }
  if (ProcessDirectAllocations().Admit(*allocation)) return false;
  recycled_device_bytes_staged_.fetch_add(op.bytes, std::memory_order_relaxed);
  // Once per process: an application that frees and reallocates every step would flood the log.
  static std::atomic<bool> told{false};
  if (!told.exchange(true)) {
    UCCLZIP_LOG(kWarning) << op.Describe() << ": the device buffer at 0x" << absl::StrCat(absl::Hex(allocation->base)) << " ("
                          << allocation->size << " B) reuses the addresses of a freed buffer that went to a peer "
                          << "directly, so it is staged through host memory, and so will every such buffer be; "
                          << "keeping buffers allocated (a caching allocator) keeps them direct (docs/TRANSPORT.md)";
  }
  return true;
}

absl::Status Transport::PrepareDeviceStaging(int device) {
  absl::StatusOr<StagingPath*> path = StagingPathFor(MemoryType::kDevice, device);
  if (!path.ok()) {
    return absl::Status(path.status().code(), absl::StrCat("rank ", rank_, ": preparing staging for device ", device, ": ",
                                                           path.status().message()));
  }
  return absl::OkStatus();
}

std::shared_ptr<Request> Transport::Post(OpKind kind, int peer, uint8_t* data, size_t bytes, MemoryType type,
                                         OpTag tag, CompletionCallback on_complete, OpTag* stray_found,
                                         StrayQuery stray) {
  auto request = std::make_shared<Request>(std::move(on_complete), spin_.wait_spin);
  auto op = std::make_unique<Op>();
  op->kind = kind;
  op->rank = rank_;
  op->peer = peer;
  op->data = data;
  op->bytes = bytes;
  op->memory.type = type;
  op->tag = tag;
  op->request = request;
  if (absl::Status valid = Validate(*op, type); !valid.ok()) {
    request->Complete(valid);
    return request;
  }
  op->stray_found = stray_found;
  op->stray = stray;
  // A stray is taken into host memory straight from UCX's unexpected queue: one small message.
  op->staged = stray_found == nullptr && bytes > 0 && (Stages(type) || AtRecycledDeviceAddresses(*op));
  CutIntoBlocks(*op, *options_.block_bytes);
  absl::Status refused;
  {
    absl::MutexLock lock(&mutex_);
    if (!aborted_.ok()) {
      refused = absl::Status(aborted_.code(), absl::StrCat(op->Describe(), ": communicator aborted: ", aborted_.message()));
    } else if (stopping_) {
      refused = absl::FailedPreconditionError(absl::StrCat(op->Describe(), ": the communicator is shutting down"));
    } else {
      submitted_.push_back(std::move(op));
      submissions_pending_.store(true, std::memory_order_release);
    }
  }
  if (!refused.ok()) {
    request->Complete(refused);
    return request;
  }
  Wake();
  return request;
}

void Transport::GiveUpRecv(const std::shared_ptr<Request>& request) {
  {
    absl::MutexLock lock(&mutex_);
    give_ups_.push_back(request);
    submissions_pending_.store(true, std::memory_order_release);
  }
  Wake();
}

void Transport::Discard(int peer, OpTag tag) {
  if (peer < 0 || peer >= size_ || peer == rank_) return;
  {
    absl::MutexLock lock(&mutex_);
    discards_.emplace_back(peer, tag);
    submissions_pending_.store(true, std::memory_order_release);
  }
  Wake();
}

void Transport::Wake() { SignalEventFd(wake_fd_); }

absl::Status Transport::FirstPeerFailure() {
  if (!any_peer_failed_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&mutex_);
  return first_peer_failure_;
}

int Transport::FirstFailedPeer() {
  if (!any_peer_failed_.load(std::memory_order_acquire)) return -1;
  absl::MutexLock lock(&mutex_);
  return first_failed_peer_;
}

void Transport::SetPeerFailureListener(PeerFailureListener listener) {
  absl::MutexLock lock(&mutex_);
  peer_failure_listener_ = std::move(listener);
}

void Transport::ReportPeerFailure(int peer, const absl::Status& why) {
  if (peer < 0 || peer >= size_ || peer == rank_ || why.ok()) return;
  {
    absl::MutexLock lock(&mutex_);
    reported_failures_.emplace_back(peer, why);
    submissions_pending_.store(true, std::memory_order_release);
  }
  Wake();
}

void Transport::Abort(const absl::Status& why) {
  {
    absl::MutexLock lock(&mutex_);
    if (!aborted_.ok()) return;
    aborted_ = why.ok() ? absl::CancelledError("aborted") : why;
    abort_pending_ = true;
    submissions_pending_.store(true, std::memory_order_release);
  }
  UCCLZIP_LOG(kWarning) << "rank " << rank_ << ": aborting every operation: " << (why.ok() ? "no reason given" : why.ToString());
  Wake();
}

void Transport::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    submissions_pending_.store(true, std::memory_order_release);
  }
  Wake();
  if (progress_thread_.joinable()) progress_thread_.join();
  // A drain that ran out of time may leave staging copies running, which read and write the
  // callers' buffers: once this returns none does, and only UCX, on pinned staging memory, may
  // still be at work until the transport is destroyed.
  {
    absl::MutexLock lock(&staging_mutex_);
    for (StagingPath* path : {host_staging_.get(), device_staging_.get()}) {
      if (path != nullptr) path->engine().WaitForCopies();
    }
  }
  UCCLZIP_LOG(kInfo) << "rank " << rank_ << ": the progress thread slept " << pending_sleeps_
                      << " times with operations pending, and found work at once after " << missed_wakeups_
                      << " sleeps that ran to their 1 ms timeout (events UCX did not signal)";
}

Transport::~Transport() {
  Shutdown();
  // Destroying the worker releases whatever UCX still holds (only after a drain that ran out of
  // time); the ops its callbacks point to are destroyed after it.
  context_.reset();
  for (auto& op : active_) {
    op->Fail(absl::CancelledError("the communicator was destroyed with the operation pending"));
    op->request->Complete(op->error);
  }
  active_.clear();
  abandoned_.clear();
  drains_.clear();
  // The staging engines before the eventfd their copies signal: a CUDA engine's host functions
  // may write to it until its destructor has synchronised its streams.
  device_staging_.reset();
  host_staging_.reset();
  if (wake_fd_ >= 0) close(wake_fd_);
}

}  // namespace ucclzip::transport
