// ucclzip-bench codec: compression ratio against the entropy bound, and compress/decompress
// latency and throughput, on the CPU reference or the GPU; with --vs nvcomp, nvCOMP's batched
// ANS on the same tensor, timed the same way; with --combine, a hop of a reduction on the GPU,
// decoded then reduced (two kernels) against decoded and combined in one.
#include <cuda_runtime_api.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "bench_cli.h"
#include "bench_registry.h"
#include "bench_stats.h"
#include "nvcomp_codec.h"
#include "tensor_gen.h"
#include "ucclzip/codec.h"
#include "ucclzip/reduction.h"

ABSL_FLAG(std::string, device, "cpu", "codec implementation to measure: cpu|gpu");
ABSL_FLAG(std::optional<ucclzip::bench::ByteSize>, bytes, std::nullopt,
          "tensor size in bytes (K/M/G): 16M of --dist by default; with --input, its first N bytes");
ABSL_FLAG(std::string, input, "",
          "codec: a raw little-endian tensor file of --dtype to measure instead of --dist; weightsync: a folder of "
          "such files to send instead of the model");
ABSL_FLAG(uint32_t, lane_symbols, 0, "symbols per rANS lane (power of two 16..4096); 0 = automatic");
ABSL_FLAG(int, threads, 1,
          "--device cpu: codec threads, the caller's included (1: one core, the per-core figure; 0: the "
          "library's default)");
ABSL_FLAG(bool, thread_clock, false,
          "--device cpu --threads 1: time by the calling thread's CPU time, which other processes on a busy "
          "machine do not inflate, instead of by the wall clock");
ABSL_FLAG(std::string, vs, "", "also measure another codec on the same tensor (GPU only): nvcomp (nvCOMP batched ANS)");
ABSL_FLAG(std::string, combine, "",
          "--device gpu: also time a reduction hop with this operator (sum|prod|min|max|avg) against a local "
          "tensor (the input rotated by half): Decompress then ReduceOnDevice, against DecompressAndCombine");
ABSL_FLAG(std::vector<std::string>, nvcomp_chunk, {"64K"},
          "--vs nvcomp: chunk sizes (K/M), one row each, e.g. 64K,1M (64K is nvCOMP's default)");

namespace ucclzip::bench {
namespace {

// Times `op` (which enqueues on `stream`) with CUDA events, as GpuTiming says: the median of
// --iters calls one at a time, then, if `streamed`, the mean of --iters calls back to back.
GpuTiming TimeGpuCalls(const std::function<void()>& op, cudaStream_t stream, bool streamed) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  // Warm up for the given iterations and at least --warmup_ms: an idle H200 clocks its SMs at
  // 345 MHz and needs sustained work to reach its boost clock.
  const absl::Time warm_until = absl::Now() + WarmupDuration();
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup) || absl::Now() < warm_until; ++i) {
    op();
    cudaStreamSynchronize(stream);
  }
  const int iters = absl::GetFlag(FLAGS_iters);
  const auto elapsed_us = [&] {
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return ms * 1000.0;
  };
  std::vector<double> us;
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(start, stream);
    op();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    us.push_back(elapsed_us());
  }
  GpuTiming timing{.single_us = Median(us)};
  if (streamed && iters > 0) {
    cudaEventRecord(start, stream);
    for (int i = 0; i < iters; ++i) op();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    timing.streamed_us = elapsed_us() / iters;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return timing;
}

// Both of GpuTiming's times: the timer the codec rows (ours and nvCOMP's) share.
GpuTiming TimeGpu(const std::function<void()>& op, cudaStream_t stream) { return TimeGpuCalls(op, stream, true); }

// The one-at-a-time median alone, for the reduction hop's rows.
double TimeGpuSingleUs(const std::function<void()>& op, cudaStream_t stream) {
  return TimeGpuCalls(op, stream, false).single_us;
}

double NowUs() {
  if (absl::GetFlag(FLAGS_thread_clock)) {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Times `op` on the host: the median of --iters runs, after --warmup (at least one, for the
// page faults and caches).
double TimeCpuUs(const std::function<void()>& op) {
  for (int i = 0; i < std::max(1, absl::GetFlag(FLAGS_warmup)); ++i) op();
  std::vector<double> us;
  for (int i = 0; i < std::max(1, absl::GetFlag(FLAGS_iters)); ++i) {
    const double t0 = NowUs();
    op();
    us.push_back(NowUs() - t0);
  }
  return Median(us);
}

// --threads as a pool, checked against --thread_clock.
absl::StatusOr<std::unique_ptr<HostCodecThreads>> CpuThreads() {
  absl::StatusOr<std::unique_ptr<HostCodecThreads>> threads = HostCodecThreads::Create(absl::GetFlag(FLAGS_threads));
  if (threads.ok() && absl::GetFlag(FLAGS_thread_clock) && (*threads)->threads() != 1) {
    return absl::InvalidArgumentError("--thread_clock times one thread: it needs --threads 1");
  }
  return threads;
}

absl::StatusOr<CodecResult> RunCpu(const std::vector<uint8_t>& tensor, DataType dtype, const CodecOptions& options,
                                   HostCodecThreads& threads) {
  CodecResult r;
  const uint64_t count = tensor.size() / ElementSize(dtype);
  std::vector<uint8_t> frame(MaxFrameBytes(dtype, count)), output(tensor.size());
  absl::StatusOr<uint64_t> size;
  r.compress_us = TimeCpuUs(
      [&] { size = CompressHost(tensor.data(), count, dtype, frame.data(), frame.size(), options, &threads); });
  if (!size.ok()) return size.status();
  absl::Status decoded;
  r.decompress_us =
      TimeCpuUs([&] { decoded = DecompressHost(frame.data(), *size, dtype, output.data(), count, &threads); });
  if (!decoded.ok()) return decoded;
  r.compressed_bytes = *size;
  r.roundtrip_ok = output == tensor;
  return r;
}

#define BENCH_CUDA(expr)                                                                              \
  do {                                                                                                \
    if (cudaError_t e = (expr); e != cudaSuccess) return absl::InternalError(absl::StrCat(#expr, ": ", cudaGetErrorString(e))); \
  } while (0)

// A reduction hop on the GPU, out of place: the frame decoded (into `decoded`) and then combined
// with a local tensor by ReduceOnDevice, against DecompressAndCombine; both checked against
// ReduceOnHost. The local tensor is the input rotated by half: values of the same kind, element
// by element unrelated.
struct CombineResult {
  double decode_reduce_us = 0, fused_us = 0;
  bool bits_ok = false;
};

absl::StatusOr<CombineResult> RunGpuCombine(GpuCodec& codec, const void* frame, uint64_t capacity,
                                            const std::vector<uint8_t>& tensor, DataType dtype, ReduceOp op,
                                            void* decoded, cudaStream_t stream) {
  const uint64_t count = tensor.size() / ElementSize(dtype);
  const uint32_t divisor = op == ReduceOp::kAvg ? 4 : 1;  // avg's last hop, as of 4 ranks
  std::vector<uint8_t> local(tensor.size()), want(tensor.size()), got(tensor.size());
  std::rotate_copy(tensor.begin(), tensor.begin() + (count / 2) * ElementSize(dtype), tensor.end(), local.begin());
  if (absl::Status s = ReduceOnHost(dtype, op, tensor.data(), local.data(), want.data(), count, divisor); !s.ok()) return s;
  void *local_dev = nullptr, *result = nullptr;
  BENCH_CUDA(cudaMalloc(&local_dev, std::max<size_t>(tensor.size(), 1)));
  BENCH_CUDA(cudaMalloc(&result, std::max<size_t>(tensor.size(), 1)));
  BENCH_CUDA(cudaMemcpy(local_dev, local.data(), local.size(), cudaMemcpyHostToDevice));
  absl::Status status;
  // The result as the CPU's, then spoilt for the next measurement.
  auto check = [&] {
    status.Update(codec.StreamStatus(stream));
    const bool same = cudaMemcpy(got.data(), result, got.size(), cudaMemcpyDeviceToHost) == cudaSuccess && got == want;
    return cudaMemset(result, 0xA5, got.size()) == cudaSuccess && same;
  };
  CombineResult r;
  r.decode_reduce_us = TimeGpuSingleUs(
      [&] {
        status.Update(codec.Decompress(frame, capacity, dtype, decoded, count, stream));
        status.Update(ReduceOnDevice(dtype, op, decoded, local_dev, result, count, stream, divisor));
      },
      stream);
  const bool two_kernels_ok = check();
  r.fused_us = TimeGpuSingleUs(
      [&] { status.Update(codec.DecompressAndCombine(frame, capacity, dtype, local_dev, result, count, op, divisor, stream)); },
      stream);
  r.bits_ok = check() && two_kernels_ok;
  cudaFree(local_dev);
  cudaFree(result);
  if (!status.ok()) return status;
  return r;
}

absl::StatusOr<CodecResult> RunGpu(const std::vector<uint8_t>& tensor, DataType dtype, const CodecOptions& options,
                                   std::optional<ReduceOp> combine, CombineResult* combined) {
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
  // A decompression that wrote nothing must not pass for one that wrote the tensor.
  BENCH_CUDA(cudaMemset(output, 0xA5, tensor.size()));
  absl::Status status;
  const GpuTiming compress =
      TimeGpu([&] { status.Update((*codec)->Compress(input, count, dtype, frame, capacity, stream, options)); }, stream);
  r.compress_us = compress.single_us;
  r.compress_streamed_us = compress.streamed_us;
  status.Update((*codec)->StreamStatus(stream));
  BENCH_CUDA(cudaMemcpy(&r.compressed_bytes, static_cast<uint8_t*>(frame) + kFrameBytesFieldOffset, 8, cudaMemcpyDeviceToHost));
  const GpuTiming decompress =
      TimeGpu([&] { status.Update((*codec)->Decompress(frame, capacity, dtype, output, count, stream)); }, stream);
  r.decompress_us = decompress.single_us;
  r.decompress_streamed_us = decompress.streamed_us;
  status.Update((*codec)->StreamStatus(stream));
  std::vector<uint8_t> back(tensor.size());
  BENCH_CUDA(cudaMemcpy(back.data(), output, tensor.size(), cudaMemcpyDeviceToHost));
  r.roundtrip_ok = status.ok() && back == tensor;
  if (combine && status.ok()) {
    absl::StatusOr<CombineResult> hop = RunGpuCombine(**codec, frame, capacity, tensor, dtype, *combine, output, stream);
    if (hop.ok()) *combined = *hop;
    status.Update(hop.status());
  }
  cudaFree(input);
  cudaFree(frame);
  cudaFree(output);
  cudaStreamDestroy(stream);
  if (!status.ok()) return status;
  return r;
}

absl::StatusOr<std::vector<uint8_t>> LoadTensor(DataType dtype) {
  const std::string path = absl::GetFlag(FLAGS_input);
  const std::optional<ByteSize> bytes = absl::GetFlag(FLAGS_bytes);
  if (!path.empty()) {
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    if (!file) return absl::NotFoundError(absl::StrCat("--input ", path, ": cannot open"));
    const uint64_t file_bytes = static_cast<uint64_t>(file.tellg());
    if (bytes && bytes->bytes > file_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input ", path, " holds ", file_bytes, " bytes, fewer than --bytes ", bytes->bytes));
    }
    const uint64_t size = (bytes ? bytes->bytes : file_bytes) / ElementSize(dtype) * ElementSize(dtype);
    std::vector<uint8_t> data(size);
    file.seekg(0);
    if (!file.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(size))) {
      return absl::DataLossError(absl::StrCat("--input ", path, ": cannot read ", size, " bytes"));
    }
    return data;
  }
  auto dist = testing::ParseDistribution(absl::GetFlag(FLAGS_dist));
  if (!dist.ok()) return dist.status();
  const uint64_t count = (bytes ? bytes->bytes : uint64_t{16} << 20) / ElementSize(dtype);
  return testing::GenerateTensor(dtype, count, *dist, /*seed=*/42);
}

// One measured codec: its name in the table and the JSON fields that only it has.
struct CodecRow {
  std::string codec, device, extra_json;
  CodecResult result;
};

// The nvCOMP chunk sizes that --vs asks for (none without --vs): the flags and the build are
// checked before anything runs, each size against nvCOMP's limits when it runs.
absl::StatusOr<std::vector<ByteSize>> RivalChunks(const std::string& device) {
  const std::string vs = absl::GetFlag(FLAGS_vs);
  if (vs.empty()) return std::vector<ByteSize>{};
  if (vs != "nvcomp") return absl::InvalidArgumentError(absl::StrCat("--vs ", vs, ": the one rival known is nvcomp"));
  if (device != "gpu") return absl::InvalidArgumentError("--vs nvcomp runs on the GPU: add --device gpu");
  if (absl::StatusOr<std::string> version = NvcompVersion(); !version.ok()) return version.status();
  std::vector<ByteSize> chunks;
  for (const std::string& text : absl::GetFlag(FLAGS_nvcomp_chunk)) {
    std::string error;
    if (!AbslParseFlag(text, &chunks.emplace_back(), &error)) {
      return absl::InvalidArgumentError(absl::StrCat("--nvcomp_chunk ", text, ": ", error));
    }
  }
  return chunks;
}

// "64K", "1M": how the table names a chunk size.
std::string SizeLabel(uint64_t bytes) {
  if (bytes % (uint64_t{1} << 20) == 0) return absl::StrCat(bytes >> 20, "M");
  if (bytes % (uint64_t{1} << 10) == 0) return absl::StrCat(bytes >> 10, "K");
  return absl::StrCat(bytes);
}

// nvCOMP on the same tensor, one row per chunk size, timed by the timer that measured ucclzip.
absl::StatusOr<std::vector<CodecRow>> RunRivals(const std::vector<uint8_t>& tensor, DataType dtype,
                                                const std::vector<ByteSize>& chunks) {
  std::vector<CodecRow> rows;
  if (chunks.empty()) return rows;
  absl::StatusOr<std::string> version = NvcompVersion();
  if (!version.ok()) return version.status();
  for (const ByteSize chunk : chunks) {
    absl::StatusOr<CodecResult> result = RunNvcompAns(tensor, dtype, chunk.bytes, TimeGpu);
    if (!result.ok()) return result.status();
    rows.push_back({absl::StrCat("nvcomp-ans/", SizeLabel(chunk.bytes)), "gpu",
                    absl::StrFormat(", \"nvcomp_version\": \"%s\", \"chunk_bytes\": %llu", *version,
                                    static_cast<unsigned long long>(chunk.bytes)),
                    *result});
  }
  return rows;
}

void PrintRows(const std::vector<CodecRow>& rows, DataType dtype, uint64_t bytes, const EntropyReport& entropy) {
  const std::string source = absl::GetFlag(FLAGS_input).empty() ? absl::GetFlag(FLAGS_dist) : absl::GetFlag(FLAGS_input);
  if (!absl::GetFlag(FLAGS_json)) {
    std::printf("%-16s %-8s %-4s %-16s %12s %12s %7s %7s %7s %12s %12s %10s %10s %11s %11s %s\n", "codec", "dtype", "dev",
                "dist", "bytes", "compressed", "ratio", "bound", "of_bnd", "compress_us", "decomp_us", "comp_GB/s",
                "dec_GB/s", "comp_strm", "dec_strm", "ok");
  }
  for (const CodecRow& row : rows) {
    const CodecResult& r = row.result;
    const double ratio = r.compressed_bytes ? double(bytes) / r.compressed_bytes : 0;
    const double c_gbps = bytes / (r.compress_us * 1e3), d_gbps = bytes / (r.decompress_us * 1e3);
    const bool streamed = row.device == "gpu";  // the CPU codec has no launches to overlap
    if (absl::GetFlag(FLAGS_json)) {
      const std::string streamed_json =
          streamed ? absl::StrFormat(", \"compress_streamed_us\": %.2f, \"decompress_streamed_us\": %.2f",
                                     r.compress_streamed_us, r.decompress_streamed_us)
                   : "";
      std::printf(
          "{\"codec\": \"%s\", \"dtype\": \"%s\", \"device\": \"%s\", \"dist\": \"%s\", \"bytes\": %llu, "
          "\"compressed_bytes\": %llu, \"ratio\": %.4f, \"bound_ratio\": %.4f, \"symbol_bound_ratio\": %.4f, "
          "\"compress_us\": %.2f, \"decompress_us\": %.2f, \"compress_gbps\": %.2f, \"decompress_gbps\": %.2f%s, "
          "\"roundtrip_ok\": %s%s}\n",
          row.codec.c_str(), DataTypeName(dtype), row.device.c_str(), source.c_str(),
          static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(r.compressed_bytes), ratio,
          entropy.bound_ratio, entropy.symbol_bound_ratio, r.compress_us, r.decompress_us, c_gbps, d_gbps,
          streamed_json.c_str(), r.roundtrip_ok ? "true" : "false", row.extra_json.c_str());
    } else {
      const auto column = [&](double us) { return streamed ? absl::StrFormat("%.2f", us) : std::string("-"); };
      std::printf("%-16s %-8s %-4s %-16s %12llu %12llu %7.4f %7.4f %7.4f %12.2f %12.2f %10.2f %10.2f %11s %11s %s\n",
                  row.codec.c_str(), DataTypeName(dtype), row.device.c_str(), source.c_str(),
                  static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(r.compressed_bytes), ratio,
                  entropy.bound_ratio, ratio / entropy.bound_ratio, r.compress_us, r.decompress_us, c_gbps, d_gbps,
                  column(r.compress_streamed_us).c_str(), column(r.decompress_streamed_us).c_str(),
                  r.roundtrip_ok ? "yes" : "NO");
    }
  }
}

int Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "%s%s\n", what, std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument || status.code() == absl::StatusCode::kNotFound ? 2 : 1;
}

int CodecMain(const std::vector<std::string>&) {
  auto dtype = ParseDataType(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return Fail("", dtype.status());
  auto tensor = LoadTensor(*dtype);
  if (!tensor.ok()) return Fail("", tensor.status());
  const std::string device = absl::GetFlag(FLAGS_device);
  if (device != "cpu" && device != "gpu") return std::fprintf(stderr, "--device must be cpu or gpu\n"), 2;
  const auto rival_chunks = RivalChunks(device);
  if (!rival_chunks.ok()) return Fail("", rival_chunks.status());
  const CodecOptions options{.compress = true, .lane_symbols = absl::GetFlag(FLAGS_lane_symbols)};
  auto threads = CpuThreads();
  if (!threads.ok()) return Fail("", threads.status());
  std::optional<ReduceOp> combine;
  if (const std::string op = absl::GetFlag(FLAGS_combine); !op.empty()) {
    if (device != "gpu") return std::fprintf(stderr, "--combine runs on the GPU: add --device gpu\n"), 2;
    absl::StatusOr<ReduceOp> parsed = ParseReduceOp(op);
    if (!parsed.ok()) return Fail("--combine: ", parsed.status());
    combine = *parsed;
  }
  CombineResult combined;
  auto result = device == "gpu" ? RunGpu(*tensor, *dtype, options, combine, &combined)
                                : RunCpu(*tensor, *dtype, options, **threads);
  if (!result.ok()) return Fail("codec benchmark failed: ", result.status());
  std::string extra_json = device == "cpu" ? absl::StrFormat(", \"cpu_threads\": %d", (*threads)->threads()) : "";
  if (combine) {
    absl::StrAppendFormat(&extra_json, ", \"combine\": \"%s\", \"decode_reduce_us\": %.2f, \"fused_us\": %.2f, \"combine_ok\": %s",
                          ReduceOpName(*combine), combined.decode_reduce_us, combined.fused_us,
                          combined.bits_ok ? "true" : "false");
  }
  std::vector<CodecRow> rows{{"ucclzip", device, extra_json, *result}};
  auto rivals = RunRivals(*tensor, *dtype, *rival_chunks);
  if (!rivals.ok()) return Fail("nvCOMP benchmark failed: ", rivals.status());
  rows.insert(rows.end(), rivals->begin(), rivals->end());
  const EntropyReport entropy = MeasureEntropy(tensor->data(), tensor->size() / ElementSize(*dtype), *dtype);
  PrintRows(rows, *dtype, tensor->size(), entropy);
  if (combine && !absl::GetFlag(FLAGS_json)) {
    std::printf("combine %s: decode then reduce %.2f us, fused %.2f us (%.2fx), bits %s\n", ReduceOpName(*combine),
                combined.decode_reduce_us, combined.fused_us, combined.decode_reduce_us / combined.fused_us,
                combined.bits_ok ? "as the CPU's" : "DIFFER");
  }
  const bool ok = std::all_of(rows.begin(), rows.end(), [](const CodecRow& row) { return row.result.roundtrip_ok; });
  return ok && (!combine || combined.bits_ok) ? 0 : 1;
}

const RegisterSubcommand kRegister("codec", "codec ratio vs entropy bound, compress/decompress latency and GB/s",
                                   SharedFlags({FlagGroup::kMeasure}, {"device", "bytes", "input", "lane_symbols", "threads",
                                                                         "thread_clock", "combine", "vs", "nvcomp_chunk"}),
                                   CodecMain);

}  // namespace
}  // namespace ucclzip::bench
