#include "collective_reference.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ucclzip/reduction.h"

namespace ucclzip::testing {
namespace {

// One hop of the oracle. Its arguments are the test's own shape's: an error is a bug of the
// test, and an output left unwritten would make every comparison meaningless, so it stops.
void Hop(const CollectiveShape& shape, const void* received, const void* local, void* out, uint64_t count,
         uint32_t divisor) {
  if (absl::Status s = ReduceOnHost(shape.dtype, shape.op, received, local, out, count, divisor); !s.ok()) {
    std::fprintf(stderr, "collective reference: %s\n", s.ToString().c_str());
    std::abort();
  }
}

}  // namespace

const char* CollectiveName(Collective kind) {
  switch (kind) {
    case Collective::kAllGather: return "allgather";
    case Collective::kReduceScatter: return "reducescatter";
    case Collective::kAllReduce: return "allreduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
  }
  return "?";
}

bool Reduces(Collective kind) {
  return kind == Collective::kReduceScatter || kind == Collective::kAllReduce || kind == Collective::kReduce;
}

bool HasRoot(Collective kind) { return kind == Collective::kBroadcast || kind == Collective::kReduce; }

uint64_t SendElements(const CollectiveShape& shape) {
  return shape.kind == Collective::kReduceScatter ? shape.count * shape.world : shape.count;
}

uint64_t RecvElements(const CollectiveShape& shape) {
  return shape.kind == Collective::kAllGather ? shape.count * shape.world : shape.count;
}

namespace {

// Recursive doubling's tree: with p the largest power of two <= n and rem = n - p, inputs 2i
// and 2i+1 are combined first for i < rem; the p values so left (in rank order) are then
// combined in pairs v, v + 2^j at level j, avg dividing at the last. Every operator gives the
// same bits with its operands swapped, so the order within a pair does not matter.
std::vector<uint8_t> RecursiveDoublingOrder(const CollectiveShape& shape, const std::vector<std::vector<uint8_t>>& inputs) {
  const int world = shape.world;
  int powers = 1;
  while (powers * 2 <= world) powers *= 2;
  const int rem = world - powers;
  std::vector<std::vector<uint8_t>> values;
  for (int r = 0; r < world; ++r) {
    if (r < 2 * rem && r % 2 == 0) continue;
    values.push_back(inputs[r]);
    if (r < 2 * rem) Hop(shape, inputs[r - 1].data(), inputs[r].data(), values.back().data(), shape.count, 1);
  }
  for (int bit = 1; bit < powers; bit <<= 1) {
    const uint32_t divisor = (bit * 2 == powers && shape.op == ReduceOp::kAvg) ? world : 1;
    std::vector<std::vector<uint8_t>> next = values;
    for (int v = 0; v < powers; ++v) {
      Hop(shape, values[v ^ bit].data(), values[v].data(), next[v].data(), shape.count, divisor);
    }
    values = std::move(next);
  }
  return values[0];
}

}  // namespace

std::vector<uint8_t> ReferenceOutput(const CollectiveShape& shape, const std::vector<std::vector<uint8_t>>& inputs, int rank) {
  const size_t width = ElementSize(shape.dtype);
  const int world = shape.world;
  std::vector<uint8_t> out(RecvElements(shape) * width);
  // The ring's order for the chunk that rank `owner` ends with: it starts at rank owner+1 and
  // each later rank combines (received op its own), avg dividing once at the owner. The chain
  // reduce combines in this order towards its root.
  auto reduce_chunk = [&](int owner, uint64_t first, uint64_t count, uint8_t* into) {
    const std::vector<uint8_t>& start = inputs[(owner + 1) % world];
    std::vector<uint8_t> acc(start.begin() + first * width, start.begin() + (first + count) * width);
    for (int k = 2; k <= world; ++k) {
      const uint32_t divisor = (k == world && shape.op == ReduceOp::kAvg) ? world : 1;
      Hop(shape, acc.data(), inputs[(owner + k) % world].data() + first * width, acc.data(), count, divisor);
    }
    std::copy(acc.begin(), acc.end(), into);
  };
  switch (shape.kind) {
    case Collective::kAllGather:
      for (int r = 0; r < world; ++r) std::copy(inputs[r].begin(), inputs[r].end(), out.begin() + r * shape.count * width);
      break;
    case Collective::kBroadcast:
      out = inputs[shape.root];
      break;
    case Collective::kReduceScatter:
      reduce_chunk(rank, rank * shape.count, shape.count, out.data());
      break;
    case Collective::kReduce:
      if (rank != shape.root) return {};
      reduce_chunk(shape.root, 0, shape.count, out.data());
      break;
    case Collective::kAllReduce: {
      const uint64_t bytes = shape.count * width;
      if (shape.recursive_doubling_bytes > 0 && bytes <= shape.recursive_doubling_bytes) {
        out = RecursiveDoublingOrder(shape, inputs);
        break;
      }
      // Near-equal chunks: the first count % world ranks own one element more.
      uint64_t first = 0;
      for (int owner = 0; owner < world; ++owner) {
        const uint64_t count = shape.count / world + (uint64_t(owner) < shape.count % world ? 1 : 0);
        reduce_chunk(owner, first, count, out.data() + first * width);
        first += count;
      }
      break;
    }
  }
  return out;
}

}  // namespace ucclzip::testing
