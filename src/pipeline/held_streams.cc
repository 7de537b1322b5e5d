#include "pipeline/held_streams.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "logging/logging.h"

namespace ucclzip::pipeline {

namespace {

constexpr int kCudaDefaultQueues = 8;
constexpr int kCudaMostQueues = 32;

// What to change, for the refusals.
constexpr char kWaysOut[] =
    "set CUDA_DEVICE_MAX_CONNECTIONS to 32 before CUDA starts, or set hold_caller_stream = false "
    "(UCCLZIP_HOLD_STREAM=0) and Wait() on the operation before the stream uses its buffers";

}  // namespace

int HardwareQueues(const char* max_connections) {
  int queues = 0;
  if (max_connections == nullptr || !absl::SimpleAtoi(max_connections, &queues)) return kCudaDefaultQueues;
  return std::clamp(queues, 1, kCudaMostQueues);
}

HeldStreams& HeldStreams::ForDevice(int device) {
  static absl::Mutex mutex(absl::kConstInit);
  static auto* const by_device = new std::map<int, std::unique_ptr<HeldStreams>>();
  absl::MutexLock lock(&mutex);
  std::unique_ptr<HeldStreams>& held = (*by_device)[device];
  if (held == nullptr) {
    int mps = 0;
    if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, device) != cudaSuccess) {
      cudaGetLastError();  // a driver that cannot tell has no MPS to tell of
      mps = 0;
    }
    held = std::make_unique<HeldStreams>(HardwareQueues(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")), mps != 0);
    UCCLZIP_LOG(kInfo) << "CUDA device " << device << (mps != 0 ? ", shared through MPS" : "") << ": "
                       << held->hardware_queues_ << " hardware queues, at most " << held->capacity_
                       << " callers' streams held at once";
  }
  return *held;
}

HeldStreams::HeldStreams(int hardware_queues, bool shared_by_mps)
    : hardware_queues_(hardware_queues),
      capacity_(shared_by_mps || hardware_queues < kFewestQueues ? 0 : std::min(hardware_queues / 2, kMostHeld)) {}

absl::Status HeldStreams::Acquire(absl::Span<const cudaStream_t> streams, absl::Time deadline) {
  std::vector<cudaStream_t> distinct(streams.begin(), streams.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const int wanted = static_cast<int>(distinct.size());
  if (wanted > capacity_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the call holds ", wanted, " streams at once, and this process can hold at most ", capacity_, " on this device",
        " (half its CUDA_DEVICE_MAX_CONNECTIONS=", hardware_queues_,
        " hardware queues, where a held stream takes one): use fewer streams in one group, or ", kWaysOut));
  }
  absl::MutexLock lock(&mutex_);
  auto fits = [&]() ABSL_SHARED_LOCKS_REQUIRED(mutex_) {
    int more = 0;
    for (cudaStream_t stream : distinct) more += !holds_.contains(stream);
    return static_cast<int>(holds_.size()) + more <= capacity_;
  };
  if (!mutex_.AwaitWithDeadline(absl::Condition(&fits), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "waited until the call's deadline to hold its stream: ", holds_.size(), " streams of this process are held on this device by ",
        "unfinished calls, as many as ", hardware_queues_,
        " hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) allow with half left for the pipeline's work; finish "
        "earlier calls first, use fewer streams, or ",
        kWaysOut));
  }
  for (cudaStream_t stream : streams) ++holds_[stream];
  return absl::OkStatus();
}

void HeldStreams::Release(cudaStream_t stream) {
  absl::MutexLock lock(&mutex_);
  auto it = holds_.find(stream);
  if (it != holds_.end() && --it->second == 0) holds_.erase(it);
}

int HeldStreams::held() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int>(holds_.size());
}

}  // namespace ucclzip::pipeline
