// One operation (a Send, a Recv or a collective) as the pipeline thread runs it: a
// non-blocking state machine (UCC-style post/progress) over the blocks of its schedule's steps.
// Advance() moves every block as far as it can without waiting and says whether anything moved;
// the engine calls it until the task is finished. A failed task stops starting blocks but stays
// until everything it handed to the transport or the GPU has completed, so that no buffer or
// slot is released while still in use.
//
// Files: operation_task.cc (lifecycle, ordering, local copies), operation_task_send.cc (send
// blocks: encode or not, split-send, forwarding), operation_task_recv.cc (receive blocks:
// envelope checks, decode, reduce), operation_task_pending.cc (what a stuck task waited for),
// operation_task_strays.cc (what peers sent that no receive takes; notices of failed calls).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "pipeline/compression_policy.h"
#include "pipeline/device_slots.h"
#include "pipeline/envelope.h"
#include "pipeline/held_streams.h"
#include "pipeline/host_codec_jobs.h"
#include "pipeline/notices.h"
#include "pipeline/peer_places.h"
#include "pipeline/plain_run.h"
#include "pipeline/reduce.h"
#include "pipeline/schedule.h"
#include "pipeline/send_window.h"
#include "pipeline/stream_flags.h"
#include "pipeline/stream_order.h"
#include "pipeline/transport_lanes.h"
#include "ucclzip/codec.h"
#include "ucclzip/communicator.h"

namespace ucclzip::pipeline {

// Tag streams of the parts of one block (the block's sequence is the OpTag sequence); notices
// (notices.h) go on stream 4.
enum PartStream : uint32_t { kEnvelopeStream = 0, kRawStream = 1, kHeadStream = 2, kCodedStream = 3 };

// "broadcast of 1000 elements of bf16 (root 0)": a call as errors name it.
std::string DescribeOperation(OperationKind kind, uint64_t count, DataType dtype, ReduceOp op, int root);

struct OperationSpec {
  Schedule schedule;
  uint8_t* input = nullptr;   // the caller's send buffer (null if the schedule reads none)
  uint8_t* output = nullptr;  // the caller's receive buffer (null if the schedule writes none)
  DataType dtype = DataType::kRaw;
  transport::MemoryType memory = transport::MemoryType::kHost;
  CompressionMode compression = CompressionMode::kAuto;
  uint64_t tensor = 0;
  absl::Time deadline = absl::InfiniteFuture();
  // Recorded on the caller's stream at the call: the input (and the output's previous users)
  // is ready once it completes. Owned by the task.
  cudaEvent_t input_ready = nullptr;
  cudaStream_t stream = nullptr;
  // How the caller's stream waits for the call (stream_order.h); for a call without a stream,
  // its input alone (there is none to order).
  StreamOrder stream_order = StreamOrder::kInputOnly;
  // Raised when the task finishes, to release the caller's stream.
  std::optional<StreamFlags::Ticket> done_flag;
  // The bound the caller's stream is held under (its device's), or null where the hold is not
  // counted: no hold, or host memory where no stream can be held (held_streams.h).
  HeldStreams* held_streams = nullptr;
  uint64_t block_elements = 0;  // elements per pipeline block (a chunk's last may be shorter)
  // "rank 0: send to peer 1 (1000 elements of bf16, host memory)"
  std::string description;
  std::shared_ptr<transport::Request> request;
  // Not OK: the call was refused (Call::refused); it only takes its places on its links.
  absl::Status refused;
  // Per link, the calls refused before this one without taking their places there
  // (Engine::UnplacedCall), as the count stood at this call's place in the rank's order (set as
  // the engine queues it): sent in its envelopes,
  // compared with the peer's in theirs. Empty while every count is 0 (UnplacedOn).
  std::vector<uint16_t> unplaced;
};

class OperationTask;

// What tasks use of the engine; pipeline thread only.
struct TaskContext {
  TransportLanes* lanes = nullptr;  // sends and receives each go on their link's lane
  CompressionPolicy* policy = nullptr;
  // Per peer, null until the first device operation (and for this rank itself): each peer has
  // its own slots, so that one peer's blocks can never hold the slots another peer needs.
  std::vector<DeviceSlotPool*> send_slots;
  std::vector<DeviceSlotPool*> recv_slots;
  cudaStream_t copy_stream = nullptr;  // local copies of device buffers
  SendWindow* send_window = nullptr;
  // Host memory's bounds where device memory has its slots (peer_places.h): per peer,
  // kEncodeAheadBlocks frames encoding ahead of the window, and as many receive blocks holding
  // buffers as a device receive pool has slots.
  PeerPlaces* host_frames_ahead = nullptr;
  PeerPlaces* host_receive_blocks = nullptr;
  // The most bytes one plain run may carry (plain_run.h; the engine lowers it to what the
  // transport's block limit allows).
  uint64_t max_run_bytes = kMaxRunBytes;
  transport::CompletionCallback wake;  // given to every transport request
  CommunicatorStats* stats = nullptr;
  HostCodecJobs* host_jobs = nullptr;  // where the CPU codec runs them
  // Envelopes that a look took before any receive was posted for them (a later call's, a
  // point-to-point message's next block), by link (peer, sequence): the receive's place takes
  // it from here (PostEnvelope). The engine's.
  std::map<std::pair<int, uint32_t>, std::array<uint8_t, kEnvelopeBytes>>* early_envelopes = nullptr;
  // As the pass began: the ordinal of the oldest collective still here (or of the next one the
  // engine queues, where none is), since notices of earlier calls are no one's; of the oldest
  // one that has not failed, which alone looks for strays and notices (for every call here);
  // of the next one the engine queues; per peer, the next receive sequence it assigns.
  uint32_t oldest_collective_ordinal = 0;
  uint32_t looking_ordinal = 0;
  uint32_t next_collective_ordinal = 0;
  std::vector<uint32_t> next_recv_sequences;
  // The collective task of an ordinal still here, or null.
  std::function<OperationTask*(uint32_t ordinal)> collective_task;
  // Per peer, whether every earlier task has started all its sends to the peer (posted all its
  // receives from it): a link's blocks start, and take their slots, in call order across tasks,
  // as within one (docs/COLLECTIVES.md, "Link order"). Set by the engine before each Advance.
  const std::vector<bool>* sends_open = nullptr;
  const std::vector<bool>* recvs_open = nullptr;
};

class OperationTask {
 public:
  // `rank`: this rank, whose links the task's blocks are ordered on (LinkOrderOf).
  OperationTask(OperationSpec spec, int world_size, int rank);
  ~OperationTask();
  OperationTask(const OperationTask&) = delete;
  OperationTask& operator=(const OperationTask&) = delete;

  // Transport sequences this task takes on each link: sends to `peer`, receives from `peer`.
  uint32_t SendBlocksTo(int peer) const { return static_cast<uint32_t>(send_order_[peer].size()); }
  uint32_t RecvBlocksFrom(int peer) const { return static_cast<uint32_t>(recv_order_[peer].size()); }
  // Given by the engine at submission: the first sequence of this task on each link.
  void set_first_sequences(std::vector<uint32_t> send, std::vector<uint32_t> recv);
  // The task's place among this communicator's submissions (the same on every rank for the
  // same sequence of calls): names it in traces.
  void set_number(uint64_t number) { number_ = number; }
  // A collective's place among the communicator's collective calls (Schedule::ordinal); before
  // the task starts.
  void set_collective_ordinal(uint32_t ordinal) { spec_.schedule.ordinal = ordinal; }
  // The links' counts of calls refused before they took their places, at this call's place.
  void set_unplaced(std::vector<uint16_t> counts) { spec_.unplaced = std::move(counts); }
  void set_done_flag(StreamFlags::Ticket ticket) { spec_.done_flag = ticket; }
  // The done flag, once: the caller's stream is let go of exactly once (Engine::LetGoOfStream).
  std::optional<StreamFlags::Ticket> take_done_flag() { return std::exchange(spec_.done_flag, std::nullopt); }

  // Moves the task on; true if anything changed.
  bool Advance(TaskContext& context);
  // Whether Advance would not move the task now, going by its last Advance: it waits on nothing
  // but transport requests of its own (nothing on the GPU or a codec thread) and on links whose
  // earlier tasks have not yet started every send or posted every receive (closed in
  // `sends_open` and `recvs_open`, as the engine's pass has them). Until one of those requests
  // completes (TakeNews) or one of those links opens, the engine passes it by (Engine::Loop),
  // so that a group of thousands of calls does not walk every block of every call each time
  // one transfer completes.
  bool Parked(const std::vector<bool>& sends_open, const std::vector<bool>& recvs_open) const;
  // True if one of the task's transport requests completed since the last call (the flag is
  // set after the request's own, so a visit that clears it first sees the request done).
  bool TakeNews() {
    return news_->raised.load(std::memory_order_relaxed) && news_->raised.exchange(false, std::memory_order_acq_rel);
  }
  // A stray envelope of this task's call that another task's look took from `peer`
  // (operation_task_strays.cc): fails the task.
  void FailForStray(TaskContext& context, int peer, transport::OpTag tag, const Envelope& envelope);
  // A notice of this task's call from `peer` that a look took (operation_task_strays.cc): fails
  // the task.
  void OnNotice(int peer, const std::array<uint8_t, kEnvelopeBytes>& bytes);
  // Whether its envelope receives are posted (a task does so in its first Advance).
  bool envelopes_posted() const { return envelopes_posted_; }
  // Done, or failed with nothing left in flight.
  bool finished() const;
  // Whether this task will start no more sends to `peer` (post no more receives from it): all
  // started and within the send window, or the task failed.
  bool sends_started_to(int peer) const { return !status_.ok() || next_window_[peer] == send_order_[peer].size(); }
  bool recvs_posted_from(int peer) const { return !status_.ok() || next_parts_[peer] == recv_order_[peer].size(); }
  // True while the task waits on the GPU (the engine then polls instead of sleeping).
  bool waits_on_gpu() const;
  // True when nothing in flight reads or writes the caller's buffers: a failed task is then
  // reported to the caller at once, while it drains its own buffers in the background.
  bool caller_buffer_idle() const;
  // Peers whose messages no longer line up with this rank's receives after a mismatch: the
  // engine refuses later receives from them with the status.
  const std::vector<std::pair<int, absl::Status>>& out_of_step() const { return out_of_step_; }

  const OperationSpec& spec() const { return spec_; }
  const absl::Status& status() const { return status_; }
  absl::Time started() const { return started_; }
  // Records the first failure, phrased with this task's description; a failure for lack of
  // progress (DeadlineExceeded) also names what the unfinished blocks were waiting for.
  void Fail(const absl::Status& why);
  // User bytes this task sends and receives (for the statistics).
  uint64_t payload_bytes_sent() const;
  uint64_t payload_bytes_received() const;

 private:
  enum class SendStage { kWaiting, kEncoding, kSending, kDone };
  enum class RecvStage { kEnvelope, kParts, kHead, kReceiving, kProcessing, kDone };

  struct SendBlock {
    int step = 0;
    uint32_t index = 0;  // block of the step's chunk
    uint32_t link_position = 0;
    SendStage stage = SendStage::kWaiting;
    // The policy's choice for this block, taken once: a device frame may wait for a slot and
    // be started again, and a plain run decides the blocks it carries before their turn.
    std::optional<bool> compress;
    // The plain run (plain_run.h) this block belongs to: its first block, whose raw part carries
    // the run's bytes, and how many blocks it has. A block not in a run is its own run of one.
    // A carried block (run_first != index) sends nothing of its own and completes with the first.
    uint32_t run_first = 0;
    uint32_t run_blocks = 1;
    std::array<uint8_t, kEnvelopeBytes> envelope{};
    FramePlan plan{};
    std::unique_ptr<uint8_t[]> host_frame;
    uint64_t host_frame_bytes = 0;  // once encoded
    DeviceSlot* slot = nullptr;
    bool slot_borrowed = false;  // the slot of the receive block this one re-encodes
    bool encoded = false;  // the frame's encode has finished
    // A host frame encoding ahead of the window holds one of its peer's places for that
    // (TaskContext::host_frames_ahead) until it takes the window or retires.
    bool encoding_ahead = false;
    bool raw_posted = false;
    bool envelope_sent = false;  // its place's envelope (or its run's) is posted
    bool abandoned = false;      // its envelope is an abandoned one: nothing of the caller's is read
    // Which of the policy's meters times this block, from its post (a frame: once encoded and
    // sent, its encode's start given) to its send's completion, and its ticket there.
    enum class Meter : uint8_t { kNone, kPlain, kCompressed } meter = Meter::kNone;
    uint64_t meter_ticket = 0;
    uint64_t window_bytes = 0;  // taken from the send window while the block is in flight
    absl::Time codec_start;
    std::shared_ptr<const HostCodecJobs::Job> host_job;  // a host frame's encode, until it is sent
    std::vector<std::shared_ptr<transport::Request>> requests;
  };

  struct RecvBlock {
    int step = 0;
    uint32_t index = 0;
    uint32_t link_position = 0;
    RecvStage stage = RecvStage::kEnvelope;
    bool landed = false;   // every part has arrived (a forward may start)
    bool retired = false;  // buffers released (after the result's consumers are done)
    int consumers = 0;     // send blocks that still read this block's buffers
    std::array<uint8_t, kEnvelopeBytes> envelope{};
    Envelope header;
    FramePlan plan{};
    uint64_t frame_bytes = 0;
    std::unique_ptr<uint8_t[]> host_frame;
    std::unique_ptr<uint8_t[]> host_scratch;
    bool holds_host_place = false;  // of TaskContext::host_receive_blocks, with the buffers above
    DeviceSlot* slot = nullptr;
    // A block this rank forwards, where the transport stages device memory: it lands whole in
    // the slot's pinned host frame, leaves from there, and is copied to the device beside that.
    bool on_host = false;
    // Where the plain bytes landed, or the result is: the output buffer or scratch.
    uint8_t* result = nullptr;
    // A part of the block (its plain bytes, or its run's) is received straight into the caller's
    // buffer. Otherwise its parts land in the block's own buffers (a frame, scratch, a slot), and
    // the caller's is touched only once the block is processed, which a failed task never does.
    bool into_caller = false;
    absl::Time codec_start;
    std::shared_ptr<const HostCodecJobs::Job> host_job;  // a host block's decode and reduction
    std::shared_ptr<transport::Request> envelope_request;
    bool envelope_given_up = false;  // the task failed first: its receive no longer counts against the peer
    bool parts_discarded = false;     // the task failed: what it never posted is dropped (DiscardUnposted)
    std::shared_ptr<transport::Request> head_request;
    // The first block of a plain run: the receive of the whole run's bytes, which the blocks it
    // carries share, so that its failure fails every one of them.
    std::shared_ptr<transport::Request> run_request;
    std::vector<std::shared_ptr<transport::Request>> requests;
  };

  // --- diagnosis (operation_task_pending.cc)
  // The unfinished blocks, grouped by link and what they wait for: "receive from peer 6: 1
  // block waiting for the envelope (first: step 0 block 0)".
  std::string PendingBlocks() const;

  // --- lifecycle (operation_task.cc)
  void BuildLinkOrder();
  // A debug-level line per block event ("rank 1: broadcast recv step 0 block 3 from peer 0
  // landed at 12.5 ms"): the timeline of each block across the ranks, to see where a pipeline
  // waits.
  void TraceBlock(const char* direction, int step, uint32_t block, const char* event) const;
  bool InputReady();
  bool AdvanceCopies(TaskContext& context);
  void FailBlock(const char* direction, int step, uint32_t block, const absl::Status& why);
  uint8_t* ChunkAddress(const Chunk& chunk, uint64_t element) const;
  // Block `index` of send (receive) step `step`.
  SendBlock& SendBlockOf(int step, uint32_t index) { return send_blocks_[send_step_first_[step] + index]; }
  const RecvBlock& RecvBlockOf(int step, uint32_t index) const { return recv_blocks_[recv_step_first_[step] + index]; }
  uint64_t BlockElements(uint64_t count, uint32_t block) const;
  // The elements of `blocks` consecutive blocks from `block` of a chunk of `count`.
  uint64_t RunElements(uint64_t count, uint32_t block, uint32_t blocks) const;
  Envelope OperationEnvelope() const;
  transport::OpTag Tag(uint32_t first, uint32_t position, PartStream stream) const {
    return transport::OpTag{(first + position) & transport::kMaxSequence, stream};
  }
  static std::optional<absl::Status> Completed(const std::vector<std::shared_ptr<transport::Request>>& requests);
  // Whether the task waits on nothing but its own transport requests and the links in
  // gated_sends_ and gated_recvs_, which it sets: worked out at the end of an Advance.
  bool WaitsOnTransfersAndLinks();
  // The completion callback of the task's transport requests: raises its news, then wakes the
  // pipeline thread.
  const transport::CompletionCallback& WakeOnNews(const TaskContext& context);

  // --- sending (operation_task_send.cc)
  bool AdvanceSends(TaskContext& context);
  bool SourceReady(const SendBlock& block) const;
  bool StartSend(TaskContext& context, SendBlock& block);
  // The frame the block is sent as, or nullopt where it goes plainly: the policy's choice
  // (asked once per block), and plain where a frame would only store the elements.
  std::optional<FramePlan> FramePlanOf(TaskContext& context, SendBlock& block);
  // The plain run a plain block starts: the following blocks that go plainly too, where the
  // operation is a point-to-point send (collectives forward and reduce block by block).
  PlainRun FormPlainRun(TaskContext& context, const SendBlock& block);
  // Encodes a frame ahead, before the send window has room for it (false: the block is not a
  // frame of its own, or no send slot or place ahead is free).
  bool StartAhead(TaskContext& context, SendBlock& block);
  // The room `block` takes in the send window (send_window.h).
  uint64_t WindowRoom(const TaskContext& context, const SendBlock& block) const;
  // A block started ahead takes the send window and posts its envelope (false: no room yet).
  bool TakeWindow(TaskContext& context, SendBlock& block);
  // Gives back the block's place ahead of the window, if it holds one.
  void EndEncodeAhead(TaskContext& context, SendBlock& block);
  void StartForward(TaskContext& context, SendBlock& block);
  void StartPlain(TaskContext& context, SendBlock& block, const uint8_t* source);
  // Queues a host frame's encode; AdvanceHostFrame sends it once the encode is done and the
  // block has the window.
  void StartHostFrame(TaskContext& context, SendBlock& block, const uint8_t* source);
  bool AdvanceHostFrame(TaskContext& context, SendBlock& block);
  bool StartDeviceFrame(TaskContext& context, SendBlock& block, const uint8_t* source, bool windowed);
  bool AdvanceEncoding(TaskContext& context, SendBlock& block);
  void SendRest(TaskContext& context, SendBlock& block, const uint8_t* head, const uint8_t* frame, uint64_t frame_bytes,
                transport::MemoryType frame_memory);
  // Starts the policy's meter of `meter`'s kind for the block's `payload` bytes, sent as
  // `wire_bytes`, whose pipeline started at `start`.
  void StartMeter(TaskContext& context, SendBlock& block, SendBlock::Meter meter, uint64_t payload, uint64_t wire_bytes,
                  absl::Time start);
  // Ends a send block's metering (`delivered`: the block itself arrived) and gives back its slot.
  void RetireSend(TaskContext& context, SendBlock& block, bool delivered);
  // A place whose block never began (the task failed first) sends an abandoned envelope.
  void SendAbandoned(TaskContext& context, SendBlock& block);
  // Posts a part of `block` on its sequence; the block keeps the request.
  void PostSend(TaskContext& context, SendBlock& block, const void* data, uint64_t bytes, transport::MemoryType memory,
                PartStream stream);
  RecvBlock* SourceBlock(const SendBlock& block);
  // The envelope of a send block of this kind (frames: with its plan's layout).
  Envelope BlockEnvelope(const SendBlock& block, BlockKind kind) const;
  // The spec's count of unplaced calls on the link to `peer`.
  uint16_t UnplacedOn(int peer) const { return spec_.unplaced.empty() ? 0 : spec_.unplaced[peer]; }

  // --- strays and notices (operation_task_strays.cc)
  // The oldest collective that has not failed, once it has made no progress for
  // kStrayLookAfter, looks every kStrayLookInterval for what the peers sent that no receive
  // takes (ranks that disagree on a root send to ranks that do not receive from them) and for
  // their notices that they gave up a call; the call they belong to fails naming the peer and
  // both calls. A collective that fails sends every peer a notice.
  static constexpr absl::Duration kStrayLookAfter = absl::Milliseconds(100);
  static constexpr absl::Duration kStrayLookInterval = absl::Milliseconds(100);
  // At most this many messages taken from one peer in one look (strays of earlier calls, stale
  // notices): the rest at the next look.
  static constexpr int kMaxTakenPerLook = 16;
  // `progressed`: the task moved in this Advance, which puts the next look off.
  bool LookForStrays(TaskContext& context, bool progressed);
  // One message from `peer` that `query` allows, taken at once into `bytes`; false where none.
  bool TakeStray(TaskContext& context, int peer, const transport::StrayQuery& query,
                 std::array<uint8_t, kEnvelopeBytes>& bytes, transport::OpTag& found);
  // A stray envelope taken from `peer`, routed by its ordinal: a call still here fails by it;
  // where no receive of a call still here could take it, it is kept for the receive that will
  // (a later call's, a point-to-point message's, a place the peer took beyond an earlier call's);
  // what an ended call left at a place it took is dropped.
  void OnStrayEnvelope(TaskContext& context, int peer, transport::OpTag tag, const std::array<uint8_t, kEnvelopeBytes>& bytes);
  // Drops the parts that follow a stray envelope.
  void DropStrayParts(TaskContext& context, int peer, transport::OpTag tag, const Envelope& envelope);
  // Once the task has failed: its call, as an abandoned envelope, to every peer.
  void SendNotices(TaskContext& context);
  bool NoticesSent() const;

  // --- receiving (operation_task_recv.cc)
  bool AdvanceRecvs(TaskContext& context);
  bool AdvanceRecv(TaskContext& context, RecvBlock& block);
  void PostEnvelope(TaskContext& context, RecvBlock& block);
  // Gives up the envelope receive of a block in a failed task, if nothing matched it yet: it no
  // longer counts against the peer, and takes the envelope the peer may still send.
  void GiveUpEnvelope(TaskContext& context, RecvBlock& block);
  // Drops the parts a failed task's block will not post; false while its given-up envelope
  // receive may still be matched.
  bool DiscardUnposted(TaskContext& context, RecvBlock& block);
  bool OnEnvelope(TaskContext& context, RecvBlock& block);
  // OK when `envelope` is the one this block's place pairs with as far as the two calls go
  // (operation, counts, type, operator, root, ordinal, unplaced calls); else the error naming
  // both sides, after which the link is out of step (MarkOutOfStep).
  absl::Status PairingMismatch(const Envelope& envelope, const RecvBlock& block) const;
  // OK when `envelope`'s count of calls refused before they took their places on the link from
  // `peer` is this rank's; else the error that says this call pairs with another of the peer's.
  absl::Status UnplacedMismatch(const Envelope& envelope, int peer) const;
  void MarkOutOfStep(int peer);
  // After a point-to-point block's envelope: the blocks its run carries take the run's envelope
  // for their own, and the envelope of the block after them is posted.
  void ExpectNextBlocks(TaskContext& context, const RecvBlock& block);
  bool PostParts(TaskContext& context, RecvBlock& block);
  // A carried block's turn: it shares its run's receive.
  bool PostCarried(RecvBlock& block);
  bool OnHead(TaskContext& context, RecvBlock& block);
  // Whether block `block` of `step` may be combined: its after_recv and after_send blocks are done.
  bool PredecessorsDone(const RecvStep& step, uint32_t block);
  bool Process(TaskContext& context, RecvBlock& block);
  // A host block's decode and reduction, queued; FinishProcessing takes the result.
  void ProcessOnHost(TaskContext& context, RecvBlock& block, const Combiner& combiner, uint8_t* decoded,
                     uint8_t* result, const uint8_t* local);
  bool FinishProcessing(TaskContext& context, RecvBlock& block);
  bool RetireRecv(TaskContext& context, RecvBlock& block);
  void PostRecv(TaskContext& context, RecvBlock& block, void* data, uint64_t bytes, transport::MemoryType memory,
                PartStream stream, std::shared_ptr<transport::Request>* keep = nullptr);
  // Where block `block` of receive step `step` ends up, or null if it stays in scratch.
  uint8_t* Destination(const RecvStep& step, uint32_t block) const;
  // Where a received block's bytes land (a frame, or plain elements) and in what memory, and
  // where a frame's head lands (always host memory).
  struct Landing {
    uint8_t* bytes = nullptr;
    uint8_t* head = nullptr;
    transport::MemoryType memory = transport::MemoryType::kHost;
  };
  Landing LandingOf(const RecvBlock& block) const;

  OperationSpec spec_;
  absl::Status status_;
  absl::Time started_ = absl::Now();
  const int rank_;
  uint64_t number_ = 0;
  bool input_seen_ready_ = false;

  // Blocks of every step, step-major; the link orders below index them in sequence order.
  std::vector<SendBlock> send_blocks_;
  std::vector<RecvBlock> recv_blocks_;
  std::vector<uint32_t> send_step_first_;  // index of each send step's first block
  std::vector<uint32_t> recv_step_first_;
  // Per peer: the blocks on that link in sequence order (indices into the vectors above).
  std::vector<std::vector<uint32_t>> send_order_;
  std::vector<std::vector<uint32_t>> recv_order_;
  std::vector<uint32_t> first_send_sequence_;
  std::vector<uint32_t> first_recv_sequence_;
  std::vector<uint32_t> next_send_;   // per peer: the next block to start
  // Per peer: the next block to take the send window. Blocks from here to next_send_ are frames
  // encoding ahead: their send slot or place ahead taken, their envelope not yet posted.
  std::vector<uint32_t> next_window_;
  std::vector<uint32_t> next_parts_;  // per peer: the next block to post its parts
  std::vector<bool> recv_step_forwarded_;  // per receive step: a send step forwards its blocks
  bool envelopes_posted_ = false;

  enum class CopyStage { kPending, kRunning, kDone };
  CopyStage copies_ = CopyStage::kPending;
  cudaEvent_t copies_done_ = nullptr;
  // Host copies run a slice at a time; where the next slice starts.
  static constexpr uint64_t kHostCopySliceBytes = uint64_t{1} << 20;
  struct HostCopyPosition {
    size_t index = 0;
    uint64_t offset = 0;
  };
  HostCopyPosition host_copy_;

  std::vector<std::pair<int, absl::Status>> out_of_step_;

  // The notices this task sent, until the transport is done with them.
  std::vector<std::unique_ptr<SentNotice>> notices_;
  absl::Time next_stray_look_ = started_ + kStrayLookAfter;
  bool notices_sent_ = false;
  bool told_by_notice_ = false;  // failed for a peer's notice: that peer told every rank

  // Parked(): what the last Advance found, and the links it waits to open.
  bool parked_ = false;
  std::vector<int> gated_sends_;
  std::vector<int> gated_recvs_;
  // Shared with the requests' callbacks, which may run after the task is gone (a given-up
  // receive is cancelled at op_timeout).
  struct News {
    std::atomic<bool> raised{false};
    transport::CompletionCallback wake;  // the pipeline thread's (TaskContext::wake)
  };
  std::shared_ptr<News> news_ = std::make_shared<News>();
  transport::CompletionCallback wake_on_news_;
};

// CUDA's answer for an event: true when done, false when pending; errors become a status.
absl::StatusOr<bool> EventDone(cudaEvent_t event);
absl::Status CudaStatus(cudaError_t err, const char* what);

}  // namespace ucclzip::pipeline
