// Settings of one transport (one communicator's UCX context, worker and endpoints): the public
// communicator options, plus what only the library and its tests set.
#pragma once

#include "ucclzip/communicator.h"

namespace ucclzip::transport {

struct TransportOptions : CommunicatorOptions {
  // Routes host buffers through the staged path too (copies by memcpy), so that the staged
  // pipeline runs, and is tested, on machines without a GPU.
  bool stage_host_memory = false;
};

}  // namespace ucclzip::transport
