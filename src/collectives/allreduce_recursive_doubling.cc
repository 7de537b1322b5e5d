// Recursive-doubling allreduce, for small vectors, where a ring's 2(n-1) hops cost more than its
// bandwidth saves. With p the largest power of two <= n and rem = n - p:
//  1. fold: each even rank r < 2 rem sends its input to r+1, which combines it with its own;
//  2. the p ranks left (virtual rank v: r/2 for the odd r < 2 rem, r - rem above) exchange
//     their whole partial result with v XOR 2^j at step j (j = 0 .. log2 p - 1) and combine;
//  3. unfold: each odd r < 2 rem sends the result to r-1.
// So log2(p) messages in a row, at most two more where n is not a power of two. Both partners of a step combine the
// same two partial results, in opposite operand order: the operators give the same bits either
// way (codec/reduce_math.h), so every rank ends with the same bits, the result of a fixed tree
// over the inputs that depends only on n (docs/COLLECTIVES.md). avg divides at the last step.
//
// The running result lives in the output buffer: each step's send reads it (after the previous
// receive has written it) and each receive combines the partner's partial into it (after this
// rank's own send of it has completed: RecvStep::after_send).
#include <bit>

#include "collectives/schedules.h"

namespace ucclzip::collectives {

Schedule RecursiveDoublingAllReduce(int rank, int size, uint64_t count, ReduceOp op, bool in_place) {
  Schedule schedule{.kind = pipeline::OperationKind::kAllReduce, .op = op, .count = count, .name = "allreduce"};
  const Chunk input{BufferRole::kInput, 0, count}, output{BufferRole::kOutput, 0, count};
  if (size == 1) {
    if (!in_place) schedule.copies.push_back({input, output});
    return schedule;
  }
  const int powers = static_cast<int>(std::bit_floor(static_cast<unsigned>(size)));
  const int rem = size - powers;
  if (rank < 2 * rem && rank % 2 == 0) {
    // Folded: its input goes to rank+1, the result comes back. The result cannot land before
    // the send has left, even in place: rank+1 needs every byte of it first.
    schedule.sends.push_back({.peer = rank + 1, .chunk = input});
    schedule.recvs.push_back({.peer = rank + 1, .count = count, .into = output});
    return schedule;
  }
  Chunk partial = input;
  int written_by = -1;  // the receive step that last wrote the partial result
  if (rank < 2 * rem) {
    schedule.recvs.push_back({.peer = rank - 1, .count = count, .into = output, .reduce_with = input});
    partial = output;
    written_by = 0;
  }
  const int virtual_rank = rank < 2 * rem ? rank / 2 : rank - rem;
  auto real_rank = [rem](int v) { return v < rem ? 2 * v + 1 : v + rem; };
  for (int bit = 1; bit < powers; bit <<= 1) {
    const int partner = real_rank(virtual_rank ^ bit);
    const int send_step = static_cast<int>(schedule.sends.size());
    schedule.sends.push_back({.peer = partner, .chunk = partial, .recv_step = written_by});
    pipeline::RecvStep step{.peer = partner, .count = count, .into = output, .reduce_with = partial,
                            .after_recv = written_by};
    // The result overwrites what the send reads where that is the same memory.
    if (partial.buffer == BufferRole::kOutput || in_place) step.after_send = send_step;
    if (bit * 2 == powers && op == ReduceOp::kAvg) step.divisor = static_cast<uint32_t>(size);
    schedule.recvs.push_back(step);
    partial = output;
    written_by = static_cast<int>(schedule.recvs.size()) - 1;
  }
  if (rank < 2 * rem) schedule.sends.push_back({.peer = rank - 1, .chunk = output, .recv_step = written_by});
  return schedule;
}

}  // namespace ucclzip::collectives
