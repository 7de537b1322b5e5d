// GpuCodec: owns the device workspace, checks arguments, and picks the launcher for a type.
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "codec/dtype_dispatch.h"
#include "codec/frame_checks.h"
#include "codec/gpu/launch.h"
#include "ucclzip/codec.h"

namespace ucclzip {

using codec::gpu::ChunkScanState;
using codec::gpu::DeviceWorkspace;

struct GpuCodec::Workspace {
  DeviceWorkspace* device = nullptr;
  void* chunk_scan_storage = nullptr;
  uint16_t* scratch = nullptr;
  void* tile_storage = nullptr;  // TileWorkspace's arrays
  ChunkScanState chunk_scan;
  codec::gpu::TileWorkspace tiles{};
  int sm_count = 0;
  bool dependent_launch = false;  // codec::gpu::DependentLaunchAllowed
  // Pinned: the device's encode and decode error words, as QueueStatusRead's copy found them.
  uint32_t* host_errors = nullptr;

  ~Workspace() {
    cudaFree(device);
    cudaFree(chunk_scan_storage);
    cudaFree(scratch);
    cudaFree(tile_storage);
    cudaFreeHost(host_errors);
  }
};

namespace {

absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  // Reported here, so cleared here: CUDA keeps a failed call's error for the thread's next
  // cudaGetLastError, which a later launch's check (ours on the pipeline thread, the caller's
  // after a failed Create) would then take for its own.
  cudaGetLastError();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

constexpr DataType kCompressibleTypes[] = {DataType::kBFloat16, DataType::kFloat16, DataType::kFloat32,
                                           DataType::kFloat8E4M3, DataType::kFloat8E5M2};

// The checks every decode makes of its arguments before anything is launched.
absl::Status CheckDecodeArguments(absl::string_view context, const void* frame, DataType dtype, const void* output,
                                  uint64_t count) {
  if (!IsValidDataType(static_cast<uint8_t>(dtype))) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": invalid data type ", static_cast<int>(dtype)));
  }
  if (frame == nullptr || (count > 0 && output == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": null ", frame == nullptr ? "frame" : "output", " pointer"));
  }
  if (reinterpret_cast<uintptr_t>(frame) % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": the frame buffer must be 16-byte aligned"));
  }
  return absl::OkStatus();
}

// A decode of `count` elements of `dtype` into `output`, its errors recorded in `error_word`.
codec::gpu::DecompressLaunch DecompressLaunchOf(const void* frame, uint64_t frame_capacity, DataType dtype, void* output,
                                                uint64_t count, uint32_t* error_word, int sm_count,
                                                cudaStream_t stream) {
  codec::gpu::DecompressLaunch launch{};
  launch.frame = static_cast<const uint8_t*>(frame);
  launch.frame_capacity = frame_capacity;
  launch.dtype = static_cast<uint8_t>(dtype);
  launch.element_size = static_cast<uint32_t>(ElementSize(dtype));
  launch.splittable = IsCompressibleType(dtype);
  launch.output = static_cast<uint8_t*>(output);
  launch.count = count;
  launch.error_word = error_word;
  launch.sm_count = sm_count;
  launch.stream = stream;
  return launch;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuCodec>> GpuCodec::Create(uint64_t max_count) {
  auto ws = std::make_unique<Workspace>();
  const std::string context = absl::StrCat("create GPU codec for up to ", max_count, " elements");
  int device = 0;
  if (auto s = CudaStatus(cudaGetDevice(&device), context); !s.ok()) return s;
  if (auto s = CudaStatus(cudaDeviceGetAttribute(&ws->sm_count, cudaDevAttrMultiProcessorCount, device), context);
      !s.ok()) {
    return s;
  }
  const uint64_t max_chunks = codec::DivCeil(std::max<uint64_t>(max_count, 1), uint64_t{codec::kLanes} * codec::kMinLaneSymbols);
  if (max_chunks > (1u << 30)) return absl::InvalidArgumentError(absl::StrCat(context, ": too many elements"));
  size_t scan_bytes = 0;
  ChunkScanState::AllocationSize(static_cast<int>(max_chunks), scan_bytes);
  auto alloc = [&](void** p, size_t bytes, const char* what) {
    return CudaStatus(cudaMalloc(p, bytes), absl::StrCat(context, ": cudaMalloc ", what, " (", bytes, " bytes)"));
  };
  if (auto s = alloc(reinterpret_cast<void**>(&ws->device), sizeof(DeviceWorkspace), "workspace"); !s.ok()) return s;
  if (auto s = alloc(&ws->chunk_scan_storage, scan_bytes, "chunk scan"); !s.ok()) return s;
  if (auto s = alloc(reinterpret_cast<void**>(&ws->scratch), std::max<uint64_t>(max_count, 1) * 2, "scratch"); !s.ok()) {
    return s;
  }
  const uint64_t max_tiles = codec::gpu::MaxTiles(std::max<uint64_t>(max_count, 1));
  const size_t tile_bytes = max_tiles * codec::gpu::kTileWorkspaceBytesPerTile;
  if (auto s = alloc(&ws->tile_storage, tile_bytes, "tiles"); !s.ok()) return s;
  ws->tiles = codec::gpu::CarveTileWorkspace(ws->tile_storage, max_tiles);
  if (auto s = CudaStatus(cudaMallocHost(reinterpret_cast<void**>(&ws->host_errors), 2 * sizeof(uint32_t)), context);
      !s.ok()) {
    return s;
  }
  ws->host_errors[0] = ws->host_errors[1] = 0;
  if (auto s = CudaStatus(cudaMemset(ws->device, 0, sizeof(DeviceWorkspace)), context); !s.ok()) return s;
  // The tile histograms start at zero, as the split stage needs them (the tile model re-zeroes
  // them after each call); the rest, so that nothing is ever read uninitialised.
  if (auto s = CudaStatus(cudaMemset(ws->tile_storage, 0, tile_bytes), context); !s.ok()) return s;
  for (cudaError_t err : {codec::gpu::PreloadKernels<codec::Split8>(), codec::gpu::PreloadKernels<codec::Split16>(),
                          codec::gpu::PreloadKernels<codec::Split32>(), codec::gpu::PreloadStoredKernel(),
                          codec::gpu::PreloadTileModelKernel()}) {
    if (auto s = CudaStatus(err, absl::StrCat(context, ": loading the codec kernels")); !s.ok()) return s;
  }
  for (DataType dtype : kCompressibleTypes) {
    const cudaError_t err = codec::VisitCompressibleType(
        dtype, [&]<DataType kType>() { return codec::gpu::PreloadCombineKernels<kType>(); },
        [] { return cudaErrorInvalidValue; });
    if (auto s = CudaStatus(err, absl::StrCat(context, ": loading the decompress-and-combine kernels")); !s.ok()) {
      return s;
    }
  }
  if (auto s = CudaStatus(codec::gpu::DependentLaunchAllowed(&ws->dependent_launch), context); !s.ok()) return s;
  ws->chunk_scan.Init(static_cast<int>(max_chunks), ws->chunk_scan_storage, scan_bytes);
  return std::unique_ptr<GpuCodec>(new GpuCodec(max_count, std::move(ws)));
}

GpuCodec::GpuCodec(uint64_t max_count, std::unique_ptr<Workspace> workspace)
    : max_count_(max_count), workspace_(std::move(workspace)) {}

GpuCodec::~GpuCodec() = default;

absl::Status GpuCodec::Compress(const void* input, uint64_t count, DataType dtype, void* frame,
                                uint64_t frame_capacity, cudaStream_t stream, const CodecOptions& options,
                                cudaEvent_t split_done) {
  const std::string context = absl::StrCat("GPU compress ", DataTypeName(dtype), " x", count);
  auto plan = PlanFrame(dtype, count, options);
  if (!plan.ok()) return plan.status();
  if (count > max_count_) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": the codec was created for at most ", max_count_,
                                                   " elements"));
  }
  if (frame == nullptr || (count > 0 && input == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": null ", frame == nullptr ? "frame" : "input", " pointer"));
  }
  if (reinterpret_cast<uintptr_t>(frame) % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": the frame buffer must be 16-byte aligned"));
  }
  if (frame_capacity < plan->max_frame_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": frame capacity ", frame_capacity, " bytes < the ",
                                                   plan->max_frame_bytes, " bytes this tensor may need"));
  }
  codec::gpu::CompressLaunch launch{};
  launch.input = static_cast<const uint8_t*>(input);
  launch.count = count;
  launch.dtype = static_cast<uint8_t>(dtype);
  launch.frame = static_cast<uint8_t*>(frame);
  launch.layout = codec::ComputeLayout(ElementSize(dtype), plan->split, count, plan->lane_symbols);
  launch.workspace = workspace_->device;
  launch.chunk_scan = workspace_->chunk_scan;
  launch.scratch = workspace_->scratch;
  launch.tiles = workspace_->tiles;
  launch.sm_count = workspace_->sm_count;
  launch.stream = stream;
  launch.split_done = split_done;
  launch.dependent_launch = workspace_->dependent_launch;
  cudaError_t err = plan->split ? codec::VisitSplit(
                                      dtype, [&]<typename Split>() { return codec::gpu::LaunchCompress<Split>(launch); },
                                      [] { return cudaErrorInvalidValue; })
                                : codec::gpu::LaunchStoredCompress(launch);
  ++calls_;  // whatever was launched may record an error
  return CudaStatus(err, context);
}

absl::Status GpuCodec::Decompress(const void* frame, uint64_t frame_capacity, DataType dtype, void* output,
                                  uint64_t count, cudaStream_t stream) {
  const std::string context = absl::StrCat("GPU decompress ", DataTypeName(dtype), " x", count, " from a frame of ",
                                           frame_capacity, " bytes");
  if (absl::Status s = CheckDecodeArguments(context, frame, dtype, output, count); !s.ok()) return s;
  const codec::gpu::DecompressLaunch launch = DecompressLaunchOf(
      frame, frame_capacity, dtype, output, count, &workspace_->device->decode_error, workspace_->sm_count, stream);
  cudaError_t err = codec::VisitSplit(
      dtype, [&]<typename Split>() { return codec::gpu::LaunchDecompress<Split>(launch); },
      [&] { return codec::gpu::LaunchDecompress<codec::Split8>(launch); });
  ++calls_;  // whatever was launched may record an error
  return CudaStatus(err, context);
}

absl::Status GpuCodec::DecompressAndCombine(const void* frame, uint64_t frame_capacity, DataType dtype,
                                            const void* local, void* result, uint64_t count, ReduceOp op,
                                            uint32_t divisor, cudaStream_t stream) {
  const std::string context =
      absl::StrCat("GPU decompress-and-combine (", ReduceOpName(op), ", divisor ", divisor, ") ", DataTypeName(dtype),
                   " x", count, " from a frame of ", frame_capacity, " bytes");
  if (absl::Status s = CheckDecodeArguments(context, frame, dtype, result, count); !s.ok()) return s;
  if (!IsCompressibleType(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        context, ": only the compressed types (bf16, fp16, fp32, fp8) combine as they decode; decompress the others"));
  }
  if (!IsValidReduceOp(static_cast<uint8_t>(op))) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": operator ", static_cast<int>(op)));
  }
  if (divisor == 0) return absl::InvalidArgumentError(absl::StrCat(context, ": a divisor of 0"));
  if (count > 0 && local == nullptr) return absl::InvalidArgumentError(absl::StrCat(context, ": null local pointer"));
  const codec::gpu::CombineLaunch launch{
      DecompressLaunchOf(frame, frame_capacity, dtype, result, count, &workspace_->device->decode_error,
                         workspace_->sm_count, stream),
      {static_cast<const uint8_t*>(local), op, divisor}};
  cudaError_t err = codec::VisitCompressibleType(
      dtype, [&]<DataType kType>() { return codec::gpu::LaunchDecompressAndCombine<kType>(launch); },
      [] { return cudaErrorInvalidValue; });
  ++calls_;  // whatever was launched may record an error
  return CudaStatus(err, context);
}

absl::Status GpuCodec::QueueStatusRead(cudaStream_t stream) {
  // No call since the last read: the host words already are the device's (a plain block's turn
  // in the pipeline, whose slots keep one stream each).
  if (status_read_after_ == calls_) return absl::OkStatus();
  return CopyStatusWords(stream);
}

absl::Status GpuCodec::CopyStatusWords(cudaStream_t stream) {
  if (auto s = CudaStatus(cudaMemcpyAsync(workspace_->host_errors, &workspace_->device->encode_error,
                                          2 * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream),
                          "read codec status");
      !s.ok()) {
    return s;
  }
  status_read_after_ = calls_;
  return absl::OkStatus();
}

absl::Status GpuCodec::StreamStatus(cudaStream_t stream) {
  if (absl::Status s = CopyStatusWords(stream); !s.ok()) return s;
  if (auto s = CudaStatus(cudaStreamSynchronize(stream), "wait for the codec's stream"); !s.ok()) return s;
  return CompletedStatus(stream);
}

absl::Status GpuCodec::CompletedStatus(cudaStream_t stream) {
  // A call after the last queued read: its errors are only on the device.
  if (status_read_after_ != calls_) return StreamStatus(stream);
  uint32_t* words = workspace_->host_errors;
  const uint32_t encode_error = words[0], decode_error = words[1];
  if (encode_error == 0 && decode_error == 0) return absl::OkStatus();
  // Cleared on the device before the codec's next call (rare: only after an error).
  if (auto s = CudaStatus(cudaMemsetAsync(&workspace_->device->encode_error, 0, 2 * sizeof(uint32_t), stream),
                          "reset codec status");
      !s.ok()) {
    return s;
  }
  if (auto s = CudaStatus(cudaStreamSynchronize(stream), "wait for the codec's stream"); !s.ok()) return s;
  words[0] = words[1] = 0;
  if (encode_error != 0) return absl::InternalError("GPU compress: rANS output outgrew its bound (frame not written)");
  return DecodeErrorToStatus(decode_error, "GPU decompress");
}

}  // namespace ucclzip
