// ucclzip-bench allreduce | allgather | reducescatter | broadcast | reduce: the collectives in
// nccl-tests' conventions (its flags, its columns, its size and bus-bandwidth definitions),
// with compression modes taking turns iteration by iteration so that drift affects all alike.
//
//   size: nccl-tests' "size": the bytes of count x type for allreduce, broadcast and reduce, the
//         whole gathered buffer for allgather, the whole input for reducescatter; of the count
//         the call took, as nccl-tests prints it (the size asked for rounded down to whole
//         elements, and for allgather and reducescatter to a multiple of the ranks).
//   time: the slowest rank's median over --iters of its time for one call (as sendrecv's).
//   busbw = algbw x factor: allreduce 2(n-1)/n; allgather and reducescatter (n-1)/n; broadcast
//         and reduce 1.
//   ratio: user bytes over wire bytes of what every rank sent in that mode.
//   #wrong: N/A (JSON null) with -c 0, where nothing is compared; with -c 1, each mode runs once more into a cleared buffer, whose elements are
//         compared bit for bit with the reference computed on the CPU in the documented order (a reduce's root only).
//   --in_place: nccl-tests' in-place placement, one buffer for input and output (allgather's
//         input at the rank's chunk of the output, reducescatter's output at the rank's chunk of
//         the input), the input written back before every call (untimed), since a reduction
//         overwrites it.
// Public API only: the ranks exchange their timings through the collectives themselves.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench_cli.h"
#include "bench_registry.h"
#include "collective_reference.h"
#include "mode_turns.h"
#include "pipeline_bench_util.h"
#include "rank_launcher.h"
#include "tensor_gen.h"
#include "ucclzip/communicator.h"

ABSL_FLAG(bool, in_place, false, "nccl-tests' in-place placement: one buffer holds the input and the output");

namespace ucclzip::bench {
namespace {

using testing::Collective;
using testing::CollectiveShape;

constexpr absl::Duration kWait = absl::Minutes(5);
constexpr uint64_t kDefaultMinBytes = 32 << 20, kDefaultMaxBytes = 32 << 20;

// One row per subcommand: what nccl-tests calls it, and its sizes and bus bandwidth.
struct CollectiveBench {
  Collective kind;
  const char* summary;
  // NCCL's count is per rank (of the gathered output, of the scattered input): size / n.
  bool count_per_rank;
  // busbw / algbw at n ranks.
  double (*bus_factor)(int world);
};

const CollectiveBench kBenches[] = {
    {Collective::kAllReduce, "ring allreduce in nccl-tests' columns, modes taking turns", false,
     [](int n) { return 2.0 * (n - 1) / n; }},
    {Collective::kAllGather, "ring allgather in nccl-tests' columns, modes taking turns", true,
     [](int n) { return double(n - 1) / n; }},
    {Collective::kReduceScatter, "ring reduce-scatter in nccl-tests' columns, modes taking turns", true,
     [](int n) { return double(n - 1) / n; }},
    {Collective::kBroadcast, "chain broadcast in nccl-tests' columns, modes taking turns", false, [](int) { return 1.0; }},
    {Collective::kReduce, "chain reduce in nccl-tests' columns, modes taking turns", false, [](int) { return 1.0; }},
};

const CollectiveBench* g_bench = &kBenches[0];

// NCCL's count for a size in nccl-tests' sense.
uint64_t CountOf(const CollectiveBench& bench, uint64_t bytes, DataType dtype, int world) {
  const uint64_t elements = bytes / ElementSize(dtype);
  return bench.count_per_rank ? elements / world : elements;
}

// The size in nccl-tests' sense of a call of `count`: what the rows print and the bandwidths
// divide, as nccl-tests does, rather than the size asked for, which CountOf rounds down to whole
// elements (and, for allgather and reducescatter, to a multiple of the world size).
uint64_t SizeOf(const CollectiveBench& bench, uint64_t count, DataType dtype, int world) {
  return count * ElementSize(dtype) * (bench.count_per_rank ? world : 1);
}

Operation Call(Communicator& comm, const CollectiveShape& shape, const void* send, void* recv, CompressionMode mode) {
  const CollectiveOptions options{.compression = mode};
  switch (shape.kind) {
    case Collective::kAllReduce: return comm.AllReduce(send, recv, shape.count, shape.dtype, shape.op, nullptr, options);
    case Collective::kAllGather: return comm.AllGather(send, recv, shape.count, shape.dtype, nullptr, options);
    case Collective::kReduceScatter:
      return comm.ReduceScatter(send, recv, shape.count, shape.dtype, shape.op, nullptr, options);
    case Collective::kBroadcast: return comm.Broadcast(send, recv, shape.count, shape.dtype, shape.root, nullptr, options);
    case Collective::kReduce:
      return comm.Reduce(send, recv, shape.count, shape.dtype, shape.op, shape.root, nullptr, options);
  }
  return Operation();
}

struct ModeResult {
  double time_us = 0;  // median of the slowest rank's times
  double ratio = 1;
  uint64_t wrong = 0;
  // The codec's time (CommunicatorStats::codec_seconds: encode, decode and the reductions on the
  // codec's stream, launch to done) per call averaged over the ranks, and all ranks' over the
  // frames they sent: with 2 ranks one block's encode plus its decode (and reduction).
  double codec_us = 0, codec_block_us = 0;
};

absl::StatusOr<std::vector<ModeResult>> MeasureSize(Communicator& comm, const CollectiveShape& shape, bool device,
                                                    bool in_place, const std::vector<CompressionMode>& modes,
                                                    const testing::Distribution& dist, bool check) {
  const int rank = comm.rank(), world = comm.size();
  auto input_of = [&](int r) { return testing::GenerateTensor(shape.dtype, SendElements(shape), dist, 1000 + r); };
  const std::vector<uint8_t> input = input_of(rank);
  const uint64_t width = ElementSize(shape.dtype);
  const uint64_t send_bytes = SendElements(shape) * width, recv_bytes = RecvElements(shape) * width;
  // Out of place: the input in `send`, the output in `recv`. In place: both in `recv`, the
  // input at `input_offset`, the output at `output_offset`.
  uint64_t input_offset = 0, output_offset = 0;
  if (in_place && shape.kind == Collective::kAllGather) input_offset = uint64_t(rank) * send_bytes;
  if (in_place && shape.kind == Collective::kReduceScatter) output_offset = uint64_t(rank) * recv_bytes;
  absl::StatusOr<std::unique_ptr<TensorBuffer>> send =
      TensorBuffer::Create(in_place ? std::vector<uint8_t>() : input, device);
  if (!send.ok()) return send.status();
  absl::StatusOr<std::unique_ptr<TensorBuffer>> recv =
      TensorBuffer::Create(std::vector<uint8_t>(in_place ? std::max(send_bytes, recv_bytes) : recv_bytes), device);
  if (!recv.ok()) return recv.status();
  uint8_t* const base = static_cast<uint8_t*>((*recv)->data());
  void* const send_at = in_place ? base + input_offset : (*send)->data();
  void* const recv_at = base + output_offset;
  auto prepare = [&]() { return in_place ? (*recv)->Write(input, input_offset) : absl::OkStatus(); };
  absl::Status warm = WarmUp(comm, WarmupDuration(), [&]() -> absl::Status {
    for (CompressionMode mode : modes) {
      if (absl::Status s = prepare(); !s.ok()) return s;
      if (absl::Status s = Call(comm, shape, send_at, recv_at, mode).Wait(kWait); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  if (!warm.ok()) return warm;
  const int warmup = WarmupIterations(), iterations = Iterations();
  std::vector<std::vector<double>> times(modes.size());
  std::vector<double> payload(modes.size(), 0), wire(modes.size(), 0), codec(modes.size(), 0), frames(modes.size(), 0);
  for (int i = 0; i < warmup + iterations; ++i) {
    for (size_t turn = 0; turn < modes.size(); ++turn) {
      const size_t m = ModeOfTurn(i, turn, modes.size());
      if (absl::Status s = prepare(); !s.ok()) return s;
      const CommunicatorStats before = comm.stats();
      const absl::Time start = absl::Now();
      if (absl::Status s = Call(comm, shape, send_at, recv_at, modes[m]).Wait(kWait); !s.ok()) return s;
      const double elapsed = absl::ToDoubleMicroseconds(absl::Now() - start);
      if (i < warmup) continue;
      times[m].push_back(elapsed);
      const CommunicatorStats after = comm.stats();
      payload[m] += after.payload_bytes_sent - before.payload_bytes_sent;
      wire[m] += after.wire_bytes_sent - before.wire_bytes_sent;
      codec[m] += after.codec_seconds - before.codec_seconds;
      frames[m] += after.blocks_compressed - before.blocks_compressed;
    }
  }
  std::vector<double> wrong(modes.size(), 0);
  if (check) {
    std::vector<std::vector<uint8_t>> inputs;
    for (int r = 0; r < world; ++r) inputs.push_back(r == rank ? input : input_of(r));
    const std::vector<uint8_t> want = testing::ReferenceOutput(shape, inputs, rank);
    for (size_t m = 0; m < modes.size(); ++m) {
      if (absl::Status s = (*recv)->Clear(); !s.ok()) return s;
      if (absl::Status s = prepare(); !s.ok()) return s;
      if (absl::Status s = Call(comm, shape, send_at, recv_at, modes[m]).Wait(kWait); !s.ok()) return s;
      // `want` is empty where nothing is received.
      absl::StatusOr<uint64_t> count = (*recv)->CountWrong(want, ElementSize(shape.dtype), output_offset);
      if (!count.ok()) return count.status();
      wrong[m] = static_cast<double>(*count);
    }
  }
  // Per rank and mode: its median time, wrong elements, payload and wire bytes, codec seconds and frames sent.
  constexpr size_t kFields = 6;
  std::vector<double> mine;
  for (size_t m = 0; m < modes.size(); ++m) {
    mine.insert(mine.end(), {Median(times[m]), wrong[m], payload[m], wire[m], codec[m], frames[m]});
  }
  absl::StatusOr<std::vector<double>> all = GatherDoubles(comm, mine);
  if (!all.ok()) return all.status();
  std::vector<ModeResult> results(modes.size());
  for (size_t m = 0; m < modes.size(); ++m) {
    double total_payload = 0, total_wire = 0, total_codec = 0, total_frames = 0;
    for (int r = 0; r < world; ++r) {
      const double* row = all->data() + r * mine.size() + m * kFields;
      results[m].time_us = std::max(results[m].time_us, row[0]);
      results[m].wrong += static_cast<uint64_t>(row[1]);
      total_payload += row[2];
      total_wire += row[3];
      total_codec += row[4];
      total_frames += row[5];
    }
    results[m].ratio = total_wire > 0 ? total_payload / total_wire : 1;
    results[m].codec_us = iterations > 0 ? total_codec * 1e6 / iterations / world : 0;
    results[m].codec_block_us = total_frames > 0 ? total_codec * 1e6 / total_frames : 0;
  }
  return results;
}

absl::Status RunRank() {
  absl::StatusOr<BootstrapConfig> bootstrap = BootstrapConfigFromEnvironment();
  if (!bootstrap.ok()) return bootstrap.status();
  absl::StatusOr<bool> use_device = UseDeviceMemory(bootstrap->local_rank);
  if (!use_device.ok()) return use_device.status();
  const bool device = *use_device;
  const std::string memory = device ? "device" : "host";
  absl::StatusOr<DataType> dtype = ParseDataType(DataTypeFlag());
  if (!dtype.ok()) return dtype.status();
  absl::StatusOr<ReduceOp> op = ParseReduceOp(ReduceOpFlag());
  if (!op.ok()) return op.status();
  const std::string compress = CompressFlag("off,on");
  absl::StatusOr<std::vector<CompressionMode>> modes = ParseCompressionList(compress);
  if (!modes.ok()) return modes.status();
  absl::StatusOr<testing::Distribution> dist = testing::ParseDistribution(absl::GetFlag(FLAGS_dist));
  if (!dist.ok()) return dist.status();
  absl::StatusOr<std::unique_ptr<Communicator>> communicator = CreateCommunicator(*bootstrap);
  if (!communicator.ok()) return communicator.status();
  Communicator& comm = **communicator;
  const int world = comm.size(), root = RootFlag();
  if (root < 0 || root >= world) return absl::InvalidArgumentError(absl::StrCat("-r ", root, " is not a rank of ", world));
  const bool json = absl::GetFlag(FLAGS_json), report = comm.rank() == 0, check = CheckFlag();
  const bool in_place = absl::GetFlag(FLAGS_in_place);
  const std::string tls = comm.options().ucx_transports.empty() ? "default" : comm.options().ucx_transports;
  const Collective kind = g_bench->kind;
  const char* name = testing::CollectiveName(kind);
  if (report && !json) {
    std::printf("# ucclzip-bench %s: %d ranks, %s memory%s, UCX_TLS=%s, %s, %zu- to %zu-byte pipeline blocks, compress %s "
                "(taking turns), %s, iters %d, warmup %d%s, check %d",
                name, world, memory.c_str(), device ? (comm.device_memory_direct() ? " (direct)" : " (staged)") : "",
                tls.c_str(), dist->Name().c_str(), comm.options().min_pipeline_block_bytes,
                comm.options().pipeline_block_bytes, compress.c_str(),
                in_place ? "in place" : "out of place", Iterations(), WarmupIterations(),
                absl::StrCat(" and ", absl::ToInt64Milliseconds(WarmupDuration()), " ms").c_str(), check ? 1 : 0);
    if (kind == Collective::kAllReduce) {
      std::printf(", recursive doubling up to %zu bytes", comm.options().recursive_doubling_bytes);
    }
    if (kind == Collective::kBroadcast) std::printf(", binomial tree up to %zu bytes", comm.options().tree_broadcast_bytes);
    std::printf("\n");
    std::printf("#%11s %12s %8s %6s %5s %8s %11s %11s %11s %7s %7s %8s\n", "size", "count", "type", "redop", "root",
                "compress", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "ratio", "vs first");
  }
  std::vector<double> busbw_sum(modes->size(), 0);
  int sizes = 0;
  uint64_t wrong = 0;
  const uint64_t max_bytes = MaxBytes(kDefaultMaxBytes);
  // Sizes that round down to the count of the size before them (whole elements, a multiple of
  // the ranks) are that size again: measured once, so that no row is repeated and weighs twice
  // in the average.
  std::optional<uint64_t> last_count;
  for (uint64_t bytes = MinBytes(kDefaultMinBytes); bytes <= max_bytes; bytes = NextSize(bytes)) {
    const CollectiveShape shape{kind,  *dtype, *op, CountOf(*g_bench, bytes, *dtype, world),
                                root,  world,  comm.options().recursive_doubling_bytes};
    if (last_count == shape.count) continue;
    last_count = shape.count;
    absl::StatusOr<std::vector<ModeResult>> results = MeasureSize(comm, shape, device, in_place, *modes, *dist, check);
    if (!results.ok()) return results.status();
    ++sizes;
    const uint64_t size = SizeOf(*g_bench, shape.count, *dtype, world);
    for (size_t m = 0; m < modes->size(); ++m) {
      const ModeResult& r = (*results)[m];
      const double algbw = r.time_us > 0 ? size / r.time_us / 1e3 : 0, busbw = algbw * g_bench->bus_factor(world);
      const double vs_first = r.time_us > 0 ? (*results)[0].time_us / r.time_us : 0;
      busbw_sum[m] += busbw;
      if (!report) continue;
      wrong += r.wrong;
      const char* redop = testing::Reduces(kind) ? ReduceOpName(*op) : "none";
      const int shown_root = testing::HasRoot(kind) ? root : -1;
      // With -c 0 nothing was compared: nccl-tests prints N/A, not a count of 0 (JSON: null).
      const std::string shown_wrong = check ? absl::StrCat(r.wrong) : "null";
      if (json) {
        std::printf("{\"bench\":\"%s\",\"size\":%llu,\"count\":%llu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d,"
                    "\"compress\":\"%s\",\"time_us\":%.2f,\"algbw_GBps\":%.4f,\"busbw_GBps\":%.4f,\"wrong\":%s,\"check\":%d,"
                    "\"ratio\":%.4f,\"vs_first\":%.4f,\"first\":\"%s\",\"ranks\":%d,\"memory\":\"%s\",\"tls\":\"%s\","
                    "\"dist\":\"%s\",\"pipeline_block\":%zu,\"min_pipeline_block\":%zu,\"path\":\"%s\",\"codec_us\":%.1f,\"codec_block_us\":%.1f,"
                    "\"in_place\":%d,\"recursive_doubling\":%zu,\"tree_broadcast\":%zu}\n",
                    name, static_cast<unsigned long long>(size), static_cast<unsigned long long>(shape.count),
                    DataTypeName(*dtype), redop, shown_root, CompressionName((*modes)[m]), r.time_us, algbw, busbw,
                    shown_wrong.c_str(), check ? 1 : 0, r.ratio, vs_first, CompressionName((*modes)[0]), world,
                    memory.c_str(), tls.c_str(), dist->Name().c_str(), comm.options().pipeline_block_bytes,
                    comm.options().min_pipeline_block_bytes, PathName(comm, device), r.codec_us, r.codec_block_us, in_place ? 1 : 0,
                    comm.options().recursive_doubling_bytes, comm.options().tree_broadcast_bytes);
      } else {
        std::printf("%12llu %12llu %8s %6s %5d %8s %11.1f %11.3f %11.3f %7s %7.3f %7.3fx\n",
                    static_cast<unsigned long long>(size), static_cast<unsigned long long>(shape.count),
                    DataTypeName(*dtype), redop, shown_root, CompressionName((*modes)[m]), r.time_us, algbw, busbw,
                    check ? shown_wrong.c_str() : "N/A", r.ratio, vs_first);
      }
    }
    std::fflush(stdout);
  }
  if (report && !json) {
    for (size_t m = 0; m < modes->size(); ++m) {
      std::printf("# Avg bus bandwidth    : %.3f  (compress %s)\n", sizes > 0 ? busbw_sum[m] / sizes : 0,
                  CompressionName((*modes)[m]));
    }
  }
  return CheckedElements(wrong);
}

int CollectiveMain(const CollectiveBench& bench) {
  g_bench = &bench;
  if (absl::Status sweep = CheckSweepFlags(MinBytes(kDefaultMinBytes), MaxBytes(kDefaultMaxBytes)); !sweep.ok()) {
    std::fprintf(stderr, "%s: %s\n", testing::CollectiveName(bench.kind), std::string(sweep.message()).c_str());
    return 2;
  }
  return RunRankOrLaunch(testing::CollectiveName(bench.kind), absl::GetFlag(FLAGS_ranks), RunRank);
}

const bool kRegistered = [] {
  const std::vector<std::string> flags =
      SharedFlags({FlagGroup::kMeasure, FlagGroup::kCommunicator, FlagGroup::kSweep, FlagGroup::kReduction}, {"in_place"});
  for (const CollectiveBench& bench : kBenches) {
    RegisterSubcommand(testing::CollectiveName(bench.kind), bench.summary, flags,
                       [&bench](const std::vector<std::string>&) { return CollectiveMain(bench); });
  }
  return true;
}();

}  // namespace
}  // namespace ucclzip::bench
