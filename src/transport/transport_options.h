// Settings of one transport (one communicator's UCX context, worker and endpoints): the public
// communicator options, plus what only the library and its tests set.
#pragma once

#include <functional>
#include <memory>

#include "transport/staging_engine.h"
#include "ucclzip/communicator.h"

namespace ucclzip::transport {

// The public options reach the transport as they are; staging_copy_wakeups, for one, decides
// whether the staging engines signal the progress thread's eventfd and whether the thread
// sleeps while their copies run (transport_progress.cc, WaitForEvents).
// CommunicatorOptions::block_bytes where it is unset (communicator.h says why).
inline constexpr size_t kDefaultBlockBytes = size_t{4} << 20;
inline constexpr size_t kCudaUcxBlockBytes = size_t{256} << 20;
// The largest block_bytes: far above any useful block (a staging pool holds two per
// direction), and low enough that the block counts and pool sizes computed from it
// (kMaxBlocks blocks, twice a block) stay far inside 64 bits.
inline constexpr size_t kMaxBlockBytes = size_t{16} << 30;

struct TransportOptions : CommunicatorOptions {
  // Routes host buffers through the staged path too (copies by memcpy), so that the staged
  // pipeline runs, and is tested, on machines without a GPU.
  bool stage_host_memory = false;
  // Makes the engine that stages host memory instead of the memcpy one, given the eventfd it
  // signals per finished copy (-1: none): for tests whose copies finish later than Start, as
  // CUDA's do, which the memcpy engine's never do.
  std::function<std::unique_ptr<StagingEngine>(int copy_done_fd)> host_staging_engine;
};

}  // namespace ucclzip::transport
