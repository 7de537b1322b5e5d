#include "collective_test_util.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/statusor.h"
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

std::vector<uint8_t> ReferenceOutput(const CollectiveCase& c, const Communicator& comm, uint64_t seed) {
  const int world = comm.size();
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(CaseInput(c, world, r, seed));
  return testing::ReferenceOutput(c.Shape(world, comm.options().recursive_doubling_bytes), inputs, comm.rank());
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

namespace {

// One case's buffers: one allocation holds both (or the in-place one), poisoned where the
// output goes. In place, the input lies inside the output (allgather: at chunk `rank`) or the
// output inside the input (reduce-scatter: at chunk `rank`), or they are the same.
struct CaseBuffers {
  std::vector<uint8_t> host, before;
  uint64_t send_offset = 0, recv_offset = 0, recv_bytes = 0;
  void* device = nullptr;
  uint8_t* base = nullptr;
};

absl::StatusOr<CaseBuffers> Prepare(const CollectiveCase& c, int world, int rank, uint64_t seed, bool device) {
  CaseBuffers b;
  const size_t width = ElementSize(c.dtype);
  const std::vector<uint8_t> input = CaseInput(c, world, rank, seed);
  b.recv_bytes = RecvElements(c.Shape(world)) * width;
  const uint64_t chunk_bytes = uint64_t(rank) * c.count * width;
  b.send_offset = b.recv_bytes;
  if (c.in_place) {
    b.send_offset = c.kind == Collective::kAllGather ? chunk_bytes : 0;
    b.recv_offset = c.kind == Collective::kReduceScatter ? chunk_bytes : 0;
  }
  const uint64_t total = c.in_place ? std::max<uint64_t>(input.size(), b.recv_bytes) : input.size() + b.recv_bytes;
  b.host.assign(std::max<uint64_t>(total, 1), 0xA5);
  std::memcpy(b.host.data() + b.send_offset, input.data(), input.size());
  b.before = b.host;
  b.base = b.host.data();
  if (device) {
    // A copy from pageable memory may return before its DMA has landed; the call is ordered
    // only after its stream, so the upload must be complete first.
    if (cudaMalloc(&b.device, b.host.size()) != cudaSuccess ||
        cudaMemcpy(b.device, b.host.data(), b.host.size(), cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
      if (b.device != nullptr) cudaFree(b.device);
      return absl::InternalError("device buffers");
    }
    b.base = static_cast<uint8_t*>(b.device);
  }
  return b;
}

// Copies a device case's output back (and frees it), then compares it with the reference.
absl::Status Check(CaseBuffers& b, const CollectiveCase& c, const Communicator& comm, uint64_t seed) {
  if (b.device != nullptr) {
    cudaMemcpy(b.host.data(), b.device, b.host.size(), cudaMemcpyDeviceToHost);
    cudaFree(b.device);
    b.device = nullptr;
  }
  std::vector<uint8_t> want = ReferenceOutput(c, comm, seed);
  // A rank that receives nothing (a reduce's non-root) must leave its receive buffer as it was.
  if (want.empty()) want.assign(b.before.begin() + b.recv_offset, b.before.begin() + b.recv_offset + b.recv_bytes);
  return ExpectSameBytes(b.host.data() + b.recv_offset, want.data(), want.size(),
                         absl::StrCat("rank ", comm.rank(), " ", c.Name()));
}

}  // namespace

absl::Status RunAndCheckGroup(Communicator& comm, const std::vector<CollectiveCase>& cases, uint64_t seed, bool device,
                              cudaStream_t stream) {
  const int world = comm.size(), rank = comm.rank();
  std::vector<CaseBuffers> buffers;
  absl::Status status;
  for (size_t i = 0; i < cases.size() && status.ok(); ++i) {
    absl::StatusOr<CaseBuffers> b = Prepare(cases[i], world, rank, seed + i, device);
    if (b.ok()) buffers.push_back(std::move(*b));
    status = b.status();
  }
  const std::string name = cases.size() == 1 ? cases[0].Name() : absl::StrCat("a group of ", cases.size(), " calls");
  if (status.ok()) {
    const bool group = cases.size() > 1;
    if (group) comm.GroupStart();
    std::vector<Operation> calls;
    for (size_t i = 0; i < cases.size(); ++i) {
      calls.push_back(Post(comm, cases[i], buffers[i].base + buffers[i].send_offset,
                           buffers[i].base + buffers[i].recv_offset, stream));
    }
    if (group) calls.assign(1, comm.GroupEnd());
    for (const Operation& call : calls) status.Update(call.Wait(absl::Seconds(120)));
    if (device && status.ok() && stream != nullptr && cudaStreamSynchronize(stream) != cudaSuccess) {
      status = absl::InternalError("stream");
    }
  }
  // Every case is checked (which also frees its device buffer); the first failure is reported.
  absl::Status checked;
  for (size_t i = 0; i < buffers.size(); ++i) checked.Update(Check(buffers[i], cases[i], comm, seed + i));
  if (!status.ok()) return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
  return checked;
}

absl::Status RunAndCheck(Communicator& comm, const CollectiveCase& c, uint64_t seed, bool device, cudaStream_t stream) {
  return RunAndCheckGroup(comm, {c}, seed, device, stream);
}

TestBuffer::TestBuffer(std::vector<uint8_t> contents, bool device) : host_(std::move(contents)) {
  if (!device) return;
  if (cudaMalloc(&device_, std::max<size_t>(host_.size(), 1)) != cudaSuccess ||
      cudaMemcpy(device_, host_.data(), host_.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
    status_ = absl::InternalError(absl::StrCat("device buffer of ", host_.size(), " bytes"));
  }
}

TestBuffer::~TestBuffer() {
  if (device_ != nullptr) cudaFree(device_);
}

absl::Status TestBuffer::Clear() {
  if (device_ == nullptr) {
    std::fill(host_.begin(), host_.end(), 0xA5);
    return absl::OkStatus();
  }
  return cudaMemset(device_, 0xA5, host_.size()) == cudaSuccess ? absl::OkStatus() : absl::InternalError("cudaMemset");
}

absl::StatusOr<std::vector<uint8_t>> TestBuffer::Read() {
  if (device_ != nullptr && cudaMemcpy(host_.data(), device_, host_.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
    return absl::InternalError("reading back a device buffer");
  }
  return host_;
}

}  // namespace ucclzip::testing
