// Data-parallel training: every step, each rank averages its gradients with the others through
// one AllReduce, compressed as the communicator decides (auto) and, to check, uncompressed too.
// Both must give the same bits on every rank: the reduction order is fixed, so compression
// cannot change the result. Each rank also checks the average against the exact one, computed
// from every rank's gradients (which it can regenerate), within bf16's rounding.
//   scripts/ucclzip-run -n 4 build/examples/allreduce_training_step --elements=4000000 --steps=3
#include <chrono>
#include <cmath>

#include "example_support.h"

int main(int argc, char** argv) {
  const example::Flags flags(argc, argv, "allreduce_training_step [--elements=N] [--steps=N]", {"elements", "steps"});
  const size_t elements = flags.Number("elements", 4'000'000);
  const long steps = flags.Number("steps", 3);
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
    // Each hop rounds its partial sum to bf16 (8 significant bits) and partial sums are at most
    // the sum of magnitudes, so the error stays within world * 2^-8 of that sum's average; a
    // rank's gradients counted twice or left out would be off by about 1 / world of it.
    std::vector<double> exact(elements), magnitude(elements);
    for (int r = 0; r < comm->size(); ++r) {
      const std::vector<uint16_t> theirs = example::GaussianBf16(elements, 1e-3f / (1 + step), r * 7919 + step);
      for (size_t i = 0; i < elements; ++i) {
        exact[i] += example::Bf16ToFloat(theirs[i]) / comm->size();
        magnitude[i] += std::fabs(example::Bf16ToFloat(theirs[i])) / comm->size();
      }
    }
    for (size_t i = 0; i < elements; ++i) {
      if (std::fabs(example::Bf16ToFloat(averaged[i]) - exact[i]) > comm->size() * std::ldexp(magnitude[i], -8)) {
        std::fprintf(stderr, "rank %d: step %ld: element %zu averaged to %g, the exact average is %g\n", rank, step, i,
                     example::Bf16ToFloat(averaged[i]), exact[i]);
        return 1;
      }
    }
    if (rank == 0) {
      const double bytes = elements * 2.0;
      std::printf("step %ld: averaged %zu bf16 gradients over %d ranks in %.3f s (busbw %.2f GB/s), "
                  "identical to the uncompressed result and within bf16's rounding of the exact average\n",
                  step, elements, comm->size(), seconds, bytes / seconds / 1e9 * 2 * (comm->size() - 1) / comm->size());
    }
  }
  return 0;
}
