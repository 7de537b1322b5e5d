// Device buffers between processes: through the staged path with a host-only UCX, or directly
// with a CUDA-enabled one; staged also with copy wake-ups (the CUDA engine's host functions).
// Skipped where there is no GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/gpu_test.h"
#include "transport/direct_allocations.h"
#include "transport/rank_helpers.h"

namespace ucclzip::testing {
namespace {

using transport::MemoryType;
using transport::OpTag;

absl::Status Cuda(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

struct DevicePath {
  std::string name;
  std::string tls;
  bool copy_wakeups;  // staged copies wake the sleeping progress thread (CommunicatorOptions::staging_copy_wakeups)
};

class DeviceBuffers : public ::testing::TestWithParam<DevicePath> {};

// Both ranks send to each other from device memory into device memory, in sizes that cross the
// block and staging-pool boundaries; every byte is checked on the host afterwards.
TEST_P(DeviceBuffers, ArriveIntactThroughStagingOrDirectly) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  const DevicePath path = GetParam();
  auto outcomes = RunRanks({.world_size = 2}, [&](const RankContext& context) -> absl::Status {
    transport::TransportOptions options;
    options.ucx_transports = path.tls;
    options.staging_copy_wakeups = path.copy_wakeups;
    options.block_bytes = size_t{1} << 20;
    options.staging_pool_bytes = size_t{8} << 20;
    if (absl::Status s = Cuda(cudaSetDevice(0), "cudaSetDevice"); !s.ok()) return s;
    auto communicator = CreateCommunicator(context, options);
    if (!communicator.ok()) return communicator.status();
    transport::Transport& transport = TransportOf(**communicator);
    const int peer = 1 - context.rank;
    for (size_t bytes : {size_t{1}, size_t{4096}, (size_t{1} << 20) + 3, size_t{64} << 20}) {
      std::vector<uint8_t> host_out(bytes), host_in(bytes);
      FillPattern(host_out.data(), bytes, SeedOf(context.rank, peer, bytes));
      void* device_out = nullptr;
      void* device_in = nullptr;
      if (absl::Status s = Cuda(cudaMalloc(&device_out, bytes), "cudaMalloc"); !s.ok()) return s;
      if (absl::Status s = Cuda(cudaMalloc(&device_in, bytes), "cudaMalloc"); !s.ok()) return s;
      absl::Status status = Cuda(cudaMemcpy(device_out, host_out.data(), bytes, cudaMemcpyHostToDevice), "upload");
      status.Update(Cuda(cudaMemset(device_in, 0, bytes), "cudaMemset"));
      // The transport takes buffers as they are when posted (it has no stream to order
      // against): the upload's DMA and the memset must be complete first.
      status.Update(Cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
      if (status.ok()) {
        auto recv = transport.Recv(peer, device_in, bytes, MemoryType::kDevice, OpTag{1, 0});
        auto send = transport.Send(peer, device_out, bytes, MemoryType::kDevice, OpTag{1, 0});
        status = WaitAll({recv, send}, absl::Now() + absl::Seconds(60));
      }
      if (status.ok()) status = Cuda(cudaMemcpy(host_in.data(), device_in, bytes, cudaMemcpyDeviceToHost), "download");
      cudaFree(device_out);
      cudaFree(device_in);
      if (!status.ok()) return status;
      auto what = absl::StrCat("rank ", context.rank, ": ", bytes, " device bytes from rank ", peer,
                               transport.device_memory_direct() ? " (direct)" : " (staged)");
      if (absl::Status s = VerifyPattern(host_in.data(), bytes, SeedOf(peer, context.rank, bytes), what); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  ExpectRanksSucceeded(outcomes);
}

// The driver's half of telling recycled addresses apart (direct_allocations.h): it places a
// pointer inside its allocation, and a new allocation at a freed one's addresses has another id.
TEST(DeviceAllocations, TheDriverTellsANewAllocationAtRecycledAddressesApart) {
  UCCLZIP_SKIP_WITHOUT_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const size_t bytes = size_t{3} << 20;
  void* first = nullptr;
  ASSERT_EQ(cudaMalloc(&first, bytes), cudaSuccess);
  absl::StatusOr<transport::DeviceAllocation> before = transport::FindDeviceAllocation(static_cast<uint8_t*>(first) + 4097);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->base, reinterpret_cast<uintptr_t>(first));
  EXPECT_GE(before->size, bytes);
  ASSERT_EQ(cudaFree(first), cudaSuccess);
  void* second = nullptr;
  ASSERT_EQ(cudaMalloc(&second, bytes), cudaSuccess);
  absl::StatusOr<transport::DeviceAllocation> after = transport::FindDeviceAllocation(second);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_NE(after->buffer_id, before->buffer_id);
  transport::DirectAllocations allocations;
  EXPECT_TRUE(allocations.Admit(*before));
  // The driver hands the freed addresses out again (as the hang needed); where it does not,
  // the new allocation is disjoint and goes directly, which is right too.
  const bool overlaps = after->base < before->base + before->size && before->base < after->base + after->size;
  EXPECT_EQ(allocations.Admit(*after), !overlaps) << "first " << first << ", second " << second;
  ASSERT_EQ(cudaFree(second), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(, DeviceBuffers,
                         ::testing::Values(DevicePath{"tcp", "tcp", false}, DevicePath{"shm", "posix,sysv", false},
                                           DevicePath{"tcp_wakeups", "tcp", true},
                                           DevicePath{"shm_wakeups", "posix,sysv", true}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace ucclzip::testing
