// Google Benchmark microbenchmarks of the CPU reference codec: compress and decompress per type
// and thread count, reported as bytes of tensor per second. (The GPU kernels are timed by `ucclzip-bench codec
// --device gpu`, with CUDA events.)
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "tensor_gen.h"
#include "ucclzip/codec.h"

namespace ucclzip {
namespace {

// Arguments: tensor bytes, CPU codec threads.
std::unique_ptr<HostCodecThreads> Threads(const benchmark::State& state) {
  return *HostCodecThreads::Create(static_cast<int>(state.range(1)));
}

void BM_CompressHost(benchmark::State& state, DataType dtype) {
  const uint64_t count = static_cast<uint64_t>(state.range(0)) / ElementSize(dtype);
  const auto tensor = testing::GenerateTensor(dtype, count, {testing::DistKind::kGaussian, 0.02}, 1);
  std::vector<uint8_t> frame(MaxFrameBytes(dtype, count));
  const auto threads = Threads(state);
  for (auto _ : state) {
    auto bytes = CompressHost(tensor.data(), count, dtype, frame.data(), frame.size(), {}, threads.get());
    benchmark::DoNotOptimize(bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(tensor.size()));
}

void BM_DecompressHost(benchmark::State& state, DataType dtype) {
  const uint64_t count = static_cast<uint64_t>(state.range(0)) / ElementSize(dtype);
  const auto tensor = testing::GenerateTensor(dtype, count, {testing::DistKind::kGaussian, 0.02}, 1);
  std::vector<uint8_t> frame(MaxFrameBytes(dtype, count)), out(tensor.size());
  const uint64_t bytes = *CompressHost(tensor.data(), count, dtype, frame.data(), frame.size());
  const auto threads = Threads(state);
  for (auto _ : state) {
    auto status = DecompressHost(frame.data(), bytes, dtype, out.data(), count, threads.get());
    benchmark::DoNotOptimize(status);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(tensor.size()));
}

// One thread: timed by its CPU time, the per-core figure a busy machine does not inflate.
BENCHMARK_CAPTURE(BM_CompressHost, bf16, DataType::kBFloat16)->Args({1 << 20, 1})->Args({16 << 20, 1});
BENCHMARK_CAPTURE(BM_DecompressHost, bf16, DataType::kBFloat16)->Args({1 << 20, 1})->Args({16 << 20, 1});
BENCHMARK_CAPTURE(BM_CompressHost, fp32, DataType::kFloat32)->Args({16 << 20, 1});
BENCHMARK_CAPTURE(BM_DecompressHost, fp32, DataType::kFloat32)->Args({16 << 20, 1});
BENCHMARK_CAPTURE(BM_CompressHost, fp8e4m3, DataType::kFloat8E4M3)->Args({16 << 20, 1});
BENCHMARK_CAPTURE(BM_DecompressHost, fp8e4m3, DataType::kFloat8E4M3)->Args({16 << 20, 1});
// Several threads: timed by the wall clock.
BENCHMARK_CAPTURE(BM_CompressHost, bf16, DataType::kBFloat16)->Args({16 << 20, 2})->Args({16 << 20, 4})->UseRealTime();
BENCHMARK_CAPTURE(BM_DecompressHost, bf16, DataType::kBFloat16)->Args({16 << 20, 2})->Args({16 << 20, 4})->UseRealTime();

}  // namespace
}  // namespace ucclzip

BENCHMARK_MAIN();
