// ucclzip-bench sendrecv: point-to-point bandwidth and latency of Communicator::Send/Recv, in
// nccl-tests' columns. --compress off (the default) measures the uncompressed path, which
// benchmarks/gpu/transport.sh sets beside ucx_perftest's figures for the same link; on, auto or
// a list such as off,on (the modes taking turns message by message, so that drift in the
// machine's speed affects all alike) adds the ratio, the wire bytes saved and the codec time.
// Messages are --dist tensors of --dtype; after the timed ones, every mode sends once more into
// a cleared buffer, which the receiver checks byte by byte.
//
//   shift  (default, as nccl-tests' sendrecv): every rank sends to rank+1 and receives from
//          rank-1 at the same time; time is one exchange (the slowest rank's median).
//   chain  every rank but the last sends to rank+1 and every rank but the first receives from
//          rank-1, at the same time: the links of the broadcast chain without its
//          dependencies (nothing is forwarded), as shift is the ring's; time is one exchange.
//   oneway (as ucx_perftest tag_bw): rank 0 sends to rank 1, which answers with a 1-byte
//          message; time is one message plus that acknowledgement. With --window N rank 0
//          sends N messages in one group (rank 1 receives them in one group, into N buffers)
//          before the acknowledgement, and time is the whole over N: messages back to back, as
//          ucx_perftest streams them, each one's latency (envelope, hand-offs, the
//          acknowledgement) overlapping with the messages before it.
// Then the 8-byte round trip between ranks 0 and 1 (ucx_perftest tag_lat reports half of it).
// Device calls go on the legacy default stream, or with --stream nonblocking on a stream of the
// benchmark's own (a created stream may be held where the legacy one never is: docs/PIPELINE.md,
// "Stream order"); either way each exchange waits for its Operations.
// Public API only: the ranks exchange their results through an allgather.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_cli.h"
#include "bench_registry.h"
#include "mode_turns.h"
#include "pipeline_bench_util.h"
#include "rank_launcher.h"
#include "tensor_gen.h"
#include "ucclzip/communicator.h"

ABSL_FLAG(ucclzip::bench::ByteSize, min_bytes, ucclzip::bench::ByteSize{8}, "smallest message (K/M/G); alias of -b/--minbytes");
ABSL_FLAG(ucclzip::bench::ByteSize, max_bytes, ucclzip::bench::ByteSize{64 << 20}, "largest message (K/M/G); alias of -e/--maxbytes");
ABSL_FLAG(std::string, pattern, "shift",
          "shift (every rank to rank+1) | chain (every rank but the last to rank+1) | oneway (rank 0 to rank 1)");
ABSL_FLAG(int, window, 1, "oneway: messages sent back to back (one group) per acknowledgement");
ABSL_FLAG(int, latency_iters, 2000, "round trips for the 8-byte latency (0 skips it)");
ABSL_FLAG(ucclzip::bench::ByteSize, block_bytes, ucclzip::bench::ByteSize{0},
          "transport block size (K/M/G); 0 keeps the communicator's default");
ABSL_FLAG(std::string, stream, "legacy",
          "device memory: the CUDA stream of the calls: legacy (the legacy default stream) | nonblocking (a "
          "stream of the benchmark's, created cudaStreamNonBlocking); every exchange waits for its Operations");

namespace ucclzip::bench {
namespace {

constexpr absl::Duration kWait = absl::Seconds(120);

enum class Pattern { kShift, kChain, kOneway };

absl::StatusOr<Pattern> ParsePattern(const std::string& name) {
  if (name == "shift") return Pattern::kShift;
  if (name == "chain") return Pattern::kChain;
  if (name == "oneway") return Pattern::kOneway;
  return absl::InvalidArgumentError(absl::StrCat("--pattern ", name, ": must be shift, chain or oneway"));
}

// Whom `rank` sends to and receives from in one exchange of `pattern` (-1: nobody).
struct Peers {
  int to = -1, from = -1;
};
Peers PeersOf(Pattern pattern, int rank, int size) {
  switch (pattern) {
    case Pattern::kShift:
      return {(rank + 1) % size, (rank + size - 1) % size};
    case Pattern::kChain:
      return {rank + 1 < size ? rank + 1 : -1, rank > 0 ? rank - 1 : -1};
    case Pattern::kOneway:
      break;
  }
  return {rank == 0 ? 1 : -1, rank == 1 ? 0 : -1};
}

// One message of the pattern in `mode` (oneway: one per buffer of `ins`, then the acknowledgement).
absl::Status Exchange(Communicator& comm, Pattern pattern, const void* out, const std::vector<void*>& ins,
                      uint64_t count, DataType dtype, CompressionMode mode, cudaStream_t stream) {
  const SendOptions send_options{.compression = mode};
  const int rank = comm.rank();
  if (pattern != Pattern::kOneway) {
    // One group, as nccl-tests does: on device memory each call on the legacy stream returns
    // only once done, so a Recv and then a Send outside a group would wait for each other around
    // the ring.
    const Peers peers = PeersOf(pattern, rank, comm.size());
    comm.GroupStart();
    if (peers.from >= 0) comm.Recv(ins[0], count, dtype, peers.from, stream);
    if (peers.to >= 0) comm.Send(out, count, dtype, peers.to, stream, send_options);
    return comm.GroupEnd().Wait(kWait);
  }
  uint8_t ack = 1;
  if (rank == 0) {
    Operation back = comm.Recv(&ack, 1, DataType::kUint8, 1, nullptr);
    comm.GroupStart();
    for (size_t k = 0; k < ins.size(); ++k) comm.Send(out, count, dtype, 1, stream, send_options);
    absl::Status status = comm.GroupEnd().Wait(kWait);
    status.Update(back.Wait(kWait));
    return status;
  }
  comm.GroupStart();
  for (void* in : ins) comm.Recv(in, count, dtype, 0, stream);
  absl::Status status = comm.GroupEnd().Wait(kWait);
  if (status.ok()) status = comm.Send(&ack, 1, DataType::kUint8, 0, nullptr).Wait(kWait);
  return status;
}

struct ModeResult {
  double time_us = 0;    // the slowest rank's median
  double mean_us = 0;    // the slowest rank's mean: where call times fall in two groups, the median lands in either
  double p10_us = 0;     // the slowest rank's 10th and 90th percentiles: how far apart those groups are
  double p90_us = 0;
  uint64_t wrong = 0;
  double ratio = 1;      // payload over wire bytes of the messages
  uint64_t saved = 0;    // wire bytes saved per message
  double encode_us = 0;  // oneway: the codec time per message on the sender (rank 0) ...
  double decode_us = 0;  // ... and on the receiver (rank 1)
  double codec_us = 0;   // shift: codec time per exchange, encode and decode, averaged over the ranks
  double codec_block_us = 0;  // every rank's codec time over the frames sent: one block's encode and decode
};

// What one rank saw of one mode, in the order GatherDoubles carries it.
struct RankTotals {
  double median_us = 0, mean_us = 0, p10_us = 0, p90_us = 0, wrong = 0, payload = 0, wire = 0, codec_seconds = 0,
         frames = 0;
  static constexpr size_t kFields = 9;
  void AppendTo(std::vector<double>& out) const {
    out.insert(out.end(), {median_us, mean_us, p10_us, p90_us, wrong, payload, wire, codec_seconds, frames});
  }
  static RankTotals From(const double* in) {
    return {in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8]};
  }
};

absl::StatusOr<std::vector<ModeResult>> MeasureSize(Communicator& comm, Pattern pattern, uint64_t bytes, DataType dtype,
                                                    const testing::Distribution& dist, bool device,
                                                    const std::vector<CompressionMode>& modes, cudaStream_t stream) {
  const int rank = comm.rank(), size = comm.size();
  const bool oneway = pattern == Pattern::kOneway;
  const uint64_t count = bytes / ElementSize(dtype);
  const Peers peers = PeersOf(pattern, rank, size);
  const bool sends = peers.to >= 0, receives = peers.from >= 0, active = sends || receives;
  const std::vector<uint8_t> want = testing::GenerateTensor(dtype, count, dist, 1 + std::max(peers.from, 0));
  absl::StatusOr<std::unique_ptr<TensorBuffer>> out =
      TensorBuffer::Create(testing::GenerateTensor(dtype, count, dist, 1 + rank), device);
  if (!out.ok()) return out.status();
  // oneway: a receive buffer per message of the window; the last iteration, the check, sends
  // one message, into the first.
  const int window = oneway ? absl::GetFlag(FLAGS_window) : 1;
  std::vector<std::unique_ptr<TensorBuffer>> in_buffers;
  std::vector<void*> ins;
  for (int k = 0; k < (receives ? window : 1); ++k) {
    absl::StatusOr<std::unique_ptr<TensorBuffer>> in = TensorBuffer::Create(std::vector<uint8_t>(want.size()), device);
    if (!in.ok()) return in.status();
    ins.push_back((*in)->data());
    in_buffers.push_back(std::move(*in));
  }
  ins.resize(window, ins[0]);  // the sender's count of messages: it writes none of them
  TensorBuffer& checked = *in_buffers[0];
  const int warmup = WarmupIterations(), iterations = std::max(Iterations(), 1);
  std::vector<std::vector<double>> times(modes.size());
  std::vector<RankTotals> totals(modes.size());
  if (absl::Status s = Barrier(comm); !s.ok()) return s;
  absl::Status warm = WarmUp(comm, WarmupDuration(), [&]() -> absl::Status {
    for (size_t m = 0; m < modes.size() && active; ++m) {
      if (absl::Status s = Exchange(comm, pattern, (*out)->data(), ins, count, dtype, modes[m], stream); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  });
  if (!warm.ok()) return warm;
  for (int i = 0; i <= warmup + iterations && active; ++i) {
    const bool check = i == warmup + iterations;
    for (size_t turn = 0; turn < modes.size(); ++turn) {
      const size_t m = ModeOfTurn(i, turn, modes.size());
      if (check && receives) {
        if (absl::Status s = checked.Clear(); !s.ok()) return s;
      }
      const CommunicatorStats before = comm.stats();
      const absl::Time start = absl::Now();
      const std::vector<void*> targets = check ? std::vector<void*>{ins[0]} : ins;
      if (absl::Status s = Exchange(comm, pattern, (*out)->data(), targets, count, dtype, modes[m], stream); !s.ok()) {
        return s;
      }
      const double elapsed_us = absl::ToDoubleMicroseconds(absl::Now() - start) / targets.size();
      if (check) {
        if (receives) {
          absl::StatusOr<uint64_t> count = checked.CountWrong(want, ElementSize(dtype));
          if (!count.ok()) return count.status();
          totals[m].wrong = static_cast<double>(*count);
        }
        continue;
      }
      if (i < warmup) continue;
      times[m].push_back(elapsed_us);
      const CommunicatorStats after = comm.stats();
      totals[m].codec_seconds += after.codec_seconds - before.codec_seconds;
      if (!sends) continue;  // oneway's acknowledgements are no messages of the measurement
      totals[m].payload += after.payload_bytes_sent - before.payload_bytes_sent;
      totals[m].wire += after.wire_bytes_sent - before.wire_bytes_sent;
      totals[m].frames += after.blocks_compressed - before.blocks_compressed;
    }
  }
  std::vector<double> mine;
  for (size_t m = 0; m < modes.size(); ++m) {
    totals[m].median_us = Median(times[m]);
    totals[m].mean_us = Mean(times[m]);
    totals[m].p10_us = Percentile(times[m], 0.1);
    totals[m].p90_us = Percentile(times[m], 0.9);
    totals[m].AppendTo(mine);
  }
  absl::StatusOr<std::vector<double>> all = GatherDoubles(comm, mine);
  if (!all.ok()) return all.status();
  std::vector<ModeResult> results(modes.size());
  const int links = pattern == Pattern::kShift ? size : pattern == Pattern::kChain ? size - 1 : 1;
  const double messages = static_cast<double>(iterations) * (oneway ? window : links);
  for (size_t m = 0; m < modes.size(); ++m) {
    ModeResult& result = results[m];
    double payload = 0, wire = 0, codec_seconds = 0, frames = 0;
    for (int r = 0; r < size; ++r) {
      const RankTotals t = RankTotals::From(all->data() + (r * modes.size() + m) * RankTotals::kFields);
      result.time_us = std::max(result.time_us, t.median_us);
      result.mean_us = std::max(result.mean_us, t.mean_us);
      result.p10_us = std::max(result.p10_us, t.p10_us);
      result.p90_us = std::max(result.p90_us, t.p90_us);
      result.wrong += static_cast<uint64_t>(t.wrong);
      payload += t.payload;
      wire += t.wire;
      codec_seconds += t.codec_seconds;
      frames += t.frames;
      if (oneway && r < 2) (r == 0 ? result.encode_us : result.decode_us) = t.codec_seconds * 1e6 / messages;
    }
    if (wire > 0) result.ratio = payload / wire;
    result.saved = payload > wire ? static_cast<uint64_t>((payload - wire) / messages) : 0;
    result.codec_us = codec_seconds * 1e6 / iterations / size;
    result.codec_block_us = frames > 0 ? codec_seconds * 1e6 / frames : 0;
  }
  return results;
}

// Median 8-byte round trip between ranks 0 and 1, in microseconds.
absl::StatusOr<double> MeasureLatency(Communicator& comm) {
  const int rank = comm.rank(), iterations = absl::GetFlag(FLAGS_latency_iters);
  uint64_t ping = 0x0102030405060708ull, pong = 0;
  std::vector<double> times;
  if (absl::Status s = Barrier(comm); !s.ok()) return s;
  for (int i = 0; i < iterations + iterations / 10 && rank < 2; ++i) {
    const absl::Time start = absl::Now();
    absl::Status status;
    if (rank == 0) {
      Operation back = comm.Recv(&pong, 8, DataType::kUint8, 1, nullptr);
      status = comm.Send(&ping, 8, DataType::kUint8, 1, nullptr).Wait(kWait);
      status.Update(back.Wait(kWait));
    } else {
      status = comm.Recv(&pong, 8, DataType::kUint8, 0, nullptr).Wait(kWait);
      if (status.ok()) status = comm.Send(&pong, 8, DataType::kUint8, 0, nullptr).Wait(kWait);
    }
    if (!status.ok()) return status;
    if (i >= iterations / 10) times.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  if (rank == 0 && pong != ping) return absl::DataLossError("the 8-byte round trip came back changed");
  return Median(times);
}

void PrintRow(bool json, Pattern pattern, const Communicator& comm, uint64_t bytes, DataType dtype,
              const std::vector<CompressionMode>& modes, size_t m, const std::vector<ModeResult>& all) {
  const ModeResult& r = all[m];
  const bool oneway = pattern == Pattern::kOneway;
  // The bytes a message of whole elements carries, as the rows print them and the bandwidth
  // divides them (the size asked for, rounded down to whole elements).
  const uint64_t count = bytes / ElementSize(dtype);
  const uint64_t size = count * ElementSize(dtype);
  const double algbw = r.time_us > 0 ? size / r.time_us / 1e3 : 0;
  // Throughput against the first mode listed, measured in the same turns.
  const double vs_first = r.time_us > 0 ? all[0].time_us / r.time_us : 0;
  const CommunicatorOptions& options = comm.options();
  const auto wrong = static_cast<unsigned long long>(r.wrong);
  if (json) {
    const std::string codec =
        (oneway ? absl::StrFormat("\"encode_us\":%.1f,\"decode_us\":%.1f", r.encode_us, r.decode_us)
                : absl::StrFormat("\"codec_us\":%.1f", r.codec_us)) +
        absl::StrFormat(",\"codec_block_us\":%.1f", r.codec_block_us);
    std::printf("{\"bench\":\"sendrecv\",\"size\":%llu,\"count\":%llu,\"type\":\"%s\",\"compress\":\"%s\","
                "\"time_us\":%.2f,\"mean_us\":%.2f,\"p10_us\":%.2f,\"p90_us\":%.2f,\"algbw_GBps\":%.4f,\"busbw_GBps\":%.4f,\"ratio\":%.4f,\"wire_saved\":%llu,%s,"
                "\"vs_first\":%.4f,\"first\":\"%s\",\"wrong\":%llu,\"ranks\":%d,\"memory\":\"%s\",\"tls\":\"%s\","
                "\"pattern\":\"%s\",\"window\":%d,\"stream\":\"%s\",\"dist\":\"%s\",\"pipeline_block\":%zu,\"min_pipeline_block\":%zu,\"block\":%zu,\"path\":\"%s\"}\n",
                static_cast<unsigned long long>(size), static_cast<unsigned long long>(count), DataTypeName(dtype),
                CompressionName(modes[m]), r.time_us, r.mean_us, r.p10_us, r.p90_us, algbw, algbw, r.ratio,
                static_cast<unsigned long long>(r.saved), codec.c_str(), vs_first, CompressionName(modes[0]), wrong, comm.size(),
                absl::GetFlag(FLAGS_memory).c_str(),
                options.ucx_transports.empty() ? "default" : options.ucx_transports.c_str(),
                absl::GetFlag(FLAGS_pattern).c_str(), absl::GetFlag(FLAGS_window), absl::GetFlag(FLAGS_stream).c_str(),
                absl::GetFlag(FLAGS_dist).c_str(), options.pipeline_block_bytes,
                comm.options().min_pipeline_block_bytes, *comm.options().block_bytes, PathName(comm, absl::GetFlag(FLAGS_memory) == "device"));
    return;
  }
  const std::string codec = oneway ? absl::StrFormat("%10.1f %10.1f", r.encode_us, r.decode_us)
                                   : absl::StrFormat("%10.1f", r.codec_us);
  std::printf("%12llu %12llu %6s %8s %10.2f %12.3f %12.3f %7.3f %12llu %s %8.3fx %7llu\n",
              static_cast<unsigned long long>(size), static_cast<unsigned long long>(count), DataTypeName(dtype),
              CompressionName(modes[m]), r.time_us, algbw, algbw, r.ratio, static_cast<unsigned long long>(r.saved),
              codec.c_str(), vs_first, wrong);
}

absl::Status RunRank() {
  absl::StatusOr<BootstrapConfig> bootstrap = BootstrapConfigFromEnvironment();
  if (!bootstrap.ok()) return bootstrap.status();
  absl::StatusOr<bool> use_device = UseDeviceMemory(bootstrap->local_rank);
  if (!use_device.ok()) return use_device.status();
  const bool device = *use_device;
  const std::string memory = device ? "device" : "host";
  absl::StatusOr<Pattern> pattern = ParsePattern(absl::GetFlag(FLAGS_pattern));
  if (!pattern.ok()) return pattern.status();
  const bool oneway = *pattern == Pattern::kOneway;
  if (const int window = absl::GetFlag(FLAGS_window); window < 1 || (!oneway && window != 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--window ", window, ": must be at least 1, and above 1 only with --pattern oneway"));
  }
  absl::StatusOr<DataType> dtype = ParseDataType(DataTypeFlag());
  if (!dtype.ok()) return dtype.status();
  const std::string compress = CompressFlag("off");
  absl::StatusOr<std::vector<CompressionMode>> modes = ParseCompressionList(compress);
  if (!modes.ok()) return modes.status();
  absl::StatusOr<testing::Distribution> dist = testing::ParseDistribution(absl::GetFlag(FLAGS_dist));
  if (!dist.ok()) return dist.status();
  absl::StatusOr<std::unique_ptr<BenchStream>> stream = BenchStream::Create(absl::GetFlag(FLAGS_stream), device);
  if (!stream.ok()) return stream.status();

  CommunicatorOptions options;
  if (absl::GetFlag(FLAGS_block_bytes).bytes != 0) options.block_bytes = absl::GetFlag(FLAGS_block_bytes).bytes;
  absl::StatusOr<std::unique_ptr<Communicator>> communicator = CreateCommunicator(*bootstrap, options);
  if (!communicator.ok()) return communicator.status();
  Communicator& comm = **communicator;
  if (comm.size() < 2) return absl::InvalidArgumentError("sendrecv needs at least 2 ranks");
  const bool json = absl::GetFlag(FLAGS_json), report = comm.rank() == 0;
  const std::string tls = comm.options().ucx_transports.empty() ? "default" : comm.options().ucx_transports;
  if (report && !json) {
    std::printf("# ucclzip-bench sendrecv: %d ranks, %s memory%s, UCX_TLS=%s, pattern %s (window %d), compress %s "
                "(taking turns), %s, %zu- to %zu-byte pipeline blocks, %zu-byte transport blocks\n",
                comm.size(), memory.c_str(), device ? (comm.device_memory_direct() ? " (direct)" : " (staged)") : "",
                tls.c_str(), absl::GetFlag(FLAGS_pattern).c_str(), absl::GetFlag(FLAGS_window), compress.c_str(), dist->Name().c_str(),
                comm.options().min_pipeline_block_bytes, comm.options().pipeline_block_bytes, *comm.options().block_bytes);
    const std::string codec =
        oneway ? absl::StrFormat("%10s %10s", "encode(us)", "decode(us)") : absl::StrFormat("%10s", "codec(us)");
    std::printf("#%11s %12s %6s %8s %10s %12s %12s %7s %12s %s %9s %7s\n", "size", "count", "type", "compress",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "ratio", "saved(B)", codec.c_str(), "vs first", "#wrong");
  }
  const uint64_t min_bytes = MinBytes(absl::GetFlag(FLAGS_min_bytes).bytes);
  const uint64_t max_bytes = MaxBytes(absl::GetFlag(FLAGS_max_bytes).bytes);
  uint64_t wrong = 0;
  uint64_t last_count = 0;  // sizes of the same whole elements as the size before: measured once
  for (uint64_t bytes = std::max<uint64_t>(min_bytes, ElementSize(*dtype)); bytes <= max_bytes; bytes = NextSize(bytes)) {
    if (bytes / ElementSize(*dtype) == last_count) continue;
    last_count = bytes / ElementSize(*dtype);
    absl::StatusOr<std::vector<ModeResult>> results =
        MeasureSize(comm, *pattern, bytes, *dtype, *dist, device, *modes, (*stream)->get());
    if (!results.ok()) return results.status();
    if (!report) continue;
    for (const ModeResult& result : *results) wrong += result.wrong;
    for (size_t m = 0; m < modes->size(); ++m) PrintRow(json, *pattern, comm, bytes, *dtype, *modes, m, *results);
    std::fflush(stdout);
  }
  if (absl::GetFlag(FLAGS_latency_iters) > 0) {
    absl::StatusOr<double> rtt = MeasureLatency(comm);
    if (!rtt.ok()) return rtt.status();
    if (report && json) {
      std::printf("{\"bench\":\"sendrecv_latency\",\"size\":8,\"rtt_us\":%.2f,\"oneway_us\":%.2f,\"tls\":\"%s\"}\n", *rtt,
                  *rtt / 2, tls.c_str());
    } else if (report) {
      std::printf("# 8 B round trip (ranks 0<->1, host memory): median %.2f us, one-way %.2f us\n", *rtt, *rtt / 2);
    }
  }
  return CheckedElements(wrong);
}

int SendRecvMain(const std::vector<std::string>&) {
  if (absl::Status sweep = CheckSweepFlags(MinBytes(absl::GetFlag(FLAGS_min_bytes).bytes),
                                           MaxBytes(absl::GetFlag(FLAGS_max_bytes).bytes));
      !sweep.ok()) {
    std::fprintf(stderr, "sendrecv: %s\n", std::string(sweep.message()).c_str());
    return 2;
  }
  return RunRankOrLaunch("sendrecv", absl::GetFlag(FLAGS_ranks), RunRank);
}

const RegisterSubcommand kRegister(
    "sendrecv", "Send/Recv bandwidth (nccl-tests' columns) and 8 B latency; --compress compares modes",
    SharedFlags({FlagGroup::kMeasure, FlagGroup::kCommunicator, FlagGroup::kSweep},
                {"min_bytes", "max_bytes", "pattern", "window", "latency_iters", "block_bytes", "stream"}),
    SendRecvMain);

}  // namespace
}  // namespace ucclzip::bench
