// Communicator creation and shutdown: the bootstrap, then the transport on top of it.
#include "absl/strings/str_cat.h"
#include "transport/communicator_access.h"

namespace ucclzip {

struct Communicator::Impl {
  std::unique_ptr<transport::Bootstrap> bootstrap;
  std::unique_ptr<transport::Transport> transport;
};

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(const CommunicatorConfig& config) {
  transport::TransportOptions options;
  static_cast<CommunicatorOptions&>(options) = config.options;
  return internal::CommunicatorAccess::Create(config.bootstrap, options);
}

Communicator::~Communicator() {
  // The barrier makes sure every rank has finished with the others (every completed send
  // delivered) before the endpoints are closed; if a peer is gone it fails fast or times out.
  impl_->bootstrap->Barrier(absl::Now() + impl_->transport->options().shutdown_timeout).IgnoreError();
  impl_->transport->Shutdown();
}

int Communicator::rank() const { return impl_->transport->rank(); }
int Communicator::size() const { return impl_->transport->size(); }
bool Communicator::device_memory_direct() const { return impl_->transport->device_memory_direct(); }

void Communicator::Abort() {
  impl_->transport->Abort(absl::AbortedError(absl::StrCat("rank ", rank(), " called Abort")));
}

namespace internal {

transport::Transport& CommunicatorAccess::TransportOf(Communicator& communicator) {
  return *communicator.impl_->transport;
}

transport::Bootstrap& CommunicatorAccess::BootstrapOf(Communicator& communicator) {
  return *communicator.impl_->bootstrap;
}

absl::StatusOr<std::unique_ptr<Communicator>> CommunicatorAccess::Create(const BootstrapConfig& bootstrap,
                                                                         const transport::TransportOptions& options) {
  auto impl = std::make_unique<Communicator::Impl>();
  absl::StatusOr<std::unique_ptr<transport::Bootstrap>> joined = transport::Bootstrap::Create(bootstrap);
  if (!joined.ok()) return joined.status();
  impl->bootstrap = std::move(*joined);
  absl::StatusOr<std::unique_ptr<transport::Transport>> created = transport::Transport::Create(*impl->bootstrap, options);
  if (!created.ok()) return created.status();
  impl->transport = std::move(*created);
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

}  // namespace internal
}  // namespace ucclzip
