// Data-parallel training: every step, each rank averages its gradients with the others through
// one AllReduce, compressed as the communicator decides (auto) and, to check, uncompressed too.
// Both must give the same bits on every rank: the reduction order is fixed, so compression
// cannot change the result.
//   scripts/ucclzip-run -n 4 build/examples/allreduce_training_step --elements=4000000 --steps=3
#include <chrono>

#include "example_support.h"

int main(int argc, char** argv) {
  const size_t elements = example::Flag(argc, argv, "elements", 4'000'000);
  const long steps = example::Flag(argc, argv, "steps", 3);
  std::unique_ptr<ucclzip::Communicator> comm = example::Join();
  const int rank = comm->rank();
  for (long step = 0; step < steps; ++step) {
    // This rank's gradients: smaller as training goes on.
    const std::vector<uint16_t> gradients = example::GaussianBf16(elements, 1e-3f / (1 + step), rank * 7919 + step);
    std::vector<uint16_t> averaged(elements), check(elements);
    const auto start = std::chrono::steady_clock::now();
    example::Check(comm->AllReduce(gradients.data(), averaged.data(), elements, ucclzip::DataType::kBFloat16,
                                   ucclzip::ReduceOp::kAvg, nullptr)
                       .Wait(absl::Minutes(5)),
                   rank, "allreduce");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    example::Check(comm->AllReduce(gradients.data(), check.data(), elements, ucclzip::DataType::kBFloat16,
                                   ucclzip::ReduceOp::kAvg, nullptr, {.compression = ucclzip::CompressionMode::kOff})
                       .Wait(absl::Minutes(5)),
                   rank, "uncompressed allreduce");
    if (averaged != check) {
      std::fprintf(stderr, "rank %d: step %ld: compressed and uncompressed averages differ\n", rank, step);
      return 1;
    }
    if (rank == 0) {
      const double bytes = elements * 2.0;
      std::printf("step %ld: averaged %zu bf16 gradients over %d ranks in %.3f s (busbw %.2f GB/s), "
                  "identical to the uncompressed result\n",
                  step, elements, comm->size(), seconds, bytes / seconds / 1e9 * 2 * (comm->size() - 1) / comm->size());
    }
  }
  return 0;
}
