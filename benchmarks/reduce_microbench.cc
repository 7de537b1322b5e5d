// Google Benchmark microbenchmarks of the host reduction (what one hop of a ring does to host
// buffers, on the pipeline thread): bytes of output per second, per type, for a sum.
#include <benchmark/benchmark.h>

#include <vector>

#include "tensor_gen.h"
#include "ucclzip/reduction.h"

namespace ucclzip {
namespace {

// Argument: tensor bytes.
void BM_ReduceOnHost(benchmark::State& state, DataType dtype) {
  const uint64_t count = static_cast<uint64_t>(state.range(0)) / ElementSize(dtype);
  const auto received = testing::GenerateTensor(dtype, count, {testing::DistKind::kGaussian, 0.02}, 1);
  const auto local = testing::GenerateTensor(dtype, count, {testing::DistKind::kGaussian, 0.02}, 2);
  std::vector<uint8_t> out(received.size());
  for (auto _ : state) {
    if (absl::Status s = ReduceOnHost(dtype, ReduceOp::kSum, received.data(), local.data(), out.data(), count); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(out.size()));
}

BENCHMARK_CAPTURE(BM_ReduceOnHost, bf16, DataType::kBFloat16)->Arg(16 << 20);
BENCHMARK_CAPTURE(BM_ReduceOnHost, fp16, DataType::kFloat16)->Arg(16 << 20);
BENCHMARK_CAPTURE(BM_ReduceOnHost, fp32, DataType::kFloat32)->Arg(16 << 20);

}  // namespace
}  // namespace ucclzip
