// ucclzip's lossless codec for floating-point tensors.
//
// Each element is split into one symbol byte (the exponent, plus the neighbouring bits that are
// not uniform) and a raw remainder (sign and low mantissa). Symbols are rANS-coded with one
// frequency table per tensor, and one per tile of about 64K elements where the tile's own
// statistics pay for its table; the remainder is stored as one contiguous raw plane whose place in
// the frame is known before coding starts, so a sender can ship it while the symbols are still
// being coded (split-send). Frames are self-describing; docs/FRAME_FORMAT.md specifies them.
//
// The CPU and GPU implementations write identical bytes for identical input and read each
// other's frames. Every decoder treats the frame as untrusted input.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ucclzip/types.h"

namespace ucclzip {

struct CodecOptions {
  // False stores the tensor uncompressed (still framed).
  bool compress = true;
  // Symbols each of the 32 interleaved rANS lanes codes: a power of two in [32, 4096], or 0 to
  // choose from the size. Longer lanes code closer to the entropy; shorter ones cut latency.
  uint32_t lane_symbols = 0;
};

enum class FrameMode : uint8_t { kStored = 0, kSplitStored = 1, kSplitConstant = 2, kSplitRans = 3 };

// What a frame's header says, after validation.
struct FrameInfo {
  DataType dtype;
  FrameMode mode;
  uint64_t count;
  uint64_t frame_bytes;
  uint64_t raw_offset;
  uint64_t raw_bytes;
  uint64_t coded_offset;
  uint64_t coded_bytes;
  uint32_t lane_symbols;
};

// The parts of a frame's layout that are fixed before the data is seen.
struct FramePlan {
  bool split;                // false: a stored frame, no split stage
  uint64_t raw_offset;       // the raw plane: final once the split stage has run
  uint64_t raw_bytes;
  uint64_t coded_offset;     // header, table and index lie before raw_offset; symbols after
  uint64_t max_frame_bytes;  // capacity the output buffer needs
  uint32_t lane_symbols;
  uint32_t num_chunks;
};

// Validates the options against the type and count; errors name both.
absl::StatusOr<FramePlan> PlanFrame(DataType dtype, uint64_t count, const CodecOptions& options = {});

// Output capacity that suffices for any options: the stored size plus at most 640 bytes of
// header, table, the indexes' first entries and alignment, and 0.2 % of index (0.4 % for fp8).
// UINT64_MAX for an invalid type or more elements than one frame holds (PlanFrame refuses both).
uint64_t MaxFrameBytes(DataType dtype, uint64_t count);

// The largest head (header, table and index: PlanFrame's raw_offset) of a frame of at most
// `count` elements, for any options. Not PlanFrame(count)'s own: the default lane length
// shrinks with the count, so a shorter tensor may have more chunks and a longer index.
// UINT64_MAX where MaxFrameBytes is.
uint64_t MaxFrameHeadBytes(DataType dtype, uint64_t count);

// Size of the fixed header; its frame_bytes field is final once compression has completed.
inline constexpr size_t kFrameHeaderBytes = 64;
inline constexpr size_t kFrameBytesFieldOffset = 16;

// Reads and checks a frame header (magic, version, type, mode, sizes and offsets against
// `available_bytes`).
absl::StatusOr<FrameInfo> ReadFrameInfo(const void* frame, size_t available_bytes);

// --- CPU reference --------------------------------------------------------------------------

namespace internal {
struct HostCodecThreadsAccess;
}

// Threads that the CPU codec spreads one frame's work over: the chunks of a frame are coded
// independently once its model is built, so N threads code one frame about N times as fast.
// Created once and reused: no call starts a thread. The frame does not depend on the thread
// count. One call at a time uses the threads; concurrent calls take turns.
class HostCodecThreads {
 public:
  // `threads` in all, the calling thread included (threads - 1 workers start here); 0 means
  // DefaultHostCodecThreads(). At most 256.
  static absl::StatusOr<std::unique_ptr<HostCodecThreads>> Create(int threads = 0);
  ~HostCodecThreads();
  HostCodecThreads(const HostCodecThreads&) = delete;
  HostCodecThreads& operator=(const HostCodecThreads&) = delete;

  int threads() const;

 private:
  friend struct internal::HostCodecThreadsAccess;
  struct State;
  explicit HostCodecThreads(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Half the machine's hardware threads, at least 1 and at most 8: a share that leaves the other
// half to the application and to other ranks on the same host, and beyond which one frame's
// memory traffic gains little.
int DefaultHostCodecThreads();

// Compresses `count` elements at `input` (any alignment) into `frame`. Returns the frame size.
// With `threads`, the work is spread over them; the frame is the same bytes either way.
absl::StatusOr<uint64_t> CompressHost(const void* input, uint64_t count, DataType dtype, void* frame,
                                      uint64_t frame_capacity, const CodecOptions& options = {},
                                      HostCodecThreads* threads = nullptr);

// Decompresses a frame of `frame_bytes` bytes into `output`, which holds exactly `count`
// elements of `dtype`; a frame of another type or count is an error. With `threads`, the work
// is spread over them; the output and any error are the same either way.
absl::Status DecompressHost(const void* frame, uint64_t frame_bytes, DataType dtype, void* output,
                            uint64_t count, HostCodecThreads* threads = nullptr);

// Empirical order-0 entropy of a tensor, and the ratios it bounds.
struct EntropyReport {
  double exponent_bits;      // entropy of the IEEE exponent field
  double symbol_bits;        // entropy of the codec's symbol byte
  double bound_ratio;        // ratio if the exponent were coded at exactly its entropy, rest raw
  double symbol_bound_ratio; // the same for the codec's symbol byte
};
// A null input or an invalid type measures nothing: the report of an empty tensor (ratios 1).
EntropyReport MeasureEntropy(const void* input, uint64_t count, DataType dtype);

// --- GPU ------------------------------------------------------------------------------------

// Device workspace and launch state for compressing and decompressing on one stream at a time.
// All device memory is allocated at creation; Compress and Decompress never allocate and never
// synchronise the host.
class GpuCodec {
 public:
  // Sized for tensors of up to `max_count` elements of any type, on the current device.
  static absl::StatusOr<std::unique_ptr<GpuCodec>> Create(uint64_t max_count);
  ~GpuCodec();
  GpuCodec(const GpuCodec&) = delete;
  GpuCodec& operator=(const GpuCodec&) = delete;

  uint64_t max_count() const { return max_count_; }

  // Compresses on `stream`. `frame` needs MaxFrameBytes capacity (PlanFrame's
  // max_frame_bytes suffices for the same options). If `split_done` is given it is recorded on
  // `stream` as soon as the raw plane is final. The frame's size is then readable on the device
  // at frame + kFrameBytesFieldOffset once the stream reaches the end of this call.
  absl::Status Compress(const void* input, uint64_t count, DataType dtype, void* frame,
                        uint64_t frame_capacity, cudaStream_t stream, const CodecOptions& options = {},
                        cudaEvent_t split_done = nullptr);

  // Decompresses on `stream`. A malformed frame never causes an out-of-bounds access: the
  // kernel stops and records an error, which StreamStatus reports; `output` is then undefined.
  absl::Status Decompress(const void* frame, uint64_t frame_capacity, DataType dtype, void* output,
                          uint64_t count, cudaStream_t stream);

  // Decompresses on `stream` and combines each element with the caller's as it is decoded:
  // result[i] = decoded[i] op local[i], then divided by `divisor` (1 but on kAvg's last hop,
  // kAvg combining as a sum), with the arithmetic of ReduceOnHost (ucclzip/reduction.h). The
  // bits are those of Decompress followed by that reduction, from one kernel that never writes
  // the decoded elements. For the compressed types (IsCompressibleType), any mode of frame.
  // `result` may be `local` itself (in place); neither may overlap the frame. Errors as for
  // Decompress: StreamStatus reports a malformed frame, and `result` is then undefined, partly
  // combined (so in place, `local` is lost too).
  absl::Status DecompressAndCombine(const void* frame, uint64_t frame_capacity, DataType dtype, const void* local,
                                    void* result, uint64_t count, ReduceOp op, uint32_t divisor, cudaStream_t stream);

  // Waits for `stream`, then returns (and clears) the first error that a Decompress or
  // DecompressAndCombine on it met (or the internal error of a Compress whose output outgrew its
  // proven bound).
  absl::Status StreamStatus(cudaStream_t stream);

  // The same in two halves, for a caller that tracks the stream with its own events:
  // QueueStatusRead queues on `stream`, after the codec's calls, a copy of their error words to
  // pinned host memory; CompletedStatus, once `stream` has passed that copy (an event recorded
  // after it has fired), reads them there with no trip to the GPU, which on a GPU that several
  // processes time-slice waits for this process's next slice. Only an error, to clear it, waits
  // for `stream`; so does a CompletedStatus with a call made since the last QueueStatusRead.
  absl::Status QueueStatusRead(cudaStream_t stream);
  absl::Status CompletedStatus(cudaStream_t stream);

 private:
  struct Workspace;
  GpuCodec(uint64_t max_count, std::unique_ptr<Workspace> workspace);
  // Queues the copy of the device's error words to the pinned host words on `stream`.
  absl::Status CopyStatusWords(cudaStream_t stream);
  uint64_t max_count_;
  std::unique_ptr<Workspace> workspace_;
  uint64_t calls_ = 0;               // calls launched
  uint64_t status_read_after_ = 0;  // calls_ at the last QueueStatusRead
};

// Turns a decoder's error word into a status; `context` names the operation. The word holds the
// error code in its low 8 bits and a detail in its upper 24, which the message names: the chunk
// of a bad index or stream; for a bad table 0 (the global table) or t + 1 (tile t's own table);
// for a frame of another version its version (0: not read).
absl::Status DecodeErrorToStatus(uint32_t error_word, absl::string_view context);

}  // namespace ucclzip
