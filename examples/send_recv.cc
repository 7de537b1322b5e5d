// Two ranks exchange a compressed bf16 tensor through a communicator. Start it under any
// launcher that sets torchrun's or mpirun's variables, e.g. by hand:
//   MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=0 ./send_recv &
//   MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=2 RANK=1 ./send_recv
// Rank 0 sends host memory here; device pointers work the same, ordered on the given stream.
#include <cstdio>
#include <random>
#include <vector>

#include "ucclzip/bootstrap.h"
#include "ucclzip/communicator.h"

int main() {
  auto bootstrap = ucclzip::BootstrapConfigFromEnvironment();
  if (!bootstrap.ok()) {
    std::fprintf(stderr, "%s\n", bootstrap.status().ToString().c_str());
    return 1;
  }
  ucclzip::CommunicatorConfig config{.bootstrap = *bootstrap};
  auto comm = ucclzip::Communicator::Create(config);
  if (!comm.ok()) {
    std::fprintf(stderr, "%s\n", comm.status().ToString().c_str());
    return 1;
  }
  constexpr size_t kCount = size_t{1} << 22;
  std::vector<uint16_t> tensor(kCount);
  std::mt19937 rng(1);
  // bf16 values around 1e-2: exponents 117..121, random sign and mantissa.
  for (auto& v : tensor) v = static_cast<uint16_t>(((rng() & 1) << 15) | ((117 + rng() % 5) << 7) | (rng() & 0x7F));

  ucclzip::Operation op;
  std::vector<uint16_t> received(kCount);
  if ((*comm)->rank() == 0) {
    op = (*comm)->Send(tensor.data(), kCount, ucclzip::DataType::kBFloat16, 1, nullptr,
                       {.compression = ucclzip::CompressionMode::kOn});
  } else {
    op = (*comm)->Recv(received.data(), kCount, ucclzip::DataType::kBFloat16, 0, nullptr);
  }
  if (absl::Status status = op.Wait(absl::Seconds(60)); !status.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", (*comm)->rank(), status.ToString().c_str());
    return 1;
  }
  const ucclzip::CommunicatorStats stats = (*comm)->stats();
  if ((*comm)->rank() == 0) {
    std::printf("rank 0: sent %llu bytes as %llu on the wire (ratio %.3f)\n",
                static_cast<unsigned long long>(stats.payload_bytes_sent),
                static_cast<unsigned long long>(stats.wire_bytes_sent), stats.send_ratio());
  } else {
    const bool exact = received == tensor;
    std::printf("rank 1: received %zu bf16 values, %s\n", kCount, exact ? "bit-exact" : "DIFFERENT");
    return exact ? 0 : 1;
  }
  return 0;
}
