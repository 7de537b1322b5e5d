#include "collective_test_util.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "pipeline_test_util.h"

namespace ucclzip::testing {


std::string CollectiveCase::Name() const {
  return absl::StrCat(CollectiveName(kind), " ", count, " x ", DataTypeName(dtype), " ", ReduceOpName(op), " root ", root,
                      in_place ? " in-place" : "", " mode ", static_cast<int>(mode), " ", dist.Name());
}

std::vector<uint8_t> CaseInput(const CollectiveCase& c, int world, int rank, uint64_t seed) {
  return GenerateTensor(c.dtype, SendElements(c.Shape(world)), c.dist, seed * 7919 + uint64_t(rank) * 104729 + 1);
}

std::vector<uint8_t> ReferenceOutput(const CollectiveCase& c, int world, int rank, uint64_t seed) {
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(CaseInput(c, world, r, seed));
  return testing::ReferenceOutput(c.Shape(world), inputs, rank);
}

Operation Post(Communicator& comm, const CollectiveCase& c, const void* send, void* recv, cudaStream_t stream) {
  const CollectiveOptions options{.compression = c.mode};
  switch (c.kind) {
    case Collective::kAllGather: return comm.AllGather(send, recv, c.count, c.dtype, stream, options);
    case Collective::kReduceScatter: return comm.ReduceScatter(send, recv, c.count, c.dtype, c.op, stream, options);
    case Collective::kAllReduce: return comm.AllReduce(send, recv, c.count, c.dtype, c.op, stream, options);
    case Collective::kBroadcast: return comm.Broadcast(send, recv, c.count, c.dtype, c.root, stream, options);
    case Collective::kReduce: return comm.Reduce(send, recv, c.count, c.dtype, c.op, c.root, stream, options);
  }
  return Operation();
}

absl::Status RunAndCheck(Communicator& comm, const CollectiveCase& c, uint64_t seed, bool device, cudaStream_t stream) {
  const int world = comm.size(), rank = comm.rank();
  const size_t width = ElementSize(c.dtype);
  const std::vector<uint8_t> input = CaseInput(c, world, rank, seed);
  const uint64_t recv_bytes = RecvElements(c.Shape(world)) * width;
  // One allocation holds both buffers (or the in-place one), poisoned where the output goes.
  // In place, the input lies inside the output (allgather: at chunk `rank`) or the output
  // inside the input (reduce-scatter: at chunk `rank`), or they are the same.
  const uint64_t chunk_bytes = uint64_t(rank) * c.count * width;
  uint64_t send_offset = recv_bytes, recv_offset = 0;
  if (c.in_place) {
    send_offset = c.kind == Collective::kAllGather ? chunk_bytes : 0;
    recv_offset = c.kind == Collective::kReduceScatter ? chunk_bytes : 0;
  }
  const uint64_t total = c.in_place ? std::max<uint64_t>(input.size(), recv_bytes) : input.size() + recv_bytes;
  std::vector<uint8_t> host(std::max<uint64_t>(total, 1), 0xA5);
  std::memcpy(host.data() + send_offset, input.data(), input.size());
  const std::vector<uint8_t> before = host;
  uint8_t* base = host.data();
  void* device_base = nullptr;
  if (device) {
    // A copy from pageable memory may return before its DMA has landed; the call below is
    // ordered only after `stream`, so the upload must be complete first.
    if (cudaMalloc(&device_base, host.size()) != cudaSuccess ||
        cudaMemcpy(device_base, host.data(), host.size(), cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
      return absl::InternalError("device buffers");
    }
    base = static_cast<uint8_t*>(device_base);
  }
  absl::Status status = Post(comm, c, base + send_offset, base + recv_offset, stream).Wait(absl::Seconds(120));
  if (device) {
    if (status.ok() && stream != nullptr && cudaStreamSynchronize(stream) != cudaSuccess) status = absl::InternalError("stream");
    cudaMemcpy(host.data(), device_base, host.size(), cudaMemcpyDeviceToHost);
    cudaFree(device_base);
  }
  if (!status.ok()) return absl::Status(status.code(), absl::StrCat(c.Name(), ": ", status.message()));
  std::vector<uint8_t> want = ReferenceOutput(c, world, rank, seed);
  // A rank that receives nothing (a reduce's non-root) must leave its receive buffer as it was.
  if (want.empty()) want.assign(before.begin() + recv_offset, before.begin() + recv_offset + recv_bytes);
  return ExpectSameBytes(host.data() + recv_offset, want.data(), want.size(), absl::StrCat("rank ", rank, " ", c.Name()));
}

}  // namespace ucclzip::testing
