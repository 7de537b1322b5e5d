#include "transport/ucx_context.h"

#include "absl/strings/str_cat.h"

namespace ucclzip::transport {

absl::Status UcxStatus(ucs_status_t status, absl::string_view context) {
  if (status == UCS_OK) return absl::OkStatus();
  auto message = absl::StrCat(context, ": ", ucs_status_string(status));
  switch (status) {
    case UCS_ERR_CANCELED: return absl::CancelledError(message);
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT: return absl::DeadlineExceededError(message);
    case UCS_ERR_MESSAGE_TRUNCATED: return absl::InvalidArgumentError(message);
    case UCS_ERR_NO_MEMORY: return absl::ResourceExhaustedError(message);
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_NOT_CONNECTED: return absl::UnavailableError(message);
    default: return absl::InternalError(message);
  }
}

absl::StatusOr<std::unique_ptr<UcxContext>> UcxContext::Create(const std::string& transports, int rank) {
  auto where = absl::StrCat("rank ", rank, ": UCX");
  std::unique_ptr<UcxContext> ucx(new UcxContext());
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
    return UcxStatus(s, absl::StrCat(where, " ucp_config_read"));
  }
  if (!transports.empty()) {
    if (ucs_status_t s = ucp_config_modify(config, "TLS", transports.c_str()); s != UCS_OK) {
      ucp_config_release(config);
      return UcxStatus(s, absl::StrCat(where, " transports '", transports, "'"));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.name = "ucclzip";
  ucs_status_t init = ucp_init(&params, config, &ucx->context_);
  ucp_config_release(config);
  if (init != UCS_OK) {
    return UcxStatus(init, absl::StrCat(where, " ucp_init (transports '", transports.empty() ? "default" : transports, "')"));
  }

  ucp_context_attr_t attributes{};
  attributes.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucs_status_t s = ucp_context_query(ucx->context_, &attributes); s != UCS_OK) {
    return UcxStatus(s, absl::StrCat(where, " ucp_context_query"));
  }
  ucx->cuda_memory_supported_ = (attributes.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;

  // Only the progress thread touches the worker, so it needs no locks.
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (ucs_status_t s = ucp_worker_create(ucx->context_, &worker_params, &ucx->worker_); s != UCS_OK) {
    return UcxStatus(s, absl::StrCat(where, " ucp_worker_create"));
  }
  ucp_address_t* address = nullptr;
  size_t address_bytes = 0;
  if (ucs_status_t s = ucp_worker_get_address(ucx->worker_, &address, &address_bytes); s != UCS_OK) {
    return UcxStatus(s, absl::StrCat(where, " ucp_worker_get_address"));
  }
  ucx->address_.assign(reinterpret_cast<const char*>(address), address_bytes);
  ucp_worker_release_address(ucx->worker_, address);
  if (ucp_worker_get_efd(ucx->worker_, &ucx->event_fd_) != UCS_OK) ucx->event_fd_ = -1;
  return ucx;
}

UcxContext::~UcxContext() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

}  // namespace ucclzip::transport
