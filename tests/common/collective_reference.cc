#include "collective_reference.h"

#include <algorithm>
#include <cstring>

#include "ucclzip/reduction.h"

namespace ucclzip::testing {

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
      ReduceOnHost(shape.dtype, shape.op, acc.data(), inputs[(owner + k) % world].data() + first * width, acc.data(), count,
                   divisor);
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
