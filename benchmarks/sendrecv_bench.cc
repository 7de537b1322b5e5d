// ucclzip-bench sendrecv: point-to-point bandwidth and latency of the transport (uncompressed),
// in nccl-tests' columns, next to which ucx_perftest's figures can be read (benchmarks/gpu/transport.sh).
// With --compress on|off|auto it measures the Communicator's Send/Recv (the pipeline) instead,
// on --dist tensors, and adds the ratio and the wire bytes saved.
//
//   shift  (default, as nccl-tests' sendrecv): every rank sends to rank+1 and receives from
//          rank-1 at the same time; time is one exchange.
//   oneway (as ucx_perftest tag_bw): rank 0 sends to rank 1, which answers with an empty
//          message; time is one message plus that acknowledgement.
// Then the 8-byte round trip between ranks 0 and 1 (ucx_perftest tag_lat reports half of it).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_format.h"
#include "bench_cli.h"
#include "bench_registry.h"
#include "pipeline_bench_util.h"
#include "tensor_gen.h"
#include "rank_launcher.h"
#include "transport/communicator_access.h"

ABSL_FLAG(ucclzip::bench::ByteSize, min_bytes, ucclzip::bench::ByteSize{8}, "smallest message (K/M/G); alias of -b/--minbytes");
ABSL_FLAG(ucclzip::bench::ByteSize, max_bytes, ucclzip::bench::ByteSize{64 << 20}, "largest message (K/M/G); alias of -e/--maxbytes");
ABSL_FLAG(std::string, pattern, "shift", "shift (every rank to rank+1) | oneway (rank 0 to rank 1)");
ABSL_FLAG(int, latency_iters, 2000, "round trips for the 8-byte latency (0 skips it)");
ABSL_FLAG(ucclzip::bench::ByteSize, block_bytes, ucclzip::bench::ByteSize{0},
          "transport block size (K/M/G); 0 keeps the communicator's default");

namespace ucclzip::bench {
namespace {

using transport::MemoryType;
using transport::OpTag;
using transport::Transport;

constexpr absl::Duration kWait = absl::Seconds(120);

// A message buffer in host or device memory, with its pattern kept on the host.
class Buffer {
 public:
  static absl::StatusOr<Buffer> Create(size_t bytes, MemoryType type) {
    Buffer buffer;
    buffer.type_ = type;
    buffer.bytes_ = bytes;
    buffer.host_.assign(std::max<size_t>(bytes, 1), 0);
    if (type == MemoryType::kDevice) {
      if (cudaMalloc(&buffer.device_, std::max<size_t>(bytes, 1)) != cudaSuccess) {
        cudaGetLastError();
        return absl::ResourceExhaustedError(absl::StrCat("cudaMalloc of ", bytes, " bytes failed"));
      }
    }
    return buffer;
  }
  Buffer() = default;
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    std::swap(type_, other.type_);
    std::swap(bytes_, other.bytes_);
    std::swap(host_, other.host_);
    std::swap(device_, other.device_);
    return *this;
  }
  ~Buffer() {
    if (device_ != nullptr) cudaFree(device_);
  }

  void* data() { return type_ == MemoryType::kDevice ? device_ : host_.data(); }
  // Writes a pattern of non-zero bytes that depends on `seed`.
  void Fill(uint64_t seed) {
    for (size_t i = 0; i < bytes_; ++i) host_[i] = static_cast<uint8_t>(1 + (i * 131 + seed * 7) % 251);
    if (device_ != nullptr) cudaMemcpy(device_, host_.data(), bytes_, cudaMemcpyHostToDevice);
  }
  // Bytes that differ from Fill(seed)'s pattern.
  uint64_t CountWrong(uint64_t seed) {
    if (device_ != nullptr) cudaMemcpy(host_.data(), device_, bytes_, cudaMemcpyDeviceToHost);
    uint64_t wrong = 0;
    for (size_t i = 0; i < bytes_; ++i) wrong += host_[i] != static_cast<uint8_t>(1 + (i * 131 + seed * 7) % 251);
    return wrong;
  }

 private:
  MemoryType type_ = MemoryType::kHost;
  size_t bytes_ = 0;
  std::vector<uint8_t> host_;
  void* device_ = nullptr;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

absl::Status WaitBoth(const std::shared_ptr<transport::Request>& a, const std::shared_ptr<transport::Request>& b) {
  absl::Status status = a->Wait(absl::Now() + kWait);
  status.Update(b->Wait(absl::Now() + kWait));
  return status;
}

struct Measured {
  double time_us = 0;
  uint64_t wrong = 0;
};

// One size: warm-up, timed iterations (median), then the receive buffers are checked.
absl::StatusOr<Measured> MeasureSize(Transport& transport, transport::Bootstrap& bootstrap, size_t bytes,
                                     MemoryType type, bool oneway, uint32_t* sequence) {
  const int rank = transport.rank(), size = transport.size();
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  const bool active = !oneway || rank < 2;
  absl::StatusOr<Buffer> out = Buffer::Create(bytes, type);
  if (!out.ok()) return out.status();
  absl::StatusOr<Buffer> in = Buffer::Create(bytes, type);
  if (!in.ok()) return in.status();
  out->Fill(rank);
  const int iterations = WarmupIterations() + Iterations();
  std::vector<double> times;
  if (absl::Status s = bootstrap.Barrier(absl::Now() + kWait); !s.ok()) return s;
  for (int i = 0; i < iterations && active; ++i) {
    const OpTag tag{(*sequence)++ & transport::kMaxSequence, 0};
    absl::Time start = absl::Now();
    absl::Status status;
    if (!oneway) {
      auto recv = transport.Recv(previous, in->data(), bytes, type, tag);
      auto send = transport.Send(next, out->data(), bytes, type, tag);
      status = WaitBoth(recv, send);
    } else if (rank == 0) {
      auto ack = transport.Recv(1, nullptr, 0, MemoryType::kHost, OpTag{tag.sequence, 1});
      auto send = transport.Send(1, out->data(), bytes, type, tag);
      status = WaitBoth(send, ack);
    } else {
      status = transport.Recv(0, in->data(), bytes, type, tag)->Wait(absl::Now() + kWait);
      if (status.ok()) status = transport.Send(0, nullptr, 0, MemoryType::kHost, OpTag{tag.sequence, 1})->Wait(absl::Now() + kWait);
    }
    if (!status.ok()) return status;
    if (i >= WarmupIterations()) times.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  Measured measured{Median(times), 0};
  const bool receives = !oneway || rank == 1;
  if (receives) measured.wrong = in->CountWrong(oneway ? 0 : previous);
  // Every rank's count reaches rank 0, which reports the sum.
  absl::StatusOr<std::vector<std::string>> counts = bootstrap.AllGather(absl::StrCat(measured.wrong), absl::Now() + kWait);
  if (!counts.ok()) return counts.status();
  measured.wrong = 0;
  for (const std::string& count : *counts) measured.wrong += std::stoull(count);
  return measured;
}

struct PipelineMeasured {
  double time_us = 0;
  uint64_t wrong = 0;
  double ratio = 1;
  uint64_t wire_saved = 0;  // per message
  // Per message, GPU or CPU codec time from launch to done as the pipeline saw it (stats).
  double encode_us = 0;
  double decode_us = 0;
};

// What one mode's messages added to a rank's statistics.
struct ModeTotals {
  uint64_t payload = 0;
  uint64_t wire = 0;
  double codec_seconds = 0;
  void Add(const CommunicatorStats& before, const CommunicatorStats& after) {
    payload += after.payload_bytes_sent - before.payload_bytes_sent;
    wire += after.wire_bytes_sent - before.wire_bytes_sent;
    codec_seconds += after.codec_seconds - before.codec_seconds;
  }
};

// One message through Communicator::Send/Recv: rank 0 sends to rank 1, which answers with an
// empty acknowledgement.
absl::Status OneMessage(Communicator& comm, void* data, uint64_t count, DataType dtype, CompressionMode mode) {
  uint8_t ack = 0;
  if (comm.rank() == 0) {
    Operation back = comm.Recv(&ack, 1, DataType::kUint8, 1, nullptr);
    absl::Status status = comm.Send(data, count, dtype, 1, nullptr, SendOptions{.compression = mode}).Wait(kWait);
    status.Update(back.Wait(kWait));
    return status;
  }
  absl::Status status = comm.Recv(data, count, dtype, 0, nullptr).Wait(kWait);
  if (status.ok()) status = comm.Send(&ack, 1, DataType::kUint8, 0, nullptr).Wait(kWait);
  return status;
}

// One size through Communicator::Send/Recv, oneway, for every mode of `modes`: the modes take
// turns message by message (each iteration starting with the next one), so that drift in the
// machine's speed affects all alike and their ratio is fair. Afterwards every mode sends once
// more into a cleared buffer, which rank 1 checks byte by byte.
absl::StatusOr<std::vector<PipelineMeasured>> MeasurePipelineSize(Communicator& comm, transport::Bootstrap& bootstrap,
                                                                  size_t bytes, DataType dtype, bool device,
                                                                  const std::vector<CompressionMode>& modes) {
  const uint64_t count = bytes / ElementSize(dtype);
  absl::StatusOr<testing::Distribution> dist = testing::ParseDistribution(absl::GetFlag(FLAGS_dist));
  if (!dist.ok()) return dist.status();
  const std::vector<uint8_t> tensor = testing::GenerateTensor(dtype, count, *dist, 1);
  absl::StatusOr<std::unique_ptr<TensorBuffer>> buffer =
      TensorBuffer::Create(comm.rank() == 0 ? tensor : std::vector<uint8_t>(tensor.size()), device);
  if (!buffer.ok()) return buffer.status();
  const int warmup = WarmupIterations(), iterations = warmup + Iterations();
  std::vector<std::vector<double>> times(modes.size());
  std::vector<ModeTotals> totals(modes.size());
  std::vector<uint64_t> wrong(modes.size(), 0);
  if (absl::Status s = bootstrap.Barrier(absl::Now() + kWait); !s.ok()) return s;
  for (int i = 0; i < iterations + 1 && comm.rank() < 2; ++i) {
    const bool check = i == iterations;
    for (size_t turn = 0; turn < modes.size(); ++turn) {
      const size_t m = (turn + i) % modes.size();
      if (check && comm.rank() == 1) (*buffer)->Clear();
      const CommunicatorStats before = comm.stats();
      const absl::Time start = absl::Now();
      if (absl::Status s = OneMessage(comm, (*buffer)->data(), count, dtype, modes[m]); !s.ok()) return s;
      const double elapsed_us = absl::ToDoubleMicroseconds(absl::Now() - start);
      if (check) {
        if (comm.rank() == 1) wrong[m] = (*buffer)->CountWrong(tensor);
        continue;
      }
      totals[m].Add(before, comm.stats());
      if (i >= warmup) times[m].push_back(elapsed_us);
    }
  }
  // Rank 0 knows the wire bytes and encode time, rank 1 the decode time and the damage.
  std::string report;
  for (size_t m = 0; m < modes.size(); ++m) {
    absl::StrAppend(&report, m == 0 ? "" : ";", wrong[m], " ", totals[m].codec_seconds * 1e6 / iterations);
  }
  absl::StatusOr<std::vector<std::string>> reports = bootstrap.AllGather(report, absl::Now() + kWait);
  if (!reports.ok()) return reports.status();
  std::vector<PipelineMeasured> measured(modes.size());
  for (size_t m = 0; m < modes.size(); ++m) {
    PipelineMeasured& out = measured[m];
    out.time_us = Median(times[m]);
    if (totals[m].wire > 0) {
      out.ratio = static_cast<double>(totals[m].payload) / totals[m].wire;
      out.wire_saved = totals[m].payload > totals[m].wire ? (totals[m].payload - totals[m].wire) / iterations : 0;
    }
    for (size_t r = 0; r < reports->size() && r < 2; ++r) {
      std::vector<std::string> per_mode = absl::StrSplit((*reports)[r], ';');
      std::vector<std::string> fields = absl::StrSplit(per_mode.at(m), ' ');
      out.wrong += std::stoull(fields[0]);
      (r == 0 ? out.encode_us : out.decode_us) = std::stod(fields[1]);
    }
  }
  return measured;
}

absl::Status RunPipelineRank(const BootstrapConfig& config, bool device, DataType dtype) {
  absl::StatusOr<std::vector<CompressionMode>> modes = ParseCompressionList(absl::GetFlag(FLAGS_compress));
  if (!modes.ok()) return modes.status();
  transport::TransportOptions options;
  options.ucx_transports = absl::GetFlag(FLAGS_tls);
  options.pipeline_block_bytes = absl::GetFlag(FLAGS_pipeline_block).bytes;
  if (absl::GetFlag(FLAGS_block_bytes).bytes != 0) options.block_bytes = absl::GetFlag(FLAGS_block_bytes).bytes;
  auto communicator = internal::CommunicatorAccess::Create(config, options);
  if (!communicator.ok()) return communicator.status();
  Communicator& comm = **communicator;
  transport::Bootstrap& bootstrap = internal::CommunicatorAccess::BootstrapOf(comm);
  const bool json = absl::GetFlag(FLAGS_json), report = comm.rank() == 0;
  const std::string tls = options.ucx_transports.empty() ? "default" : options.ucx_transports;
  if (report && !json) {
    std::printf("# ucclzip-bench sendrecv: pipeline, compress %s (taking turns), %s memory, UCX_TLS=%s, %s, oneway, "
                "%zu-byte blocks\n",
                absl::GetFlag(FLAGS_compress).c_str(), device ? "device" : "host", tls.c_str(),
                absl::GetFlag(FLAGS_dist).c_str(), options.pipeline_block_bytes);
    std::printf("#%11s %12s %6s %8s %10s %12s %7s %12s %10s %10s %9s %7s\n", "size", "count", "type", "compress",
                "time(us)", "algbw(GB/s)", "ratio", "saved(B)", "encode(us)", "decode(us)", "vs first", "#wrong");
  }
  const size_t min_bytes = MinBytes(absl::GetFlag(FLAGS_min_bytes).bytes), max_bytes = MaxBytes(absl::GetFlag(FLAGS_max_bytes).bytes);
  for (size_t bytes = std::max<size_t>(min_bytes, ElementSize(dtype)); bytes <= max_bytes; bytes = NextSize(bytes)) {
    absl::StatusOr<std::vector<PipelineMeasured>> all = MeasurePipelineSize(comm, bootstrap, bytes, dtype, device, *modes);
    if (!all.ok()) return all.status();
    if (!report) continue;
    for (size_t m = 0; m < modes->size(); ++m) {
      const PipelineMeasured& r = (*all)[m];
      const double algbw = r.time_us > 0 ? bytes / r.time_us / 1e3 : 0;
      // Throughput against the first mode listed, measured in the same turns.
      const double speedup = r.time_us > 0 ? (*all)[0].time_us / r.time_us : 0;
      if (json) {
        std::printf("{\"bench\":\"sendrecv\",\"size\":%zu,\"type\":\"%s\",\"time_us\":%.2f,\"algbw_GBps\":%.4f,"
                    "\"ratio\":%.4f,\"wire_saved\":%llu,\"encode_us\":%.1f,\"decode_us\":%.1f,\"vs_first\":%.4f,"
                    "\"first\":\"%s\",\"wrong\":%llu,\"memory\":\"%s\",\"tls\":\"%s\",\"compress\":\"%s\","
                    "\"dist\":\"%s\",\"pipeline_block\":%zu}\n",
                    bytes, DataTypeName(dtype), r.time_us, algbw, r.ratio, static_cast<unsigned long long>(r.wire_saved),
                    r.encode_us, r.decode_us, speedup, CompressionName((*modes)[0]),
                    static_cast<unsigned long long>(r.wrong), device ? "device" : "host", tls.c_str(),
                    CompressionName((*modes)[m]), absl::GetFlag(FLAGS_dist).c_str(), options.pipeline_block_bytes);
      } else {
        std::printf("%12zu %12zu %6s %8s %10.2f %12.3f %7.3f %12llu %10.1f %10.1f %8.3fx %7llu\n", bytes,
                    bytes / ElementSize(dtype), DataTypeName(dtype), CompressionName((*modes)[m]), r.time_us, algbw,
                    r.ratio, static_cast<unsigned long long>(r.wire_saved), r.encode_us, r.decode_us, speedup,
                    static_cast<unsigned long long>(r.wrong));
      }
    }
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

// Median 8-byte round trip between ranks 0 and 1, in microseconds.
absl::StatusOr<double> MeasureLatency(Transport& transport, transport::Bootstrap& bootstrap, uint32_t* sequence) {
  const int rank = transport.rank();
  uint64_t ping = 0x0102030405060708ull, pong = 0;
  const int iterations = absl::GetFlag(FLAGS_latency_iters);
  std::vector<double> times;
  if (absl::Status s = bootstrap.Barrier(absl::Now() + kWait); !s.ok()) return s;
  for (int i = 0; i < iterations + iterations / 10 && rank < 2; ++i) {
    const OpTag tag{(*sequence)++ & transport::kMaxSequence, 0};
    absl::Time start = absl::Now();
    absl::Status status;
    if (rank == 0) {
      auto back = transport.Recv(1, &pong, 8, MemoryType::kHost, tag);
      status = transport.Send(1, &ping, 8, MemoryType::kHost, tag)->Wait(absl::Now() + kWait);
      status.Update(back->Wait(absl::Now() + kWait));
    } else {
      status = transport.Recv(0, &pong, 8, MemoryType::kHost, tag)->Wait(absl::Now() + kWait);
      if (status.ok()) status = transport.Send(0, &pong, 8, MemoryType::kHost, tag)->Wait(absl::Now() + kWait);
    }
    if (!status.ok()) return status;
    if (i >= iterations / 10) times.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  if (rank == 0 && pong != ping) return absl::DataLossError("the 8-byte round trip came back changed");
  return Median(times);
}

absl::Status RunRank() {
  absl::StatusOr<BootstrapConfig> bootstrap_config = BootstrapConfigFromEnvironment();
  if (!bootstrap_config.ok()) return bootstrap_config.status();
  const std::string memory = absl::GetFlag(FLAGS_memory);
  if (memory != "host" && memory != "device") return absl::InvalidArgumentError("--memory must be host or device");
  const MemoryType type = memory == "host" ? MemoryType::kHost : MemoryType::kDevice;
  if (type == MemoryType::kDevice) {
    if (transport::CudaDeviceCount() == 0) return absl::FailedPreconditionError("--memory device needs a CUDA device");
    int local = std::max(bootstrap_config->local_rank, 0);
    cudaSetDevice(local % transport::CudaDeviceCount());
  }
  const std::string pattern = absl::GetFlag(FLAGS_pattern);
  if (pattern != "shift" && pattern != "oneway") return absl::InvalidArgumentError("--pattern must be shift or oneway");
  absl::StatusOr<DataType> dtype = ParseDataType(DataTypeFlag());
  if (!dtype.ok()) return dtype.status();
  if (!absl::GetFlag(FLAGS_compress).empty()) return RunPipelineRank(*bootstrap_config, type == MemoryType::kDevice, *dtype);

  transport::TransportOptions options;
  options.ucx_transports = absl::GetFlag(FLAGS_tls);
  if (absl::GetFlag(FLAGS_block_bytes).bytes != 0) options.block_bytes = absl::GetFlag(FLAGS_block_bytes).bytes;
  auto communicator = internal::CommunicatorAccess::Create(*bootstrap_config, options);
  if (!communicator.ok()) return communicator.status();
  Transport& transport = internal::CommunicatorAccess::TransportOf(**communicator);
  transport::Bootstrap& bootstrap = internal::CommunicatorAccess::BootstrapOf(**communicator);
  if (transport.size() < 2) return absl::InvalidArgumentError("sendrecv needs at least 2 ranks");
  const bool json = absl::GetFlag(FLAGS_json);
  const bool report = transport.rank() == 0;
  const std::string tls = options.ucx_transports.empty() ? "default" : options.ucx_transports;
  if (report && !json) {
    std::printf("# ucclzip-bench sendrecv: %d ranks, %s memory (%s), UCX_TLS=%s, pattern %s\n", transport.size(),
                memory.c_str(),
                type == MemoryType::kHost ? "direct" : transport.device_memory_direct() ? "direct" : "staged",
                tls.c_str(), pattern.c_str());
    std::printf("#%11s %12s %6s %10s %12s %12s %7s\n", "size", "count", "type", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
                "#wrong");
  }
  uint32_t sequence = 0;
  const size_t min_bytes = MinBytes(absl::GetFlag(FLAGS_min_bytes).bytes), max_bytes = MaxBytes(absl::GetFlag(FLAGS_max_bytes).bytes);
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes = NextSize(bytes)) {
    absl::StatusOr<Measured> measured = MeasureSize(transport, bootstrap, bytes, type, pattern == "oneway", &sequence);
    if (!measured.ok()) return measured.status();
    const double algbw = measured->time_us > 0 ? bytes / measured->time_us / 1e3 : 0;
    const uint64_t count = bytes / ElementSize(*dtype);
    if (!report) continue;
    if (json) {
      std::printf(
          "{\"bench\":\"sendrecv\",\"size\":%zu,\"count\":%llu,\"type\":\"%s\",\"time_us\":%.2f,\"algbw_GBps\":%.4f,"
          "\"busbw_GBps\":%.4f,\"wrong\":%llu,\"ranks\":%d,\"memory\":\"%s\",\"tls\":\"%s\",\"pattern\":\"%s\"}\n",
          bytes, static_cast<unsigned long long>(count), std::string(DataTypeName(*dtype)).c_str(), measured->time_us,
          algbw, algbw, static_cast<unsigned long long>(measured->wrong), transport.size(), memory.c_str(), tls.c_str(),
          pattern.c_str());
    } else {
      std::printf("%12zu %12llu %6s %10.2f %12.3f %12.3f %7llu\n", bytes, static_cast<unsigned long long>(count),
                  std::string(DataTypeName(*dtype)).c_str(), measured->time_us, algbw, algbw,
                  static_cast<unsigned long long>(measured->wrong));
    }
    std::fflush(stdout);
    if (bytes == 0 && max_bytes == 0) break;
  }
  if (absl::GetFlag(FLAGS_latency_iters) > 0) {
    absl::StatusOr<double> rtt = MeasureLatency(transport, bootstrap, &sequence);
    if (!rtt.ok()) return rtt.status();
    if (report && json) {
      std::printf("{\"bench\":\"sendrecv_latency\",\"size\":8,\"rtt_us\":%.2f,\"oneway_us\":%.2f,\"tls\":\"%s\"}\n", *rtt,
                  *rtt / 2, tls.c_str());
    } else if (report) {
      std::printf("# 8 B round trip (ranks 0<->1, host memory): median %.2f us, one-way %.2f us\n", *rtt, *rtt / 2);
    }
  }
  return absl::OkStatus();
}

int SendRecvMain(const std::vector<std::string>&) {
  return RunRankOrLaunch("sendrecv", absl::GetFlag(FLAGS_ranks), RunRank);
}

const RegisterSubcommand kRegister("sendrecv", "point-to-point bandwidth and 8 B latency; --compress: the pipeline",
                                   SendRecvMain);

}  // namespace
}  // namespace ucclzip::bench
