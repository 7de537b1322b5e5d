// nvCOMP's batched ANS (the C API of nvCOMP 5 and 6), set up once and then timed call by call
// as ucclzip's GpuCodec is: every buffer, pointer array and workspace exists before timing.
#include "nvcomp_codec.h"

#include <nvcomp.h>
#include <nvcomp/ans.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"

namespace ucclzip::bench {
namespace {

#define NVCOMP_BENCH_CUDA(expr)                                                                       \
  do {                                                                                                \
    if (cudaError_t e = (expr); e != cudaSuccess) return absl::InternalError(absl::StrCat(#expr, ": ", cudaGetErrorString(e))); \
  } while (0)

absl::Status NvcompError(const char* what, nvcompStatus_t status) {
  return absl::InternalError(absl::StrCat("nvCOMP ", what, ": ", nvcompGetStatusString(status)));
}

#define NVCOMP_BENCH_CALL(expr)                                                                \
  do {                                                                                         \
    if (nvcompStatus_t s = (expr); s != nvcompSuccess) return NvcompError(#expr, s);           \
  } while (0)

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<void, CudaFree>;

absl::StatusOr<DeviceBuffer> Allocate(size_t bytes) {
  void* p = nullptr;
  NVCOMP_BENCH_CUDA(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
  return DeviceBuffer(p);
}

template <typename T>
absl::StatusOr<DeviceBuffer> Upload(const std::vector<T>& values) {
  absl::StatusOr<DeviceBuffer> buffer = Allocate(values.size() * sizeof(T));
  if (!buffer.ok()) return buffer.status();
  NVCOMP_BENCH_CUDA(cudaMemcpy(buffer->get(), values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

template <typename T>
absl::StatusOr<std::vector<T>> Download(const DeviceBuffer& buffer, size_t count) {
  std::vector<T> values(count);
  NVCOMP_BENCH_CUDA(cudaMemcpy(values.data(), buffer.get(), count * sizeof(T), cudaMemcpyDeviceToHost));
  return values;
}

// nvCOMP's own float modes where it has one for the type (the half-precision mode serves bf16
// as well as fp16), bytes otherwise.
nvcompType_t AnsDataType(DataType dtype) {
  switch (dtype) {
    case DataType::kBFloat16:
    case DataType::kFloat16: return NVCOMP_TYPE_FLOAT16;
    case DataType::kFloat32: return NVCOMP_TYPE_FLOAT32;
    case DataType::kFloat8E4M3: return NVCOMP_TYPE_FLOAT8_E4M3;
    default: return NVCOMP_TYPE_UCHAR;
  }
}

uint64_t RoundUp(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// The first chunk whose status is not nvcompSuccess, as an error naming `stage`.
absl::Status CheckStatuses(const DeviceBuffer& statuses, size_t num_chunks, const char* stage) {
  absl::StatusOr<std::vector<nvcompStatus_t>> host = Download<nvcompStatus_t>(statuses, num_chunks);
  if (!host.ok()) return host.status();
  for (size_t i = 0; i < num_chunks; ++i) {
    if ((*host)[i] != nvcompSuccess) {
      return absl::InternalError(absl::StrCat("nvCOMP ", stage, " of chunk ", i, " of ", num_chunks, ": ",
                                              nvcompGetStatusString((*host)[i])));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> NvcompVersion() {
  nvcompProperties_t properties{};
  NVCOMP_BENCH_CALL(nvcompGetProperties(&properties));
  const uint32_t v = properties.version;
  return absl::StrCat(NVCOMP_MAJOR_FROM_SEMVER(v), ".", NVCOMP_MINOR_FROM_SEMVER(v), ".", NVCOMP_PATCH_FROM_SEMVER(v));
}

absl::StatusOr<CodecResult> RunNvcompAns(const std::vector<uint8_t>& tensor, DataType dtype, uint64_t chunk_bytes,
                                         const GpuTimer& time) {
  nvcompBatchedANSCompressOpts_t compress_opts = nvcompBatchedANSCompressDefaultOpts;
  compress_opts.data_type = AnsDataType(dtype);
  nvcompBatchedANSDecompressOpts_t decompress_opts = nvcompBatchedANSDecompressDefaultOpts;
  decompress_opts.data_type = compress_opts.data_type;
  nvcompAlignmentRequirements_t compress_align{}, decompress_align{};
  NVCOMP_BENCH_CALL(nvcompBatchedANSCompressGetRequiredAlignments(compress_opts, &compress_align));
  NVCOMP_BENCH_CALL(nvcompBatchedANSDecompressGetRequiredAlignments(decompress_opts, &decompress_align));
  const uint64_t input_align = std::max({compress_align.input, decompress_align.output, ElementSize(dtype)});
  if (chunk_bytes == 0 || chunk_bytes % input_align != 0 || chunk_bytes > nvcompANSCompressionMaxAllowedChunkSize) {
    return absl::InvalidArgumentError(absl::StrCat("nvCOMP ANS chunk of ", chunk_bytes, " bytes for ",
                                                   DataTypeName(dtype), ": must be a multiple of ", input_align,
                                                   " and at most ", nvcompANSCompressionMaxAllowedChunkSize));
  }
  if (tensor.empty()) return absl::InvalidArgumentError("nvCOMP ANS: the tensor is empty");
  const uint64_t bytes = tensor.size();
  const size_t num_chunks = (bytes + chunk_bytes - 1) / chunk_bytes;
  const size_t largest_chunk = std::min(chunk_bytes, bytes);
  size_t max_compressed_chunk = 0;
  NVCOMP_BENCH_CALL(nvcompBatchedANSCompressGetMaxOutputChunkSize(largest_chunk, compress_opts, &max_compressed_chunk));
  const uint64_t compressed_stride =
      RoundUp(max_compressed_chunk, std::max(compress_align.output, decompress_align.input));

  cudaStream_t stream;
  NVCOMP_BENCH_CUDA(cudaStreamCreate(&stream));
  const std::unique_ptr<CUstream_st, decltype(&cudaStreamDestroy)> stream_owner(stream, cudaStreamDestroy);
  size_t compress_temp_bytes = 0, decompress_temp_bytes = 0;
  NVCOMP_BENCH_CALL(nvcompBatchedANSCompressGetTempSize(num_chunks, largest_chunk, compress_opts,
                                                        &compress_temp_bytes, bytes, stream));
  NVCOMP_BENCH_CALL(nvcompBatchedANSDecompressGetTempSize(num_chunks, largest_chunk, decompress_opts,
                                                          &decompress_temp_bytes, bytes, stream));

  absl::StatusOr<DeviceBuffer> input = Upload(tensor);
  absl::StatusOr<DeviceBuffer> output = Allocate(bytes);
  absl::StatusOr<DeviceBuffer> compressed = Allocate(num_chunks * compressed_stride);
  absl::StatusOr<DeviceBuffer> compress_temp = Allocate(compress_temp_bytes);
  absl::StatusOr<DeviceBuffer> decompress_temp = Allocate(decompress_temp_bytes);
  absl::StatusOr<DeviceBuffer> compressed_sizes = Allocate(num_chunks * sizeof(size_t));
  absl::StatusOr<DeviceBuffer> decompressed_sizes = Allocate(num_chunks * sizeof(size_t));
  absl::StatusOr<DeviceBuffer> statuses = Allocate(num_chunks * sizeof(nvcompStatus_t));
  for (const auto* buffer : {&input, &output, &compressed, &compress_temp, &decompress_temp, &compressed_sizes,
                             &decompressed_sizes, &statuses}) {
    if (!buffer->ok()) return buffer->status();
  }
  std::vector<const void*> input_ptrs(num_chunks);
  std::vector<void*> compressed_ptrs(num_chunks), output_ptrs(num_chunks);
  std::vector<size_t> chunk_sizes(num_chunks);
  for (size_t i = 0; i < num_chunks; ++i) {
    input_ptrs[i] = static_cast<const uint8_t*>(input->get()) + i * chunk_bytes;
    output_ptrs[i] = static_cast<uint8_t*>(output->get()) + i * chunk_bytes;
    compressed_ptrs[i] = static_cast<uint8_t*>(compressed->get()) + i * compressed_stride;
    chunk_sizes[i] = std::min<uint64_t>(chunk_bytes, bytes - i * chunk_bytes);
  }
  absl::StatusOr<DeviceBuffer> d_input_ptrs = Upload(input_ptrs);
  absl::StatusOr<DeviceBuffer> d_output_ptrs = Upload(output_ptrs);
  absl::StatusOr<DeviceBuffer> d_compressed_ptrs = Upload(compressed_ptrs);
  absl::StatusOr<DeviceBuffer> d_chunk_sizes = Upload(chunk_sizes);
  for (const auto* buffer : {&d_input_ptrs, &d_output_ptrs, &d_compressed_ptrs, &d_chunk_sizes}) {
    if (!buffer->ok()) return buffer->status();
  }
  // A decompression that wrote nothing must not pass for one that wrote the tensor, which an
  // earlier run may have left in the same memory.
  NVCOMP_BENCH_CUDA(cudaMemset(output->get(), 0xA5, bytes));

  // Times a batched call (GpuTiming's two ways) and then checks how it launched and how every
  // chunk fared.
  const auto timed = [&](const char* stage, const std::function<nvcompStatus_t()>& call) -> absl::StatusOr<GpuTiming> {
    nvcompStatus_t launch = nvcompSuccess;
    const GpuTiming timing = time(
        [&] {
          const nvcompStatus_t s = call();
          if (launch == nvcompSuccess) launch = s;
        },
        stream);
    if (launch != nvcompSuccess) return NvcompError(stage, launch);
    NVCOMP_BENCH_CUDA(cudaStreamSynchronize(stream));
    if (absl::Status s = CheckStatuses(*statuses, num_chunks, stage); !s.ok()) return s;
    return timing;
  };
  CodecResult result;
  absl::StatusOr<GpuTiming> compress_time = timed("compression", [&] {
    return nvcompBatchedANSCompressAsync(
        static_cast<const void* const*>(d_input_ptrs->get()), static_cast<const size_t*>(d_chunk_sizes->get()),
        largest_chunk, num_chunks, compress_temp->get(), compress_temp_bytes,
        static_cast<void* const*>(d_compressed_ptrs->get()), static_cast<size_t*>(compressed_sizes->get()),
        compress_opts, static_cast<nvcompStatus_t*>(statuses->get()), stream);
  });
  if (!compress_time.ok()) return compress_time.status();
  result.compress_us = compress_time->single_us;
  result.compress_streamed_us = compress_time->streamed_us;
  absl::StatusOr<std::vector<size_t>> sizes = Download<size_t>(*compressed_sizes, num_chunks);
  if (!sizes.ok()) return sizes.status();
  for (size_t size : *sizes) result.compressed_bytes += size + sizeof(size_t);

  absl::StatusOr<GpuTiming> decompress_time = timed("decompression", [&] {
    return nvcompBatchedANSDecompressAsync(
        static_cast<const void* const*>(d_compressed_ptrs->get()), static_cast<const size_t*>(compressed_sizes->get()),
        static_cast<const size_t*>(d_chunk_sizes->get()), static_cast<size_t*>(decompressed_sizes->get()),
        num_chunks, decompress_temp->get(), decompress_temp_bytes, static_cast<void* const*>(d_output_ptrs->get()),
        decompress_opts, static_cast<nvcompStatus_t*>(statuses->get()), stream);
  });
  if (!decompress_time.ok()) return decompress_time.status();
  result.decompress_us = decompress_time->single_us;
  result.decompress_streamed_us = decompress_time->streamed_us;
  absl::StatusOr<std::vector<size_t>> decoded_sizes = Download<size_t>(*decompressed_sizes, num_chunks);
  if (!decoded_sizes.ok()) return decoded_sizes.status();
  std::vector<uint8_t> back(bytes);
  NVCOMP_BENCH_CUDA(cudaMemcpy(back.data(), output->get(), bytes, cudaMemcpyDeviceToHost));
  result.roundtrip_ok = *decoded_sizes == chunk_sizes && back == tensor;
  return result;
}

}  // namespace ucclzip::bench
