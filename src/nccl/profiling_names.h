// NCCL's library defines every function twice: under its name and under a "p" twin
// (pncclAllReduce), which a profiler that interposes on the first calls through, as MPI's PMPI.
// The shim answers the twins too, as aliases of its own functions: otherwise a tool's pnccl*
// call would reach the real NCCL (loaded beside the preloaded shim) with a ucclzip communicator.
#pragma once

#include <nccl.h>

// Declares `p<name>` as another name of the function `name`, which the same file defines.
#define UCCLZIP_NCCL_PROFILING_TWIN(name) extern "C" decltype(name) p##name __attribute__((alias(#name)))
