// A UCP context with one worker, as a communicator uses it: tag matching, wakeup, peer error
// handling, and the answer to "does this UCX take CUDA memory?".
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ucclzip::transport {

// A UCX status as an absl::Status whose message starts with `context`.
absl::Status UcxStatus(ucs_status_t status, absl::string_view context);

class UcxContext {
 public:
  // `transports` sets UCX_TLS for this context only; empty keeps UCX's choice (and UCX_TLS).
  static absl::StatusOr<std::unique_ptr<UcxContext>> Create(const std::string& transports, int rank);
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  ucp_worker_h worker() const { return worker_; }
  bool cuda_memory_supported() const { return cuda_memory_supported_; }
  // The worker's address, for the peers' endpoints.
  const std::string& address() const { return address_; }
  // Becomes readable when the worker has events (after ucp_worker_arm); -1 if unsupported.
  int event_fd() const { return event_fd_; }

 private:
  UcxContext() = default;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  bool cuda_memory_supported_ = false;
  std::string address_;
  int event_fd_ = -1;
};

}  // namespace ucclzip::transport
