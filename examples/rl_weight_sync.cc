// RL weight sync: after every training step a trainer (rank 0) pushes every tensor of its model
// to the rollout workers (all other ranks), with one grouped Broadcast per tensor and one group
// per step, the way an RL service refreshes its inference engines. Tensors differ in scale from
// one to the next, as trained weights do. Each worker checks what it got bit for bit, and the
// trainer reports the time per sync and the bytes saved.
//   scripts/ucclzip-run -n 4 build/examples/rl_weight_sync --layers=8 --width=512 --steps=3
#include <chrono>

#include "example_support.h"

int main(int argc, char** argv) {
  const example::Flags flags(argc, argv, "rl_weight_sync [--layers=N] [--width=N] [--steps=N]",
                             {"layers", "width", "steps"});
  const long layers = flags.Number("layers", 8), width = flags.Number("width", 512), steps = flags.Number("steps", 3);
  std::unique_ptr<ucclzip::Communicator> comm = example::Join();
  const int rank = comm->rank();
  // A transformer's shapes per layer: attention (4 width x width) and MLP (2 width x 4 width).
  std::vector<size_t> counts;
  for (long l = 0; l < layers; ++l) {
    for (int i = 0; i < 4; ++i) counts.push_back(size_t(width) * width);
    for (int i = 0; i < 2; ++i) counts.push_back(size_t(width) * 4 * width);
  }
  // The trainer's weights at `step`; workers derive the same to check what arrives.
  auto weights = [&](size_t tensor, long step) {
    const float sigma = 0.02f / std::sqrt(1.0f + tensor % 7) * (1 + 0.1f * (tensor % 3));
    return example::GaussianBf16(counts[tensor], sigma, tensor * 1000 + step);
  };
  std::vector<std::vector<uint16_t>> model(counts.size());
  for (long step = 0; step < steps; ++step) {
    for (size_t t = 0; t < counts.size(); ++t) {
      model[t] = rank == 0 ? weights(t, step) : std::vector<uint16_t>(counts[t]);
    }
    const ucclzip::CommunicatorStats before = comm->stats();
    const auto start = std::chrono::steady_clock::now();
    comm->GroupStart();
    for (size_t t = 0; t < counts.size(); ++t) {
      comm->Broadcast(model[t].data(), model[t].data(), counts[t], ucclzip::DataType::kBFloat16, 0, nullptr,
                      {.tensor_id = t + 1});
    }
    example::Check(comm->GroupEnd().Wait(absl::Minutes(5)), rank, "weight sync");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const ucclzip::CommunicatorStats after = comm->stats();
    if (rank != 0) {
      for (size_t t = 0; t < counts.size(); ++t) {
        if (model[t] != weights(t, step)) {
          std::fprintf(stderr, "rank %d: step %ld: tensor %zu differs\n", rank, step, t);
          return 1;
        }
      }
      continue;
    }
    // The trainer's own sends: a small tensor goes down a tree, where the trainer sends more
    // than one copy (docs/COLLECTIVES.md), so they are not the model's size.
    const double payload = after.payload_bytes_sent - before.payload_bytes_sent;
    const double wire = after.wire_bytes_sent - before.wire_bytes_sent;
    double model_bytes = 0;
    for (size_t count : counts) model_bytes += count * sizeof(uint16_t);
    std::printf(
        "step %ld: %zu tensors, a %.1f MB model to %d workers in %.3f s (%.2f GB/s of model); the trainer sent %.1f MB "
        "of payload as %.1f MB on the wire (ratio %.3f)\n",
        step, counts.size(), model_bytes / 1e6, comm->size() - 1, seconds, model_bytes / seconds / 1e9, payload / 1e6,
        wire / 1e6, wire > 0 ? payload / wire : 1.0);
  }
  if (rank != 0) std::printf("every tensor of every step arrived bit-exact\n");
  return 0;
}
