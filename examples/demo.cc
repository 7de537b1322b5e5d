// The demo that scripts/demo runs: four local ranks move bf16 weights (Gaussian, as trained
// weights are) with send/recv, broadcast, allgather and allreduce, each with compression off, on
// and auto, in GPU memory when a CUDA device is usable and in host memory otherwise. Rank 0
// prints one row per operation and mode; every rank checks every result bit for bit.
//   scripts/ucclzip-run -n 4 build/examples/demo [--memory=auto|host|device] [--mb=N] [--iterations=N]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>

#include "example_support.h"
#include "ucclzip/reduction.h"

namespace {

using ucclzip::CompressionMode;
using ucclzip::DataType;

// Where the buffers live. Any CUDA error while probing means host memory: a machine without a
// GPU, or whose driver is older than the runtime, still runs the demo.
struct Placement {
  bool device = false;
  std::string description;
};

Placement ChoosePlacement(const std::string& wanted, int rank) {
  if (wanted == "host") return {false, "host memory (--memory=host)"};
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaSuccess && count == 0) error = cudaErrorNoDevice;
  const int device = count > 0 ? rank % count : 0;  // local ranks share the devices round-robin
  if (error == cudaSuccess) error = cudaSetDevice(device);
  void* probe = nullptr;
  if (error == cudaSuccess) error = cudaMalloc(&probe, 1 << 20);
  if (error == cudaSuccess) error = cudaFree(probe);
  if (error != cudaSuccess) {
    cudaGetLastError();  // cleared, so that no later CUDA call reports it again
    return {false, std::string("host memory (no usable CUDA device: ") + cudaGetErrorString(error) + ")"};
  }
  cudaDeviceProp properties{};
  cudaGetDeviceProperties(&properties, device);
  return {true, std::string("device memory (") + properties.name + ")"};
}

// `count` bf16 values in host or device memory.
class Buffer {
 public:
  Buffer(size_t count, bool device) : count_(count), device_(device) {
    if (device_) {
      if (cudaMalloc(&data_, count * 2) != cudaSuccess) data_ = nullptr;
    } else {
      data_ = std::malloc(count * 2);
    }
    if (data_ == nullptr) {
      std::fprintf(stderr, "cannot allocate %zu bytes of %s memory\n", count * 2, device_ ? "device" : "host");
      std::exit(1);
    }
  }
  ~Buffer() { device_ ? (void)cudaFree(data_) : std::free(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  void Upload(const std::vector<uint16_t>& values) {
    device_ ? (void)cudaMemcpy(data_, values.data(), values.size() * 2, cudaMemcpyHostToDevice)
            : (void)std::memcpy(data_, values.data(), values.size() * 2);
  }
  std::vector<uint16_t> Download() const {
    std::vector<uint16_t> values(count_);
    device_ ? (void)cudaMemcpy(values.data(), data_, count_ * 2, cudaMemcpyDeviceToHost)
            : (void)std::memcpy(values.data(), data_, count_ * 2);
    return values;
  }
  // Overwrites the buffer with a pattern no result has (bf16 NaNs), so that an operation that
  // writes nothing cannot pass the check with the previous run's result.
  void Poison() { device_ ? (void)cudaMemset(data_, 0xFF, count_ * 2) : (void)std::memset(data_, 0xFF, count_ * 2); }

 private:
  size_t count_;
  bool device_;
  void* data_ = nullptr;
};

// The bits a bf16 sum allreduce of `inputs` (rank r's at r) returns, in the fixed order of
// docs/COLLECTIVES.md: recursive doubling up to `recursive_doubling_bytes`, else the ring, whose
// near-equal chunks (the first count % n one element longer) are combined from rank c+1 round
// to rank c, each hop as received op local.
std::vector<uint16_t> ExpectedSum(const std::vector<std::vector<uint16_t>>& inputs, size_t recursive_doubling_bytes) {
  const int n = static_cast<int>(inputs.size());
  const size_t count = inputs[0].size();
  auto combine = [&](const uint16_t* received, const uint16_t* local, uint16_t* out, size_t elements) {
    if (absl::Status s = ucclzip::ReduceOnHost(DataType::kBFloat16, ucclzip::ReduceOp::kSum, received, local, out, elements);
        !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      std::exit(1);
    }
  };
  if (recursive_doubling_bytes > 0 && count * 2 <= recursive_doubling_bytes) {
    int powers = 1;
    while (powers * 2 <= n) powers *= 2;
    const int rem = n - powers;
    std::vector<std::vector<uint16_t>> values;
    for (int r = 0; r < n; ++r) {
      if (r < 2 * rem && r % 2 == 0) continue;
      values.push_back(inputs[r]);
      if (r < 2 * rem) combine(inputs[r - 1].data(), inputs[r].data(), values.back().data(), count);
    }
    for (int bit = 1; bit < powers; bit <<= 1) {
      std::vector<std::vector<uint16_t>> next = values;
      for (int v = 0; v < powers; ++v) combine(values[v ^ bit].data(), values[v].data(), next[v].data(), count);
      values = std::move(next);
    }
    return values[0];
  }
  std::vector<uint16_t> out(count);
  size_t first = 0;
  for (int owner = 0; owner < n; ++owner) {
    const size_t chunk = count / n + (size_t(owner) < count % n ? 1 : 0);
    std::copy_n(inputs[(owner + 1) % n].begin() + first, chunk, out.begin() + first);
    for (int k = 2; k <= n; ++k) combine(&out[first], &inputs[(owner + k) % n][first], &out[first], chunk);
    first += chunk;
  }
  return out;
}

// One rank's counters over the measured iterations of one operation and mode.
struct Tally {
  uint64_t payload_bytes = 0, wire_bytes = 0, blocks_compressed = 0, blocks_bypassed = 0, nanoseconds = 0;
};
static_assert(sizeof(Tally) == 5 * sizeof(uint64_t));

// One row of the table: an operation, run in one mode on every rank.
struct Case {
  const char* name;
  size_t result_elements;  // what each rank's output holds afterwards
  // Bus bandwidth over size / time (nccl-tests' convention, so that rows compare with the link).
  double bus_factor;
  const std::vector<uint16_t>* expected;  // what each rank's output must hold
  std::function<ucclzip::Operation(const ucclzip::CollectiveOptions&)> post;
};

class Demo {
 public:
  Demo(ucclzip::Communicator& comm, bool device, size_t count, long iterations)
      : comm_(comm), device_(device), count_(count), iterations_(iterations), input_(count, device),
        output_(count * comm.size(), device) {
    if (device_) cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    // Every rank draws every rank's tensor, to know what each operation must deliver.
    for (int r = 0; r < comm_.size(); ++r) inputs_.push_back(example::GaussianBf16(count_, 0.02f, r + 1));
    input_.Upload(inputs_[comm_.rank()]);
  }
  ~Demo() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Runs every operation in every mode; false (after saying why) when a result is wrong.
  bool Run() {
    const int rank = comm_.rank(), size = comm_.size();
    const int left = (rank + size - 1) % size, right = (rank + 1) % size;
    std::vector<uint16_t> gathered;
    for (const auto& part : inputs_) gathered.insert(gathered.end(), part.begin(), part.end());
    // The allreduce's bits in its fixed order, which every mode must give.
    const std::vector<uint16_t> reduced = ExpectedSum(inputs_, comm_.options().recursive_doubling_bytes);
    const Case cases[] = {
        {"send/recv", count_, 1.0, &inputs_[left],
         [&](const ucclzip::CollectiveOptions& options) {
           comm_.GroupStart();  // a ring shift: every rank sends right and receives from the left
           comm_.Send(input_.data(), count_, DataType::kBFloat16, right, stream_, {.compression = options.compression});
           comm_.Recv(output_.data(), count_, DataType::kBFloat16, left, stream_);
           return comm_.GroupEnd();
         }},
        {"broadcast", count_, 1.0, &inputs_[0],
         [&](const ucclzip::CollectiveOptions& options) {
           return comm_.Broadcast(input_.data(), output_.data(), count_, DataType::kBFloat16, 0, stream_, options);
         }},
        {"allgather", count_ * size, size - 1.0, &gathered,
         [&](const ucclzip::CollectiveOptions& options) {
           return comm_.AllGather(input_.data(), output_.data(), count_, DataType::kBFloat16, stream_, options);
         }},
        {"allreduce", count_, 2.0 * (size - 1) / size, &reduced,
         [&](const ucclzip::CollectiveOptions& options) {
           return comm_.AllReduce(input_.data(), output_.data(), count_, DataType::kBFloat16, ucclzip::ReduceOp::kSum,
                                  stream_, options);
         }},
    };
    PrintHeader();
    for (const Case& c : cases) {
      for (CompressionMode mode : {CompressionMode::kOff, CompressionMode::kOn, CompressionMode::kAuto}) {
        const std::vector<Tally> tallies = Measure(c, mode);
        std::vector<uint16_t> got = output_.Download();
        got.resize(c.result_elements);
        if (auto wrong = std::mismatch(got.begin(), got.end(), c.expected->begin()); wrong.first != got.end()) {
          std::fprintf(stderr, "rank %d: %s with compression %s: element %zu is 0x%04x, expected 0x%04x\n", rank,
                       c.name, ModeName(mode), static_cast<size_t>(wrong.first - got.begin()), *wrong.first,
                       *wrong.second);
          return false;
        }
        if (rank == 0) PrintRow(c, mode, tallies);
      }
    }
    return true;
  }

 private:
  static const char* ModeName(CompressionMode mode) {
    return mode == CompressionMode::kOff ? "off" : mode == CompressionMode::kOn ? "on" : "auto";
  }

  // Every rank waits here for the others, so that each measured call starts together.
  void Barrier() {
    int32_t token = 1, sum = 0;
    example::Check(comm_.AllReduce(&token, &sum, 1, DataType::kInt32, ucclzip::ReduceOp::kSum, nullptr,
                                   {.compression = CompressionMode::kOff})
                       .Wait(absl::Minutes(5)),
                   comm_.rank(), "barrier");
  }

  // One warm-up call (auto learns the link and codec rates as it runs), then the measured
  // ones; returns every rank's tally.
  std::vector<Tally> Measure(const Case& c, CompressionMode mode) {
    Tally mine;
    for (long i = -1; i < iterations_; ++i) {
      output_.Poison();
      if (device_) cudaDeviceSynchronize();
      Barrier();
      const ucclzip::CommunicatorStats before = comm_.stats();
      const auto start = std::chrono::steady_clock::now();
      example::Check(c.post({.compression = mode}).Wait(absl::Minutes(5)), comm_.rank(), c.name);
      if (device_) cudaStreamSynchronize(stream_);
      const auto stop = std::chrono::steady_clock::now();
      const ucclzip::CommunicatorStats after = comm_.stats();
      if (i < 0) continue;
      mine.payload_bytes += after.payload_bytes_sent - before.payload_bytes_sent;
      mine.wire_bytes += after.wire_bytes_sent - before.wire_bytes_sent;
      mine.blocks_compressed += after.blocks_compressed - before.blocks_compressed;
      mine.blocks_bypassed += after.blocks_bypassed - before.blocks_bypassed;
      mine.nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(stop - start).count();
    }
    std::vector<Tally> all(comm_.size());
    example::Check(comm_.AllGather(&mine, all.data(), sizeof(Tally) / 8, DataType::kUint64, nullptr,
                                   {.compression = CompressionMode::kOff})
                       .Wait(absl::Minutes(5)),
                   comm_.rank(), "gathering the counters");
    return all;
  }

  // Binary units, as --mb counts.
  static std::string Bytes(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB"};
    int unit = 0;
    while (std::abs(bytes) >= 1024 && unit < 3) bytes /= 1024, ++unit;
    char text[32];
    std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
    return text;
  }

  void PrintHeader() const {
    if (comm_.rank() != 0) return;
    std::printf("%-10s %9s  %-26s %10s %8s %7s %10s\n", "operation", "size", "compression", "time", "GB/s", "ratio",
                "saved");
  }

  void PrintRow(const Case& c, CompressionMode mode, const std::vector<Tally>& tallies) const {
    Tally sum;
    for (const Tally& t : tallies) {
      sum.payload_bytes += t.payload_bytes;
      sum.wire_bytes += t.wire_bytes;
      sum.blocks_compressed += t.blocks_compressed;
      sum.blocks_bypassed += t.blocks_bypassed;
      sum.nanoseconds = std::max(sum.nanoseconds, t.nanoseconds);  // the slowest rank's
    }
    const double seconds = sum.nanoseconds * 1e-9 / iterations_;
    const double bytes = count_ * 2.0;
    std::string compression = ModeName(mode);
    if (mode == CompressionMode::kAuto) {
      // What auto chose, from the blocks every sender compressed or sent as they were.
      const uint64_t blocks = sum.blocks_compressed + sum.blocks_bypassed;
      compression += sum.blocks_bypassed == 0   ? " -> on"
                     : sum.blocks_compressed == 0 ? " -> off"
                                                  : " -> on for " + std::to_string(sum.blocks_compressed) + " of " +
                                                        std::to_string(blocks) + " blocks";
    }
    std::printf("%-10s %9s  %-26s %7.2f ms %8.2f %7.3f %10s\n", c.name, Bytes(bytes).c_str(), compression.c_str(),
                seconds * 1e3, bytes * c.bus_factor / seconds / 1e9,
                sum.wire_bytes > 0 ? static_cast<double>(sum.payload_bytes) / sum.wire_bytes : 1.0,
                Bytes((static_cast<double>(sum.payload_bytes) - sum.wire_bytes) / iterations_).c_str());
  }

  ucclzip::Communicator& comm_;
  const bool device_;
  const size_t count_;
  const long iterations_;
  cudaStream_t stream_ = nullptr;
  std::vector<std::vector<uint16_t>> inputs_;
  Buffer input_, output_;
};

}  // namespace

int main(int argc, char** argv) {
  const example::Flags flags(argc, argv, "demo [--memory=auto|host|device] [--mb=N] [--iterations=N]",
                             {"memory", "mb", "iterations"});
  const std::string memory = flags.Text("memory", "auto");
  const long iterations = flags.Number("iterations", 3);
  const long megabytes_asked = flags.Number("mb", 0);  // 0: the memory's default, below
  if (memory != "auto" && memory != "host" && memory != "device") flags.Usage(("--memory=" + memory).c_str(), "is not auto, host or device");
  std::unique_ptr<ucclzip::Communicator> comm = example::Join();
  const int rank = comm->rank();
  Placement placement = ChoosePlacement(memory, rank);
  // Every rank must find a device for any to use one.
  int32_t usable = placement.device, everywhere = 0;
  example::Check(comm->AllReduce(&usable, &everywhere, 1, DataType::kInt32, ucclzip::ReduceOp::kMin, nullptr,
                                 {.compression = CompressionMode::kOff})
                     .Wait(absl::Minutes(1)),
                 rank, "agreeing on the memory");
  if (placement.device && !everywhere) placement = {false, "host memory (another rank has no usable CUDA device)"};
  if (memory == "device" && !placement.device) {
    std::fprintf(stderr, "rank %d: --memory=device, but %s\n", rank, placement.description.c_str());
    return 1;
  }
  // Large enough on a GPU for the pipeline to overlap its blocks; smaller on the host, where
  // the CPU codec runs on the cores that the four ranks share.
  const long megabytes = megabytes_asked != 0 ? megabytes_asked : placement.device ? 64 : 8;
  if (rank == 0) {
    std::printf("ucclzip demo: %d ranks, %s, bf16 Gaussian weights (sigma 0.02), mean of %ld calls after a warm-up\n\n",
                comm->size(), placement.description.c_str(), iterations);
  }
  Demo demo(*comm, placement.device, size_t(megabytes) << 19, iterations);
  if (!demo.Run()) return 1;
  if (rank == 0) {
    std::printf("\nsize: each rank's tensor; time: the slowest rank's; GB/s: bus bandwidth (nccl-tests' busbw);\n"
                "ratio: bytes sent over bytes on the wire, all ranks; saved: wire bytes saved per call, all ranks.\n"
                "Every result was checked bit for bit on every rank.\n");
  }
  return 0;
}
