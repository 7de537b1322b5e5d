// Point-to-point messages over UCX's tag API for one communicator (or one of its transport lanes,
// which the pipeline layer creates over the same bootstrap): one UCP context and worker,
// an endpoint to every peer, and one progress thread that alone touches them. User threads
// only post operations (Send/Recv return at once) and test or wait on the returned requests.
//
// Compression-agnostic on purpose, in the spirit of Gloo's transport: the pipeline layer on top
// decides what the bytes are. A logical message may be sent as several parts (different
// OpTag streams), e.g. a raw plane first and the coded rest later; the receiver posts one
// receive per part.
//
// Memory: host buffers go to UCX directly. Device buffers go to UCX directly only if UCX says
// it takes CUDA memory (ucp_context_query); otherwise they are staged block by block through
// pooled pinned host memory, with the copies and the network overlapped.
//
// Faults: a peer's process exiting hangs up its bootstrap connection, endpoints use UCX peer
// error handling where that costs nothing (transport.cc), and every operation has a deadline
// that moves with its progress. A dead or stalled peer fails every pending operation with it,
// with a status that names the operation and the peer; later operations with it fail at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "transport/bootstrap.h"
#include "transport/memory_type.h"
#include "transport/message_tag.h"
#include "transport/request.h"
#include "transport/spin_policy.h"
#include "transport/transport_op.h"
#include "transport/transport_options.h"
#include "transport/ucx_context.h"

namespace ucclzip::transport {

class StagingPath;
class StagingPool;

class Transport {
 public:
  // Collective over the bootstrap: exchanges worker addresses and creates the endpoints.
  static absl::StatusOr<std::unique_ptr<Transport>> Create(Bootstrap& bootstrap, const TransportOptions& options);
  // Shuts down if nobody did, then releases the worker, the context and the staging memory.
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // True when UCX takes device pointers itself (a CUDA-enabled UCX).
  bool device_memory_direct() const { return context_->cuda_memory_supported(); }
  // True when messages of `type` go through the pinned staging pool block by block.
  bool Stages(MemoryType type) const {
    return type == MemoryType::kDevice ? !device_memory_direct() : options_.stage_host_memory;
  }
  const TransportOptions& options() const { return options_; }
  // Device bytes posted since creation that were staged although UCX takes device memory:
  // at recycled addresses, or in an allocation the driver could not place.
  uint64_t recycled_device_bytes_staged() const { return recycled_device_bytes_staged_.load(std::memory_order_relaxed); }
  // options().wait_spin as resolved for this machine: how long waiters busy-poll.
  absl::Duration wait_spin() const { return spin_.wait_spin; }

  // Posts a message of exactly `bytes` bytes; the receiver must post the same size and tag.
  // `type` must match what the pointer is; the buffer must stay valid until the request
  // completes. Device buffers are taken as they are at posting, with no stream ordering: every
  // kernel or copy that writes a send buffer, or still touches a receive buffer, must have
  // completed (the pipeline orders this against the caller's stream with events).
  std::shared_ptr<Request> Send(int peer, const void* data, size_t bytes, MemoryType type, OpTag tag,
                                CompletionCallback on_complete = {});
  std::shared_ptr<Request> Recv(int peer, void* data, size_t bytes, MemoryType type, OpTag tag,
                                CompletionCallback on_complete = {});

  // A receive its caller gave up on (a pipeline call that failed before the message came) no
  // longer counts against its peer as an operation without progress: it stays posted for the
  // message, which the peer may still send (and which then completes it, so that the caller can
  // drop what follows), and if nothing comes within op_timeout it completes with Cancelled,
  // quietly. Until session 39 it was cancelled at once, and the message stayed in UCX's
  // unexpected queue for good. Any thread.
  void GiveUpRecv(const std::shared_ptr<Request>& request);
  // Takes the first message from `peer` that no receive takes (UCX's unexpected queue), where it
  // is on `query.stream` and its sequence lies among the `query.window` sequences before
  // `query.end` (modulo 2^20; any sequence where the window is 0), and no receive posted here
  // before this call waits for it (a staged receive whose block is not yet in UCX): what a peer
  // sent that its caller's receives do not expect (docs/PIPELINE.md, "Errors"). Completes at once:
  // NotFound where there is none, else with the message in `data` (`bytes`, at most one transport
  // block; a longer message fails) and its tag in `*found`, which must stay valid until then.
  // Any thread.
  std::shared_ptr<Request> TakeStray(int peer, const StrayQuery& query, void* data, size_t bytes, OpTag* found,
                                     CompletionCallback on_complete = {});
  // Takes and drops the peer's message of `tag`, which its caller will not receive (the parts
  // of a block whose envelope a failed pipeline call matched), so that the sender's transfer
  // completes instead of failing the link at op_timeout. A message that has not come within
  // op_timeout (from the call, then from each block drained) is given up on quietly: the sender
  // may have failed too. Any thread.
  void Discard(int peer, OpTag tag);

  // Creates the pinned staging pool for `device` now instead of on the first staged transfer.
  // A caller that is about to queue work which waits on transfers (the pipeline's stream
  // waits) calls it first, because a page-locked allocation may wait for the device to idle.
  // Where UCX takes device memory itself the pool is still made, for buffers at recycled
  // addresses (direct_allocations.h).
  absl::Status PrepareDeviceStaging(int device);

  // The first peer failure this rank saw (a dead process, a broken connection, a timeout), or
  // OK. Operations that involve every rank (collectives) fail with it even when they do not
  // talk to that peer themselves. Any thread; cheap while no peer has failed.
  absl::Status FirstPeerFailure();
  // That peer's rank, or -1. Any thread.
  int FirstFailedPeer();

  // While on, the progress thread watches every peer's bootstrap connection (within about
  // 100 ms of a hang-up) even with no transfer of its own in flight. Its user turns it on while
  // a call waits on local work, a codec or the caller's stream, that needs peers which may have
  // exited meanwhile; off, a peer that exits while nothing is pending fails only at the next
  // transfer with it, and a normal shutdown, whose peers leave at their own pace after the last
  // barrier, reports no failure. Any thread.
  void WatchPeers(bool on) { watch_peers_.store(on, std::memory_order_relaxed); }
  bool watching_peers() const { return watch_peers_.load(std::memory_order_relaxed); }

  // Fails every pending and future operation with `why` and force-closes every endpoint, so
  // that peers see the failure too. Safe from any thread.
  void Abort(const absl::Status& why);

  // Called on the progress thread, once per peer, when this transport first considers `peer`
  // failed (not for the cancellations of a shutdown). Lets several transports over the same
  // ranks (the pipeline's lanes) share what each saw. Set before posting anything.
  using PeerFailureListener = std::function<void(int peer, const absl::Status& why)>;
  void SetPeerFailureListener(PeerFailureListener listener);
  // Treats `peer` as failed for `why`, as if this transport had seen it: for a failure that
  // another transport over the same ranks saw. Safe from any thread.
  void ReportPeerFailure(int peer, const absl::Status& why);

  // Bytes of the blocks this transport has delivered to peers and received from them since
  // creation. Any thread.
  uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }
  uint64_t bytes_received() const { return bytes_received_.load(std::memory_order_relaxed); }

  // Fails what is still pending, closes every endpoint and stops the progress thread. The
  // endpoints are closed forcibly, which drops whatever UCX has not yet delivered: callers that
  // want every completed send delivered first hold a barrier (the Communicator does). On return
  // no staging copy runs: UCX, on the pinned staging memory, may still hold buffers until the
  // transport is destroyed (after a drain that ran out of time).
  void Shutdown();

 private:
  struct Peer {
    Transport* owner = nullptr;
    int rank = 0;
    int bootstrap_fd = -1;     // hangs up when the peer's process exits
    void* endpoint = nullptr;  // ucp_ep_h
    absl::Status failure;      // set once the peer is considered dead
    // Its process exited or UCX reported the connection broken: it can no longer write into
    // our receive buffers (a peer that failed by a deadline or an abort may still).
    bool gone = false;
    ucs_status_t endpoint_error = UCS_OK;  // recorded by UCX's error callback
  };

  Transport(int rank, int size, const TransportOptions& options, std::unique_ptr<UcxContext> context,
            uint8_t communicator_id);
  absl::Status ConnectEndpoints(const std::vector<std::string>& addresses);
  // Exchanges one message each way with every peer (connect_peers.cc), collectively, once the
  // progress thread runs. UCX connects an endpoint (wireup) on its first message, in
  // ucp_worker_progress on the progress thread, and where it takes device memory that may
  // replace an endpoint and close its CUDA IPC mappings, which waits for the device; a
  // caller's stream that the pipeline holds keeps the device busy until that very transfer is
  // done: a rank of a 4-rank device test hung so, a progress thread in cuIpcCloseMemHandle
  // under ucp_worker_discard_uct_ep (benchmarks/RESULTS.md, H200 run s24-2). At creation no
  // stream is held yet, and the first operation no longer pays for the wireup.
  absl::Status ConnectEveryPeer(absl::Time deadline);
  std::shared_ptr<Request> Post(OpKind kind, int peer, uint8_t* data, size_t bytes, MemoryType type, OpTag tag,
                                CompletionCallback on_complete, OpTag* stray_found = nullptr, StrayQuery stray = {});
  // Checks a posted op and records what its buffer is.
  absl::Status Validate(Op& op, MemoryType type) const;
  // True for a device buffer that UCX would take itself but whose addresses belonged to another
  // allocation that went directly before (direct_allocations.h): it is staged instead.
  bool AtRecycledDeviceAddresses(const Op& op);

  // Progress thread.
  void ProgressLoop();
  // Moves posted ops into the active list and handles Abort; sets *stop once Shutdown began.
  bool TakeSubmissions(bool* stop);
  void Start(Op& op);
  // TakeStray's op: probes for the message and receives it, or fails the op with NotFound.
  void StartStrayTake(Op& op);
  // Advances the ops with news and the polled ones.
  bool AdvanceChanged();
  bool Advance(Op& op);
  // Lists the op as one that may have finished (RetireFinished) and, if it is staged and needs
  // it, as one to poll.
  void MarkChanged(Op& op);
  bool AdvanceStagedSend(Op& op, StagingPath& path);
  bool AdvanceStagedRecv(Op& op, StagingPath& path);
  // True once the block's staging copy is done (failed copies fail the op).
  bool CopyFinished(Op& op, StagingPath& path, Block& block);
  // A debug line per stage of a staged block, to time where a staged message waits.
  void TraceStagedBlock(const Op& op, const Block& block, const char* what) const;
  // Marks a block done and gives its staging block back; `delivered` counts it as transferred.
  void RetireBlock(Op& op, Block& block, StagingPool* pool, bool delivered);
  // Hands a block to UCX: a send, a receive, or (with `probed`) the receive of a probed message.
  void PostNetwork(Block& block, uint8_t* buffer, size_t capacity, bool host_buffer, ucp_tag_message_h probed = nullptr);
  absl::StatusOr<StagingPath*> StagingFor(const Op& op);
  // The staging path for host or device buffers, created on first use (any thread).
  absl::StatusOr<StagingPath*> StagingPathFor(MemoryType type, int device);
  // Every SweepInterval(): what no event reports, deadlines and failed ops to give up on.
  void SweepIfDue(absl::Time now);
  absl::Duration SweepInterval() const;
  void CheckDeadlines(absl::Time now);
  void AbandonStuckOps(absl::Time now);
  // At the first sweep after each kSizeMismatchSearch: fails each direct receive whose sender
  // tagged one of its blocks as ending its message where the receive expects more, or the other
  // way round (message_tag.h).
  void FindSizeMismatches();
  void HandleEndpointErrors();
  // Fails peers whose bootstrap connection hung up: the way dead peers show over transports
  // without UCX peer error handling, and often sooner than UCX notices.
  void WatchBootstrapConnections(absl::Time now);
  // Fails the peers whose transfers broke while AdvanceChanged ran (it iterates the op lists
  // that failing a peer changes).
  void FailBrokenPeers();
  void FailPeer(int peer, const absl::Status& why);
  void CancelReceives(Op& op);
  // A receive that failed as shorter than the sent message leaves the sender's blocks past its
  // end unmatched: the sender would wait for them until its deadline, then declare this
  // (healthy) rank failed. They are received into scratch memory and dropped instead, from
  // `first_block` to the one that ends the sender's message.
  void StartDrain(int peer, OpTag tag, uint32_t first_block);
  bool AdvanceDrains(absl::Time now);
  void CloseEndpoint(Peer& peer, bool force);
  bool RetireFinished();
  // Completes the op's request and takes it off every list; an abandoned op is kept for UCX.
  void Retire(Op& op, bool abandon);
  void WaitForEvents();
  void Wake();
  void PollClosingEndpoints();
  void DrainForShutdown();
  // Takes and drops what no receive took (a failed collective's notices to ranks that had left
  // the call, what ranks that disagreed sent), so that UCX does not warn of each message at the
  // worker's end.
  void DropUnmatched(absl::Time deadline);
  uint64_t TagOf(const Op& op, uint32_t block, bool last) const;

  static void OnEndpointError(void* arg, ucp_ep_h endpoint, ucs_status_t status);

  const int rank_;
  const int size_;
  const TransportOptions options_;  // block_bytes resolved (Create)
  const SpinPolicy spin_;  // options_.wait_spin and the progress thread's spin, resolved for this machine
  std::unique_ptr<UcxContext> context_;
  const uint8_t communicator_id_;
  std::vector<Peer> peers_;
  // UCX peer error handling on every endpoint; off where it would cost shared memory.
  bool peer_error_handling_ = false;

  // Shared between user threads and the progress thread.
  absl::Mutex mutex_;
  std::vector<std::unique_ptr<Op>> submitted_ ABSL_GUARDED_BY(mutex_);
  absl::Status aborted_ ABSL_GUARDED_BY(mutex_);
  bool abort_pending_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status first_peer_failure_ ABSL_GUARDED_BY(mutex_);
  int first_failed_peer_ ABSL_GUARDED_BY(mutex_) = -1;
  std::vector<std::pair<int, absl::Status>> reported_failures_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::shared_ptr<Request>> give_ups_ ABSL_GUARDED_BY(mutex_);  // GiveUpRecv's
  std::vector<std::pair<int, OpTag>> discards_ ABSL_GUARDED_BY(mutex_);     // Discard's
  PeerFailureListener peer_failure_listener_ ABSL_GUARDED_BY(mutex_);
  std::atomic<bool> any_peer_failed_{false};
  std::atomic<bool> watch_peers_{false};  // WatchPeers
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  // Set with any of submitted_, reported_failures_, give_ups_, discards_, abort_pending_ and stopping_, so
  // that a pass with nothing new skips the mutex: Debian's Abseil keeps its deadlock detection
  // on, which makes every Lock and Unlock look the mutex up in a process-wide graph under a
  // global lock.
  std::atomic<bool> submissions_pending_{false};
  bool shut_down_ = false;  // owner thread only
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> recycled_device_bytes_staged_{0};

  // Progress thread only.
  std::list<std::unique_ptr<Op>> active_;
  // What a pass looks at (transport_progress.cc, "Passes"); each lists an op at most once and
  // only while it is active.
  std::vector<Op*> news_;     // ops whose UCX callbacks ran
  std::vector<Op*> polled_;   // staged ops with copies in flight or blocks still to start, in posting order
  std::vector<Op*> changed_;  // ops that may have finished
  absl::Time last_sweep_;
  absl::Time last_size_mismatch_search_;
  // Failed ops whose blocks UCX never gave back (a force-closed endpoint without peer error
  // handling keeps them): their requests are completed, their blocks kept for UCX until the
  // worker is destroyed.
  std::vector<std::unique_ptr<Op>> abandoned_;
  std::vector<void*> closing_;  // endpoint close requests in flight
  struct Drain {
    int peer = 0;
    OpTag tag;
    uint32_t next_block = 0;
    absl::Time deadline;   // moves with each drained block, as an op's does
    bool receiving = false;  // a block is in UCX, into `scratch`
    bool landed = false;     // set by the callback
    bool failed = false;     // set by the callback
    bool last = false;       // the block in UCX ends the sender's message
    // Uninitialized, and freed between blocks: a block may be a 256 MB transport block.
    std::unique_ptr<uint8_t[]> scratch;
  };
  // Kept until the worker is destroyed: a block in UCX writes into its scratch memory.
  std::list<std::unique_ptr<Drain>> drains_;
  // Created once under staging_mutex_ (StagingPathFor), then only read until destruction: the
  // progress thread reads them without the lock for ops that StagingFor has already seen.
  absl::Mutex staging_mutex_;
  std::unique_ptr<StagingPath> host_staging_;
  std::unique_ptr<StagingPath> device_staging_;
  bool any_endpoint_error_ = false;
  std::vector<std::pair<int, absl::Status>> broken_peers_;  // progress thread: for FailBrokenPeers
  int copies_in_flight_ = 0;
  absl::Time last_work_;
  // How often the progress thread slept with operations pending, and how often it then found
  // work at once after a sleep that ran to its timeout: an event UCX had but did not signal,
  // for which whatever waited on it waited up to the timeout. Logged at shutdown (info).
  uint64_t pending_sleeps_ = 0;
  uint64_t missed_wakeups_ = 0;
  bool slept_to_timeout_ = false;
  absl::Time last_watch_;

  int wake_fd_ = -1;  // eventfd: posts, Abort and Shutdown wake the progress thread
  std::thread progress_thread_;
};

}  // namespace ucclzip::transport
