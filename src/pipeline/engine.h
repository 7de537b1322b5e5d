// The pipeline engine of one communicator: turns calls (a Send, a Recv or a collective, each a
// schedule: schedule.h) into tasks (operation_task.h) and runs them on its own thread, which advances every task without blocking and
// sleeps when none can move (woken by transport completions; polling while GPU work is pending).
//
// A call is prepared on the caller's thread (checked, its stream's position recorded) and then
// submitted; a group submits many at once, after all their stream positions are recorded, so
// that a group's receives and sends on one stream cannot wait for each other.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <list>
#include <optional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "pipeline/compression_policy.h"
#include "pipeline/device_slots.h"
#include "pipeline/host_codec_jobs.h"
#include "pipeline/notices.h"
#include "pipeline/operation_task.h"
#include "pipeline/stream_flags.h"
#include "pipeline/transport_lanes.h"

namespace ucclzip::pipeline {

// The most device_slots a communicator takes: far beyond any memory's worth of blocks, and far
// enough below INT_MAX that the places per peer (device_slots plus a ring's few blocks) fit an int.
inline constexpr int kMaxDeviceSlots = 1 << 16;

// True for the values a CompressionMode may hold; the options and every call are checked with it.
constexpr bool IsValidCompressionMode(CompressionMode mode) {
  return static_cast<uint8_t>(mode) <= static_cast<uint8_t>(CompressionMode::kOff);
}

// One operation as the caller made it, with the schedule the collectives layer built for it.
struct Call {
  Schedule schedule;
  const void* input = nullptr;
  void* output = nullptr;
  DataType dtype = DataType::kRaw;
  cudaStream_t stream = nullptr;
  std::optional<CompressionMode> compression;  // unset: the communicator's default
  uint64_t tensor_id = 0;
  absl::Duration timeout = absl::InfiniteDuration();
  // Not OK: the call's own checks refused it (bad arguments on this rank). It still takes its
  // places on its links, as a call that fails later does, and fails with this status: its
  // peers' matching calls took theirs, and this rank's next call must pair with their next
  // one, not with the messages meant for this one.
  absl::Status refused;
};

class Engine {
 public:
  // `cpu_codec_threads` code host buffers' blocks (host_codec_jobs.h).
  Engine(TransportLanes& lanes, const CommunicatorOptions& options, std::unique_ptr<HostCodecThreads> cpu_codec_threads);
  // Fails what is still pending and stops the thread (Stop), then fails the callers' Operations
  // of the tasks it left. Call it after the transports have been destroyed, or shut down with
  // every transport request completed.
  ~Engine();
  // Fails every task and stops the pipeline thread once its tasks are done, or after kStopGrace
  // if some are not: call it after the transports have shut down. A task left then waits on a
  // transport request that a drain which ran out of time left to the transport's destruction
  // (UCX may still hold its buffers until the worker is gone); the caller destroys the
  // transports, which completes those requests, and then the engine. Before it returns, the
  // pipeline's own GPU work is done and the callers' streams that those tasks held are let go
  // (LetGoOfStreams): destroying the transports frees pinned memory, which may wait for the
  // device to idle, and a held stream idles only once let go.
  void Stop();
  // Fails every task, now and later, with `why` (Communicator::Abort): those the transports'
  // abort does not reach too, a world of one's and copies to this rank itself. Any thread.
  void Abort(const absl::Status& why);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Checks the call, records its stream position and creates its request. Caller's thread.
  // Takes the call's schedule only on success. A refused call (Call::refused) is checked only
  // for what its places on its links need (type, peers, block count).
  absl::StatusOr<OperationSpec> Prepare(Call& call);
  // A call refused before it could take its places on its links to `peers` (its schedule could
  // not be built or prepared): each such link counts it. Every envelope carries its link's count
  // (Envelope::unplaced, as it stood at its call's place in this rank's order:
  // OperationSpec::unplaced), and a receiver whose own count differs fails the block as out of
  // step: where the peer's matching call did take its places, this rank is a call behind it
  // there, and its next call would pair with the messages of the peer's earlier one and could
  // complete with their data. Calls refused alike on both sides keep the counts equal.
  // A collective refused so also counts among the collective calls (Schedule::ordinal), and
  // tells every peer so by a notice (notices.h), for its peers may wait for it.
  struct UnplacedCall {
    std::vector<int> peers;
    Call call;  // what was called, its schedule's steps aside; its status is call.refused
    // In a group: the group's calls before it, transfers to this rank itself aside
    // (IsOrWasSelfTransfer): it takes its place among them at GroupEnd, when they take theirs,
    // as in the order the calls were made (a call of another thread posted meanwhile comes
    // before the whole group, as on its peers).
    size_t calls_before = 0;
  };
  // Queues prepared calls, and counts the calls among them refused before they took their places
  // (`unplaced`, in a group's order); the queued calls' streams then wait for them, or the calls
  // that cannot hold their streams are waited for here (stream_order.h).
  void Submit(std::vector<OperationSpec> specs, std::vector<UnplacedCall> unplaced = {});
  // Completes prepared calls that will never be submitted with `why` (their streams were never
  // held).
  static void Discard(std::vector<OperationSpec> specs, const absl::Status& why);

  CommunicatorStats stats() const;

  // Tests: every link's sequences start at `first` instead of 0 (before any call, the same on
  // every rank), so that a test plays the wrap-around of the transport's 20-bit sequences
  // (transport/message_tag.h) without a million calls first.
  void StartSequencesAt(uint32_t first);

 private:
  absl::Status EnsureDevice(int device);
  // Gives the tasks their places on their links and hands them to the pipeline thread; the
  // unplaced calls are counted among them, and the collectives among those take their ordinals
  // (in their schedules).
  void Queue(std::vector<std::unique_ptr<OperationTask>> tasks, std::vector<UnplacedCall>& unplaced);
  // Tells every peer that the collective `refused`, its ordinal taken, was refused before it
  // took its places (UnplacedCall).
  void TellUnplaced(const Call& refused);
  void Loop();
  // Completes the task's request and releases its stream, once.
  void Report(OperationTask& task);
  // Raises the task's done flag and gives back its hold on the caller's stream, once.
  void LetGoOfStream(OperationTask& task);
  // After the pipeline thread: waits for the GPU work of the engine's own streams (the local
  // copies', the slots') and the host codec jobs, then lets go of the streams of the tasks left.
  void LetGoOfStreams();
  void Wake();
  // Busy-polls for a wake-up for up to wait_spin (pipeline thread, before it sleeps).
  void SpinForWake() const;

  TransportLanes& lanes_;
  const CommunicatorOptions options_;
  const int rank_;

  mutable absl::Mutex mutex_;
  std::vector<std::unique_ptr<OperationTask>> submitted_ ABSL_GUARDED_BY(mutex_);
  uint64_t submitted_count_ ABSL_GUARDED_BY(mutex_) = 0;  // numbers the tasks, in submission order
  std::vector<uint32_t> next_send_sequence_ ABSL_GUARDED_BY(mutex_);
  std::vector<uint32_t> next_recv_sequence_ ABSL_GUARDED_BY(mutex_);
  std::vector<absl::Status> recv_out_of_step_ ABSL_GUARDED_BY(mutex_);
  std::vector<uint16_t> unplaced_ ABSL_GUARDED_BY(mutex_);  // per link, the UnplacedCalls (wrapping)
  bool any_unplaced_ ABSL_GUARDED_BY(mutex_) = false;      // set once unplaced_ is not all zero
  // Collective calls so far, in the order they took their places (refused ones included): the
  // next one's Schedule::ordinal. Counted as places are taken, not as calls are made, since
  // threads of one rank may make calls in another order than they post them (in a group).
  uint32_t collective_calls_ ABSL_GUARDED_BY(mutex_) = 0;
  // Pipeline thread: envelopes a look took before their receive was posted (TaskContext).
  std::map<std::pair<int, uint32_t>, std::array<uint8_t, kEnvelopeBytes>> early_envelopes_;
  // The notices of collectives refused before they took their places, until sent.
  std::vector<std::unique_ptr<SentNotice>> unplaced_notices_ ABSL_GUARDED_BY(mutex_);
  bool wake_ ABSL_GUARDED_BY(mutex_) = false;
  // wake_, readable without the mutex, for the spin before sleep; wake_ alone decides.
  std::atomic<bool> woken_{false};
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status aborted_ ABSL_GUARDED_BY(mutex_);  // Abort's
  CommunicatorStats published_stats_ ABSL_GUARDED_BY(mutex_);
  // Device resources, created on the first device (or streamed) call, on its device.
  int device_ ABSL_GUARDED_BY(mutex_) = -1;
  StreamFlags* flags_ = nullptr;  // the device's, for the process's life (stream_flags.h)
  // Per peer (null for this rank): slots of one peer never wait for another's.
  std::vector<std::unique_ptr<DeviceSlotPool>> send_slots_;
  std::vector<std::unique_ptr<DeviceSlotPool>> recv_slots_;
  cudaStream_t copy_stream_ = nullptr;

  // Pipeline thread only.
  std::unique_ptr<HostCodecThreads> cpu_codec_threads_;
  // Runs the CPU codec with cpu_codec_threads_, off this thread; gone before them.
  std::unique_ptr<HostCodecJobs> host_jobs_;
  CompressionPolicy policy_;
  SendWindow send_window_;
  PeerPlaces host_frames_ahead_;
  PeerPlaces host_receive_blocks_;
  CommunicatorStats stats_;
  std::list<std::unique_ptr<OperationTask>> active_;
  std::thread thread_;
};

// How long a stopping pipeline thread still waits for its tasks after the transports shut down:
// what they can then still wait for (host codec jobs, GPU work of their own) takes milliseconds.
inline constexpr absl::Duration kStopGrace = absl::Seconds(1);

}  // namespace ucclzip::pipeline
