#include "pipeline_bench_util.h"

#include <algorithm>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench_cli.h"

namespace ucclzip::bench {

absl::StatusOr<CompressionMode> ParseCompression(const std::string& text) {
  if (text == "on") return CompressionMode::kOn;
  if (text == "off") return CompressionMode::kOff;
  if (text == "auto") return CompressionMode::kAuto;
  return absl::InvalidArgumentError(absl::StrCat("--compress must be on, off or auto, not '", text, "'"));
}

absl::StatusOr<std::vector<CompressionMode>> ParseCompressionList(const std::string& text) {
  std::vector<CompressionMode> modes;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    absl::StatusOr<CompressionMode> mode = ParseCompression(std::string(part));
    if (!mode.ok()) return mode.status();
    if (std::find(modes.begin(), modes.end(), *mode) != modes.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--compress names ", part, " twice in '", text, "'"));
    }
    modes.push_back(*mode);
  }
  return modes;
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(const BootstrapConfig& bootstrap,
                                                                 CommunicatorOptions options) {
  options.ucx_transports = absl::GetFlag(FLAGS_tls);
  options.pipeline_block_bytes = absl::GetFlag(FLAGS_pipeline_block).bytes;
  options.min_pipeline_block_bytes = absl::GetFlag(FLAGS_min_pipeline_block).bytes;
  options.recursive_doubling_bytes = absl::GetFlag(FLAGS_recursive_doubling).bytes;
  options.tree_broadcast_bytes = absl::GetFlag(FLAGS_tree_broadcast).bytes;
  options.cpu_codec_threads = absl::GetFlag(FLAGS_cpu_codec_threads);
  return Communicator::Create(CommunicatorConfig{.bootstrap = bootstrap, .options = options});
}

absl::StatusOr<bool> UseDeviceMemory(int local_rank) {
  const std::string memory = absl::GetFlag(FLAGS_memory);
  if (memory == "host") return false;
  if (memory != "device") return absl::InvalidArgumentError("--memory must be host or device");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return absl::FailedPreconditionError("--memory device needs a CUDA device");
  }
  if (cudaSetDevice(std::max(local_rank, 0) % devices) != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaSetDevice(", std::max(local_rank, 0) % devices, ") failed"));
  }
  return true;
}

const char* PathName(const Communicator& comm, bool device) {
  if (!device) return "host";
  return comm.device_memory_direct() ? "direct" : "staged";
}

absl::StatusOr<std::vector<double>> GatherDoubles(Communicator& comm, const std::vector<double>& mine) {
  constexpr absl::Duration kWait = absl::Minutes(5);
  std::vector<double> all(mine.size() * comm.size());
  absl::Status status = comm.AllGather(mine.data(), all.data(), mine.size(), DataType::kFloat64, nullptr,
                                       CollectiveOptions{.compression = CompressionMode::kOff})
                            .Wait(kWait);
  if (!status.ok()) return status;
  return all;
}

absl::Status Barrier(Communicator& comm) { return GatherDoubles(comm, {0.0}).status(); }

absl::Status WarmUp(Communicator& comm, absl::Duration at_least, absl::FunctionRef<absl::Status()> round) {
  if (at_least <= absl::ZeroDuration()) return absl::OkStatus();
  // Batches of up to this many rounds between agreements: a gather per round would be a call of
  // its own in every round, and one long batch could overshoot by far.
  constexpr int kMaxBatch = 256;
  const absl::Time start = absl::Now();
  for (int batch = 1;; batch = std::min(2 * batch, kMaxBatch)) {
    for (int i = 0; i < batch; ++i) {
      if (absl::Status s = round(); !s.ok()) return s;
    }
    absl::StatusOr<std::vector<double>> elapsed = GatherDoubles(comm, {absl::ToDoubleSeconds(absl::Now() - start)});
    if (!elapsed.ok()) return elapsed.status();
    if (absl::Seconds(*std::max_element(elapsed->begin(), elapsed->end())) >= at_least) return absl::OkStatus();
  }
}

absl::Status CheckedElements(uint64_t wrong) {
  if (wrong == 0) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat(wrong, " elements arrived wrong in the checked calls (the #wrong column says where)"));
}

const char* CompressionName(CompressionMode mode) {
  switch (mode) {
    case CompressionMode::kOn: return "on";
    case CompressionMode::kOff: return "off";
    case CompressionMode::kAuto: return "auto";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<BenchStream>> BenchStream::Create(const std::string& name, bool device) {
  auto stream = std::make_unique<BenchStream>();
  if (name == "legacy") return stream;
  if (name != "nonblocking") return absl::InvalidArgumentError(absl::StrCat("--stream ", name, ": must be legacy or nonblocking"));
  if (!device) return absl::InvalidArgumentError("--stream nonblocking: only with --memory device");
  if (const cudaError_t err = cudaStreamCreateWithFlags(&stream->stream_, cudaStreamNonBlocking); err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat("creating a CUDA stream: ", cudaGetErrorString(err)));
  }
  return stream;
}

BenchStream::~BenchStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::StatusOr<std::unique_ptr<TensorBuffer>> TensorBuffer::Create(const std::vector<uint8_t>& contents, bool device) {
  auto buffer = std::make_unique<TensorBuffer>();
  buffer->host_ = contents;
  if (device) {
    if (cudaMalloc(&buffer->device_, std::max<size_t>(contents.size(), 1)) != cudaSuccess ||
        cudaMemcpy(buffer->device_, contents.data(), contents.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat("device buffer of ", contents.size(), " bytes"));
    }
  }
  return buffer;
}

TensorBuffer::~TensorBuffer() {
  if (device_ != nullptr) cudaFree(device_);
}

namespace {

// A CUDA call of a device buffer, with the CUDA error named where it fails.
absl::Status DeviceBufferStatus(cudaError_t err, absl::string_view what, size_t bytes) {
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat(what, " ", bytes, " bytes of a device buffer: ", cudaGetErrorName(err), ": ",
                                          cudaGetErrorString(err)));
}

}  // namespace

absl::Status TensorBuffer::Clear() {
  constexpr uint8_t kPattern = 0xA5;
  if (device_ != nullptr) {
    cudaError_t err = cudaMemset(device_, kPattern, host_.size());
    if (err == cudaSuccess) err = cudaStreamSynchronize(cudaStreamLegacy);
    return DeviceBufferStatus(err, "clearing", host_.size());
  }
  std::fill(host_.begin(), host_.end(), kPattern);
  return absl::OkStatus();
}

absl::Status TensorBuffer::Write(const std::vector<uint8_t>& contents, uint64_t offset) {
  if (offset + contents.size() > host_.size()) {
    return absl::OutOfRangeError(absl::StrCat("writing ", contents.size(), " bytes at ", offset, " into a buffer of ",
                                              host_.size()));
  }
  if (device_ == nullptr) {
    std::copy(contents.begin(), contents.end(), host_.begin() + static_cast<ptrdiff_t>(offset));
    return absl::OkStatus();
  }
  if (cudaMemcpy(static_cast<uint8_t*>(device_) + offset, contents.data(), contents.size(), cudaMemcpyHostToDevice) !=
      cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat("copying ", contents.size(), " bytes to the device"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> TensorBuffer::CountWrong(const std::vector<uint8_t>& want, size_t element_bytes,
                                                   uint64_t offset) {
  if (device_ != nullptr) {
    absl::Status read = DeviceBufferStatus(cudaMemcpy(host_.data(), device_, host_.size(), cudaMemcpyDeviceToHost),
                                           "reading back", host_.size());
    if (!read.ok()) return read;
  }
  uint64_t wrong = 0;
  for (size_t first = 0; first < want.size(); first += element_bytes) {
    bool differs = false;
    for (size_t i = first; i < std::min(first + element_bytes, want.size()); ++i) {
      differs |= offset + i >= host_.size() || host_[offset + i] != want[i];
    }
    wrong += differs;
  }
  return wrong;
}

}  // namespace ucclzip::bench
