// ucclzip-bench codec: compression ratio against the entropy bound, and compress/decompress
// latency and throughput, on the CPU reference or the GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "bench_cli.h"
#include "bench_registry.h"
#include "tensor_gen.h"
#include "ucclzip/codec.h"

ABSL_FLAG(std::string, device, "cpu", "codec implementation to measure: cpu|gpu");
ABSL_FLAG(ucclzip::bench::ByteSize, bytes, ucclzip::bench::ByteSize{16 << 20}, "tensor size in bytes (K/M/G)");
ABSL_FLAG(std::string, input, "",
          "codec: a raw little-endian tensor file of --dtype to measure instead of --dist; weightsync: a folder of "
          "such files to send instead of the model");
ABSL_FLAG(uint32_t, lane_symbols, 0, "symbols per rANS lane (power of two 16..4096); 0 = automatic");

namespace ucclzip::bench {
namespace {

struct CodecResult {
  uint64_t bytes = 0, compressed_bytes = 0;
  double bound_ratio = 0, compress_us = 0, decompress_us = 0;
  bool roundtrip_ok = false;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Times `op` (which enqueues on `stream`) with CUDA events: the median of --iters runs.
double TimeGpuUs(const std::function<void()>& op, cudaStream_t stream) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  // Warm up for the given iterations and at least 200 ms: an idle H200 clocks its SMs at
  // 345 MHz and needs sustained work to reach its boost clock.
  const auto warm_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup) || std::chrono::steady_clock::now() < warm_until; ++i) {
    op();
    cudaStreamSynchronize(stream);
  }
  std::vector<double> us;
  for (int i = 0; i < absl::GetFlag(FLAGS_iters); ++i) {
    cudaEventRecord(start, stream);
    op();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    us.push_back(ms * 1000.0);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return Median(us);
}

double TimeCpuUs(const std::function<void()>& op) {
  op();  // warm-up: page faults and caches
  std::vector<double> us;
  const int iters = std::max(1, absl::GetFlag(FLAGS_iters) / 4);
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    op();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return Median(us);
}

absl::StatusOr<CodecResult> RunCpu(const std::vector<uint8_t>& tensor, DataType dtype, const CodecOptions& options) {
  CodecResult r;
  const uint64_t count = tensor.size() / ElementSize(dtype);
  std::vector<uint8_t> frame(MaxFrameBytes(dtype, count)), output(tensor.size());
  absl::StatusOr<uint64_t> size;
  r.compress_us = TimeCpuUs([&] { size = CompressHost(tensor.data(), count, dtype, frame.data(), frame.size(), options); });
  if (!size.ok()) return size.status();
  absl::Status decoded;
  r.decompress_us = TimeCpuUs([&] { decoded = DecompressHost(frame.data(), *size, dtype, output.data(), count); });
  if (!decoded.ok()) return decoded;
  r.compressed_bytes = *size;
  r.roundtrip_ok = output == tensor;
  return r;
}

#define BENCH_CUDA(expr)                                                                              \
  do {                                                                                                \
    if (cudaError_t e = (expr); e != cudaSuccess) return absl::InternalError(absl::StrCat(#expr, ": ", cudaGetErrorString(e))); \
  } while (0)

absl::StatusOr<CodecResult> RunGpu(const std::vector<uint8_t>& tensor, DataType dtype, const CodecOptions& options) {
  CodecResult r;
  const uint64_t count = tensor.size() / ElementSize(dtype);
  const uint64_t capacity = MaxFrameBytes(dtype, count);
  auto codec = GpuCodec::Create(count);
  if (!codec.ok()) return codec.status();
  void *input = nullptr, *frame = nullptr, *output = nullptr;
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreate(&stream));
  BENCH_CUDA(cudaMalloc(&input, std::max<size_t>(tensor.size(), 1)));
  BENCH_CUDA(cudaMalloc(&frame, capacity));
  BENCH_CUDA(cudaMalloc(&output, std::max<size_t>(tensor.size(), 1)));
  BENCH_CUDA(cudaMemcpy(input, tensor.data(), tensor.size(), cudaMemcpyHostToDevice));
  absl::Status status;
  r.compress_us = TimeGpuUs([&] { status.Update((*codec)->Compress(input, count, dtype, frame, capacity, stream, options)); }, stream);
  status.Update((*codec)->StreamStatus(stream));
  BENCH_CUDA(cudaMemcpy(&r.compressed_bytes, static_cast<uint8_t*>(frame) + kFrameBytesFieldOffset, 8, cudaMemcpyDeviceToHost));
  r.decompress_us = TimeGpuUs([&] { status.Update((*codec)->Decompress(frame, capacity, dtype, output, count, stream)); }, stream);
  status.Update((*codec)->StreamStatus(stream));
  std::vector<uint8_t> back(tensor.size());
  BENCH_CUDA(cudaMemcpy(back.data(), output, tensor.size(), cudaMemcpyDeviceToHost));
  r.roundtrip_ok = status.ok() && back == tensor;
  cudaFree(input);
  cudaFree(frame);
  cudaFree(output);
  cudaStreamDestroy(stream);
  if (!status.ok()) return status;
  return r;
}

absl::StatusOr<std::vector<uint8_t>> LoadTensor(DataType dtype) {
  const std::string path = absl::GetFlag(FLAGS_input);
  if (!path.empty()) {
    std::ifstream file(path, std::ios::binary);
    if (!file) return absl::NotFoundError(absl::StrCat("--input ", path, ": cannot open"));
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    data.resize(data.size() / ElementSize(dtype) * ElementSize(dtype));
    return data;
  }
  auto dist = testing::ParseDistribution(absl::GetFlag(FLAGS_dist));
  if (!dist.ok()) return dist.status();
  const uint64_t count = absl::GetFlag(FLAGS_bytes).bytes / ElementSize(dtype);
  return testing::GenerateTensor(dtype, count, *dist, /*seed=*/42);
}

int CodecMain(const std::vector<std::string>&) {
  auto dtype = ParseDataType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return std::fprintf(stderr, "%s\n", std::string(dtype.status().message()).c_str()), 2;
  auto tensor = LoadTensor(*dtype);
  if (!tensor.ok()) return std::fprintf(stderr, "%s\n", std::string(tensor.status().message()).c_str()), 2;
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device != "cpu" && device != "gpu") return std::fprintf(stderr, "--device must be cpu or gpu\n"), 2;
  const CodecOptions options{.compress = true, .lane_symbols = absl::GetFlag(FLAGS_lane_symbols)};
  auto result = device == "gpu" ? RunGpu(*tensor, *dtype, options) : RunCpu(*tensor, *dtype, options);
  if (!result.ok()) return std::fprintf(stderr, "codec benchmark failed: %s\n", result.status().ToString().c_str()), 1;
  const EntropyReport entropy = MeasureEntropy(tensor->data(), tensor->size() / ElementSize(*dtype), *dtype);
  const uint64_t bytes = tensor->size();
  const double ratio = result->compressed_bytes ? double(bytes) / result->compressed_bytes : 0;
  const double c_gbps = bytes / (result->compress_us * 1e3), d_gbps = bytes / (result->decompress_us * 1e3);
  const std::string source = absl::GetFlag(FLAGS_input).empty() ? absl::GetFlag(FLAGS_dist) : absl::GetFlag(FLAGS_input);
  if (absl::GetFlag(FLAGS_json)) {
    std::printf(
        "{\"dtype\": \"%s\", \"device\": \"%s\", \"dist\": \"%s\", \"bytes\": %llu, \"compressed_bytes\": %llu, "
        "\"ratio\": %.4f, \"bound_ratio\": %.4f, \"symbol_bound_ratio\": %.4f, \"compress_us\": %.2f, "
        "\"decompress_us\": %.2f, \"compress_gbps\": %.2f, \"decompress_gbps\": %.2f, \"roundtrip_ok\": %s}\n",
        DataTypeName(*dtype), device.c_str(), source.c_str(), static_cast<unsigned long long>(bytes),
        static_cast<unsigned long long>(result->compressed_bytes), ratio, entropy.bound_ratio,
        entropy.symbol_bound_ratio, result->compress_us, result->decompress_us, c_gbps, d_gbps,
        result->roundtrip_ok ? "true" : "false");
  } else {
    std::printf("%-8s %-4s %-16s %12s %12s %7s %7s %7s %12s %12s %10s %10s %s\n", "dtype", "dev", "dist", "bytes",
                "compressed", "ratio", "bound", "of_bnd", "compress_us", "decomp_us", "comp_GB/s", "dec_GB/s", "ok");
    std::printf("%-8s %-4s %-16s %12llu %12llu %7.4f %7.4f %7.4f %12.2f %12.2f %10.2f %10.2f %s\n", DataTypeName(*dtype),
                device.c_str(), source.c_str(), static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(result->compressed_bytes), ratio, entropy.bound_ratio,
                ratio / entropy.bound_ratio, result->compress_us, result->decompress_us, c_gbps, d_gbps,
                result->roundtrip_ok ? "yes" : "NO");
  }
  return result->roundtrip_ok ? 0 : 1;
}

const RegisterSubcommand kRegister("codec", "codec ratio vs entropy bound, compress/decompress latency and GB/s",
                                   SharedFlags({FlagGroup::kMeasure}, {"device", "bytes", "input", "lane_symbols"}),
                                   CodecMain);

}  // namespace
}  // namespace ucclzip::bench
