// What the Send/Recv tests' rank bodies share: communicator options that make every size
// cross pipeline and transport block boundaries, tensors per (dtype, distribution, seed), and a
// bit-exact comparison whose error names the first differing byte.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor_gen.h"
#include "transport/rank_helpers.h"

namespace ucclzip::testing {

// Small pipeline blocks (256 KB) over 64 KB transport blocks, compression on for every size.
// `tls` with UCX's CUDA transports added where UCCLZIP_TEST_CUDA_UCX=1 (scripts/gpu-run sets it
// for the tests it runs against the libucx-cu13 wheel), so that the device tests take the direct
// path there; UCX takes CUDA memory only where a CUDA transport is among UCX_TLS.
std::string WithCudaTransports(const std::string& tls);

transport::TransportOptions PipelineOptions(const std::string& tls = "tcp");

// The same with 3-second operation and shutdown timeouts, for tests of failures.
transport::TransportOptions ShortTimeoutOptions();

absl::Status ExpectSameBytes(const uint8_t* got, const uint8_t* want, size_t bytes, const std::string& what);

// Waits (60 s) and adds `what` to a failure.
absl::Status WaitOk(const Operation& operation, const std::string& what);

}  // namespace ucclzip::testing
