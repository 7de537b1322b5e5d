// A communicator: a group of ranks that exchange (compressed) tensors over UCX.
//
// Send and Recv follow NCCL's stream semantics for device buffers: the call returns at once;
// the input is read only after the work already queued on `stream`, and later work on
// `stream` sees the transfer done (for a Recv, the data; for a Send, the input free to reuse).
// Where the stream cannot safely wait for the transfer (UCX moves CUDA memory itself, the
// legacy default stream, too few hardware queues, CUDA MPS: docs/PIPELINE.md, "Stream order"),
// the call keeps the same order by returning only once done.
// Host buffers use the CPU codec (on a thread of the communicator's); with a null stream
// they are ordered by the returned Operation alone, with a created one by holding it, as
// device buffers are (on cudaStreamLegacy, or on the direct path, the call returns once done
// instead).
// Every call also returns an Operation to test or wait on. A send to `peer` matches the
// receive from this rank that `peer` posts in the same position, with the same count and type;
// a receive whose count or type differs fails with a status that names both.
// Positions are taken by calls, not by successes: a call that fails, even for its own bad
// arguments, still takes its position on each link it would have used, and the peer's matching
// call fails at once (Aborted, naming this rank), so a retried call pairs with the peer's next
// one. After a mismatched receive, the link's later receives from that peer fail as out of step,
// while that peer's sends, which only deliver, still succeed: the ranks must agree to recreate
// the communicator (docs/PIPELINE.md, "Errors").
//
// This header holds what creates and ends one. Creation is collective: every rank calls
// Create with the same world size and token, and it returns once all ranks have met at rank 0
// and connected their UCX endpoints. Destruction is collective too: it waits (bounded by the
// shutdown timeout) for the other ranks, so that nothing in flight is lost, then closes
// everything; a rank whose peers are gone still shuts down within that timeout.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ucclzip/bootstrap.h"
#include "ucclzip/types.h"

namespace ucclzip {

namespace internal {
struct CommunicatorAccess;
struct OpenGroupMark;
}
namespace transport {
class Request;
}
namespace pipeline {
struct Call;
}

// Whether a message is compressed. kAuto compresses a block of at least `min_compress_bytes` of
// a compressible type (IsCompressibleType: bf16, fp16, fp32, fp8) only where the compressed
// pipeline is expected to finish first, from the link and codec rates it measures as it runs
// (docs/PIPELINE.md, "Compress or not"), and stops (for a while) for a tensor whose last block did not shrink by 5 %. kOn compresses
// every block of those types; other types, fp64 included, never are.
enum class CompressionMode : uint8_t { kAuto = 0, kOn = 1, kOff = 2 };

// Every field's default can also come from a UCCLZIP_* environment variable, for a field the
// program leaves at the value written here (docs/CONFIGURATION.md lists them).
struct CommunicatorOptions {
  // An operation that makes no progress for this long fails with a status naming its peer;
  // that peer is then treated as failed.
  absl::Duration op_timeout = absl::Seconds(60);
  // How long destruction waits for the other ranks before closing regardless.
  absl::Duration shutdown_timeout = absl::Seconds(10);
  // Messages travel in blocks of this size; every rank must use the same. Blocks exist so that a
  // staged message overlaps its copies with the network. Unset: 4 MB, or 256 MB where UCX
  // takes CUDA memory, which pipelines a large message itself while every block costs it a
  // rendezvous (one-way 256 MB device send/recv over cuda_ipc on the H200: 130 GB/s in blocks
  // of 4 MB, 544 GB/s in one of 256 MB; benchmarks/RESULTS.md, run s7-1). options() returns
  // the size in effect.
  std::optional<size_t> block_bytes;
  // Pinned host memory for staging device buffers when UCX cannot take them (allocated once,
  // on first use, half for sends and half for receives); at least one block per direction.
  // Where UCX takes CUDA memory it is allocated too, on the first device operation, for buffers
  // that reuse a freed buffer's addresses (docs/TRANSPORT.md, "Known gaps").
  size_t staging_pool_bytes = size_t{64} << 20;
  // Whether the transport's progress thread sleeps while staging copies run, woken by each
  // copy's completion, instead of polling the copies. Polling keeps one core busy per
  // transport lane for the whole of a staged transfer (with 2 lanes and 4 ranks on one host,
  // up to 8 such threads beside UCX's own TCP copies); sleeping gives that CPU back. It costs
  // a CUDA host function per copy (which also holds the stream's next copy until it has run)
  // and, once the thread has found nothing to do for 200 us and gone to sleep, a thread
  // wake-up before it sees a copy done. On since H200 run s6-1, where it made the staged
  // 4-rank broadcast chain over tcp 1.16x (uncompressed) and 1.25x (compressed) faster
  // (docs/TRANSPORT.md, "Copy wake-ups").
  bool staging_copy_wakeups = true;
  // Independent UCX transports ("lanes": each its own UCX context, worker, endpoints, progress
  // thread and staging pool) per communicator, 1 to 8. Rank r sends on lane r % N and receives
  // from peer p on lane p % N, so that with 2 a ring or chain neighbour's incoming and outgoing
  // bytes are moved by different threads (docs/TRANSPORT.md, "Lanes"). Every rank must use the
  // same. Costs N times the staging memory. The default, 2, gave 1.65-1.67x the uncompressed
  // 4-rank allreduce and 1.47-1.84x the broadcast chain of 1 lane on the H200
  // (benchmarks/RESULTS.md, run s5-2); 1 is one transport, one thread.
  int transport_lanes = 2;
  // UCX transports (UCX_TLS syntax: "tcp", "posix,sysv", "rc,cuda_copy", ...); empty keeps
  // UCX's choice, which honours UCX_TLS.
  std::string ucx_transports;
  // How long a waiting caller busy-polls its operation before it sleeps, and the pipeline
  // thread its next event. Polling saves the ~10 us of a sleeping thread's wake-up on small
  // messages, but only pays where cores are free: unset means 50 us on machines of 8 or more
  // cores, no polling below that; 0 or less never polls.
  std::optional<absl::Duration> wait_spin;

  // Whether an operation on a stream keeps NCCL's stream order: later work queued on it waits
  // until the operation is done. The stream itself waits where device memory is staged; where
  // UCX moves CUDA memory itself (device_memory_direct()), no stream can be held (too few
  // hardware queues, CUDA MPS), or the stream is the legacy default stream (null for device
  // memory, or cudaStreamLegacy), the call instead returns only once the operation is done,
  // since a held stream could hang it there (docs/PIPELINE.md, "Stream order"). When false the stream
  // is not held: the caller must Wait() on the returned Operation before the stream touches the
  // outputs or reuses an input.
  // That is for tools that synchronise the whole device after every kernel launch, such as
  // compute-sanitizer's memcheck: a held stream waits for the pipeline, whose next kernel
  // launch waits for the device to drain, so neither ever finishes.
  bool hold_caller_stream = true;

  // --- Send/Recv pipeline (docs/PIPELINE.md) ---
  // Default compression of Send; a call's SendOptions may override it.
  CompressionMode compression = CompressionMode::kAuto;
  // Messages are cut into pipeline blocks of at most this many bytes (rounded down to whole
  // elements), each its own frame, so that consecutive blocks overlap. Every rank must use the
  // same, and at least 8 (one element of every type). 16 MB was best of 8 to 256 MB on the H200
  // (benchmarks/RESULTS.md): smaller blocks pay the codec's fixed cost too often, larger ones
  // overlap too little.
  size_t pipeline_block_bytes = size_t{16} << 20;
  // An operation of less than 4 pipeline blocks is cut into 4 blocks (a quarter of its bytes,
  // rounded up to 64 KiB) where each keeps at least this many bytes: a message of one block
  // overlaps nothing of its encode and decode with the wire. Every rank must use the same (at
  // least 8); a value of pipeline_block_bytes or more gives every operation blocks of that size.
  size_t min_pipeline_block_bytes = size_t{4} << 20;
  // An allreduce of at most this many bytes runs by recursive doubling: log2(n) exchanges of the
  // whole vector between pairs of ranks (two more where n is not a power of two), where the
  // ring takes 2(n-1) hops of an n-th of it each; small allreduces are bound by their hops. The
  // two sum in different orders, so a count on either side of this size gives bits of its own
  // algorithm, each fixed (docs/COLLECTIVES.md). Every rank must use the same; 0 runs every
  // allreduce as a ring.
  size_t recursive_doubling_bytes = size_t{256} << 10;
  // A broadcast of at most this many bytes goes down a binomial tree (ceil(log2 n) hops, the
  // root sending a copy per level), a larger one along the chain (n - 1 hops, pipelined by
  // blocks: docs/COLLECTIVES.md). From 4 ranks up a chain of more than 2 MiB is cut into several
  // blocks, and then outran the tree. Every rank must use the same; 0 sends every broadcast
  // along the chain.
  size_t tree_broadcast_bytes = size_t{2} << 20;
  // kAuto leaves pipeline blocks smaller than this uncompressed.
  size_t min_compress_bytes = size_t{256} << 10;
  // How many pipeline blocks may be on their way to one peer at once (a plain run of a Send's
  // consecutive uncompressed blocks, one transfer, counting as one; a chain's blocks go one at a
  // time whatever this says, docs/PIPELINE.md, "Block size"). Each peer has this many
  // plus 2 device codec slots (workspace, frame buffer and stream for one block) for sends, in
  // which the next frames encode while those blocks are on the wire, and this many plus 2 for
  // receives (what keeps rings moving; plus 4 from the predecessor, rank - 1, in communicators
  // of 3 or more ranks), allocated on the first device operation: bounded memory, none
  // allocated after that, about 448 MB per peer with the defaults and 128 MB more for the
  // predecessor (docs/PIPELINE.md, "Resources"). Host blocks are bounded alike: this many plus
  // 2 (predecessor: plus 4) receive blocks per peer hold buffers at once. 1 to 65536.
  int device_slots = 2;
  // Where UCX stages device memory (a host-only UCX), the receive slots of the peer whose blocks
  // this rank forwards (its predecessor: the middle of a broadcast chain, every rank of an
  // allgather ring) also hold a pinned host frame each, in which those blocks land, leave from
  // and are copied to the device beside that: the forward waits for no copy through the GPU
  // and makes none. That pins (device_slots + 4) pipeline blocks per communicator of 3 or more
  // ranks, 96 MB with the defaults. false forwards through the GPU instead.
  bool forward_from_host = true;
  // Threads of the CPU codec, which codes the blocks of host buffers, the communicator's host
  // codec thread included; 0 means DefaultHostCodecThreads() (include/ucclzip/codec.h): half
  // the cores, at most 8. One block's frame is spread over them, so the host path codes about
  // this many times faster than one core, with the same bytes on the wire.
  int cpu_codec_threads = 0;
};

// Per-call settings of a Send.
struct SendOptions {
  // Unset: the communicator's compression mode.
  std::optional<CompressionMode> compression;
  // The operation fails if it has not completed this long after the call, once nothing of it
  // still uses the caller's buffers: blocks UCX has begun to send finish first, or fail at
  // op_timeout (docs/PIPELINE.md, "Known limits").
  absl::Duration timeout = absl::InfiniteDuration();
  // Names the tensor for kAuto's memory of what compressed; 0 uses the buffer address and count.
  uint64_t tensor_id = 0;
};

// Per-call settings of a Recv (the sender chooses compression; the receiver reads it from the
// message).
struct RecvOptions {
  absl::Duration timeout = absl::InfiniteDuration();
};

// Per-call settings of a collective. Compression is chosen by each sender per block; every
// rank may pass its own mode, and the results are bit-identical whatever they choose.
struct CollectiveOptions {
  // Unset: the communicator's compression mode.
  std::optional<CompressionMode> compression;
  // The operation fails if it has not completed this long after the call, once nothing of it
  // still uses the caller's buffers: blocks UCX has begun to send finish first, or fail at
  // op_timeout (docs/PIPELINE.md, "Known limits").
  absl::Duration timeout = absl::InfiniteDuration();
  // Names the tensor for kAuto's memory of what compressed; 0 uses the buffer address and count.
  uint64_t tensor_id = 0;
};

// Counters of one communicator's Send/Recv since creation, on this rank. Messages, payload
// bytes and transfer time count the calls that completed; wire bytes and transport messages
// count what was handed to the transport.
struct CommunicatorStats {
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t payload_bytes_sent = 0;      // user bytes
  uint64_t wire_bytes_sent = 0;         // bytes handed to the transport, envelopes included
  uint64_t payload_bytes_received = 0;
  uint64_t wire_bytes_received = 0;
  uint64_t blocks_compressed = 0;       // blocks sent as frames
  uint64_t blocks_bypassed = 0;         // blocks sent as plain bytes
  // Messages handed to the transport and received from it: every block's envelope and parts,
  // where a plain run (consecutive plain blocks of one Send, docs/PIPELINE.md) is one part.
  uint64_t transport_messages_sent = 0;
  uint64_t transport_messages_received = 0;
  double codec_seconds = 0;             // CPU codec time, or GPU encode/decode from launch to done
  double transfer_seconds = 0;          // from first post to last completion, summed over messages
  // Device bytes sent or received through pinned host memory although UCX takes CUDA memory,
  // because their buffer reuses the addresses of a freed one that went to a peer directly
  // (docs/TRANSPORT.md, "Known gaps"): nonzero means such buffers move at the staged rate.
  uint64_t recycled_device_bytes_staged = 0;
  // Device blocks this rank forwarded (rings, chains) from pinned host memory, where they
  // landed, rather than through the GPU: where UCX stages device memory, every forwarded block.
  uint64_t blocks_forwarded_from_host = 0;
  // Payload over wire bytes of what this rank sent; 1 when nothing was sent.
  double send_ratio() const {
    return wire_bytes_sent == 0 ? 1.0 : static_cast<double>(payload_bytes_sent) / wire_bytes_sent;
  }
};

// Handle of one or more posted operations (a Send, a Recv, or a whole group).
class Operation {
 public:
  Operation() = default;  // an empty operation: done, OK
  // True once every operation it covers has completed, successfully or not.
  bool Test() const;
  // The first error among them, or OK; DeadlineExceeded if one is still pending after
  // `timeout` (the operations go on). With a timeout above zero, FailedPrecondition at once
  // where the call is still queued in a group that this thread has opened and not ended: it
  // starts only at that GroupEnd, which this thread cannot reach while it waits (another
  // thread may wait for it).
  absl::Status Wait(absl::Duration timeout = absl::InfiniteDuration()) const;

 private:
  friend class Communicator;
  explicit Operation(std::vector<std::shared_ptr<transport::Request>> parts,
                     std::shared_ptr<const internal::OpenGroupMark> group = nullptr)
      : parts_(std::move(parts)), group_(std::move(group)) {}
  std::vector<std::shared_ptr<transport::Request>> parts_;
  std::shared_ptr<const internal::OpenGroupMark> group_;  // the open group it is queued in, if any
};

struct CommunicatorConfig {
  BootstrapConfig bootstrap;
  CommunicatorOptions options;
};

class Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const CommunicatorConfig& config);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  // The options in force: the program's, with the UCCLZIP_* defaults of the environment
  // applied (docs/CONFIGURATION.md). A field whose unset or 0 means a choice made at run time
  // (wait_spin, cpu_codec_threads) keeps that value; the log at creation names the number of
  // CPU codec threads chosen.
  const CommunicatorOptions& options() const;

  // True when device buffers go to UCX directly (a CUDA-enabled UCX); false when they are
  // staged through pinned host memory.
  bool device_memory_direct() const;

  // Sends `count` elements of `dtype` at `buf` (host or device memory, any alignment) to
  // `peer`. The buffer must stay valid until the operation completes, and, if it fails while
  // `peer` is still alive, until this communicator has been destroyed: UCX without peer error
  // handling (shared memory, TCP) cannot take back a send, and serves the peer's later read of
  // it (docs/TRANSPORT.md, "Faults"); the same holds for a failed collective's buffers. `peer`
  // may be this rank itself inside a group, as in NCCL: the group's k-th Send to itself pairs
  // with its k-th Recv from itself (same count, type, memory and stream) into a copy; outside a
  // group, or left without a partner, such a call fails with InvalidArgument.
  Operation Send(const void* buf, size_t count, DataType dtype, int peer, cudaStream_t stream,
                 const SendOptions& options = {});
  // Receives exactly `count` elements of `dtype` from `peer` into `buf`.
  Operation Recv(void* buf, size_t count, DataType dtype, int peer, cudaStream_t stream,
                 const RecvOptions& options = {});

  // --- Collectives (docs/COLLECTIVES.md): NCCL's arguments, order and in-place rules. Every
  // rank calls the same collective with the same count, type, operator and root, in the same
  // order; a rank that disagrees gets an error naming both sides, and the others fail at once
  // too, except where a rank hears from none of the ranks it waits for (a broadcast whose ranks
  // disagree on the root, say): those wait for the operation timeout (docs/COLLECTIVES.md,
  // "Errors"). The order of reduction is fixed, so results are identical from run to run and
  // with or without compression.

  // recvbuff[i * sendcount, (i + 1) * sendcount) = rank i's sendbuff. In place when
  // sendbuff == recvbuff + rank * sendcount.
  Operation AllGather(const void* sendbuff, void* recvbuff, size_t sendcount, DataType dtype, cudaStream_t stream,
                      const CollectiveOptions& options = {});
  // recvbuff = op over ranks of their sendbuff[rank * recvcount, (rank + 1) * recvcount). In
  // place when recvbuff == sendbuff + rank * recvcount.
  Operation ReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, DataType dtype, ReduceOp op,
                          cudaStream_t stream, const CollectiveOptions& options = {});
  // recvbuff = op over ranks of their sendbuff (count elements each). In place when equal.
  Operation AllReduce(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, ReduceOp op,
                      cudaStream_t stream, const CollectiveOptions& options = {});
  // Every rank's recvbuff = root's sendbuff (read on the root only). In place when equal.
  Operation Broadcast(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, int root,
                      cudaStream_t stream, const CollectiveOptions& options = {});
  // recvbuff on `root` = op over ranks of their sendbuff (count elements each); recvbuff is
  // neither read nor written elsewhere and may be null there. In place when sendbuff == recvbuff.
  Operation Reduce(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, ReduceOp op, int root,
                   cudaStream_t stream, const CollectiveOptions& options = {});

  // Between GroupStart and GroupEnd, Send, Recv and the collectives only queue; GroupEnd posts
  // them all at once, so that many tensors travel as one pipelined stream, and returns one
  // Operation covering them (the calls' own Operations work too). Per thread. Groups nest as
  // in NCCL: only the outermost GroupEnd posts, an inner one returns a done Operation; a
  // GroupEnd without a GroupStart returns a failed one (FailedPrecondition).
  void GroupStart();
  Operation GroupEnd();

  CommunicatorStats stats() const;

  // Fails every pending and future operation and drops the connections, so that the peers'
  // operations fail too. For error paths; the communicator must still be destroyed, and the
  // buffers of failed sends kept until it has been (Send).
  void Abort();

 private:
  friend struct internal::CommunicatorAccess;
  struct Impl;
  Operation Submit(pipeline::Call call);
  static Operation Failed(const absl::Status& status);
  // Failed, and within an open group also covered by GroupEnd's Operation.
  Operation Refused(const absl::Status& status);
  // Refused, for a call that could not take its places on its links to `peers` (a collective
  // whose schedule cannot be built, a call the engine cannot prepare even as refused): the
  // links count it (pipeline::Engine::UnplacedCall), so that where a peer's matching call did
  // take its places, the next pairing fails as out of step instead of delivering that call's
  // messages to this rank's next one.
  // A collective counts among the collective calls too (pipeline::Schedule::ordinal). `call`
  // is what was called (its status is call.refused, or else `status`).
  Operation RefusedUnplaced(const pipeline::Call& call, const absl::Status& status, const std::vector<int>& peers);
  // RefusedUnplaced for a collective whose schedule cannot be built (`call`'s has no steps):
  // every link counts it.
  Operation RefusedUnplacedCollective(const pipeline::Call& call);
  std::vector<int> OtherRanks() const;
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ucclzip
