// Google Benchmark microbenchmarks of the CPU reference codec: compress and decompress per type,
// reported as bytes of tensor per second. (The GPU kernels are timed by `ucclzip-bench codec
// --device gpu`, with CUDA events.)
#include <benchmark/benchmark.h>

#include <vector>

#include "tensor_gen.h"
#include "ucclzip/codec.h"

namespace ucclzip {
namespace {

void BM_CompressHost(benchmark::State& state, DataType dtype) {
  const uint64_t count = static_cast<uint64_t>(state.range(0)) / ElementSize(dtype);
  const auto tensor = testing::GenerateTensor(dtype, count, {testing::DistKind::kGaussian, 0.02}, 1);
  std::vector<uint8_t> frame(MaxFrameBytes(dtype, count));
  for (auto _ : state) {
    auto bytes = CompressHost(tensor.data(), count, dtype, frame.data(), frame.size());
    benchmark::DoNotOptimize(bytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(tensor.size()));
}

void BM_DecompressHost(benchmark::State& state, DataType dtype) {
  const uint64_t count = static_cast<uint64_t>(state.range(0)) / ElementSize(dtype);
  const auto tensor = testing::GenerateTensor(dtype, count, {testing::DistKind::kGaussian, 0.02}, 1);
  std::vector<uint8_t> frame(MaxFrameBytes(dtype, count)), out(tensor.size());
  const uint64_t bytes = *CompressHost(tensor.data(), count, dtype, frame.data(), frame.size());
  for (auto _ : state) {
    auto status = DecompressHost(frame.data(), bytes, dtype, out.data(), count);
    benchmark::DoNotOptimize(status);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(tensor.size()));
}

BENCHMARK_CAPTURE(BM_CompressHost, bf16, DataType::kBFloat16)->Arg(1 << 20)->Arg(16 << 20);
BENCHMARK_CAPTURE(BM_DecompressHost, bf16, DataType::kBFloat16)->Arg(1 << 20)->Arg(16 << 20);
BENCHMARK_CAPTURE(BM_CompressHost, fp32, DataType::kFloat32)->Arg(16 << 20);
BENCHMARK_CAPTURE(BM_DecompressHost, fp32, DataType::kFloat32)->Arg(16 << 20);
BENCHMARK_CAPTURE(BM_CompressHost, fp8e4m3, DataType::kFloat8E4M3)->Arg(16 << 20);
BENCHMARK_CAPTURE(BM_DecompressHost, fp8e4m3, DataType::kFloat8E4M3)->Arg(16 << 20);

}  // namespace
}  // namespace ucclzip

BENCHMARK_MAIN();
