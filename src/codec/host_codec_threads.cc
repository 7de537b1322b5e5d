// HostCodecThreads: a fixed set of workers that take the tasks of one batch at a time, the
// calling thread taking tasks beside them.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "codec/host_parallel.h"
#include "ucclzip/codec.h"

namespace ucclzip {
namespace {

// Memory that grows to the largest size asked for and is never zeroed.
struct ScratchBuffer {
  std::unique_ptr<uint8_t[]> data;
  uint64_t bytes = 0;

  uint8_t* Reserve(uint64_t wanted) {
    if (bytes < wanted) {
      data.reset();
      data = std::make_unique_for_overwrite<uint8_t[]>(wanted);
      bytes = wanted;
    }
    return data.get();
  }
};

}  // namespace

struct HostCodecThreads::State {
  using Task = absl::FunctionRef<void(uint32_t)>;

  // Held by the call in progress (ParallelCall), which alone starts batches and uses scratch.
  absl::Mutex call_mutex;
  ScratchBuffer scratch;

  absl::Mutex mutex;
  uint64_t batch ABSL_GUARDED_BY(mutex) = 0;  // bumped to start a batch
  bool stopping ABSL_GUARDED_BY(mutex) = false;
  int running ABSL_GUARDED_BY(mutex) = 0;  // workers not yet done with the current batch
  const Task* task ABSL_GUARDED_BY(mutex) = nullptr;  // the current batch and its size
  uint32_t tasks ABSL_GUARDED_BY(mutex) = 0;
  std::atomic<uint32_t> next_task{0};  // the batch's next task to take
  std::vector<std::thread> workers;

  void TakeTasks(const Task& fn, uint32_t count) {
    for (uint32_t t; (t = next_task.fetch_add(1, std::memory_order_relaxed)) < count;) fn(t);
  }

  void Work() {
    uint64_t seen = 0;
    for (;;) {
      const Task* fn;
      uint32_t count;
      {
        absl::MutexLock lock(&mutex);
        const auto woken = [&]() ABSL_SHARED_LOCKS_REQUIRED(mutex) { return stopping || batch != seen; };
        mutex.Await(absl::Condition(&woken));
        if (stopping) return;
        seen = batch;
        fn = task;
        count = tasks;
      }
      TakeTasks(*fn, count);
      absl::MutexLock lock(&mutex);
      --running;
    }
  }

  // Every worker joins every batch, so that none can still be in a batch when the next starts.
  void Run(uint32_t count, const Task& fn) {
    {
      absl::MutexLock lock(&mutex);
      task = &fn;
      tasks = count;
      next_task.store(0, std::memory_order_relaxed);
      running = static_cast<int>(workers.size());
      ++batch;
    }
    TakeTasks(fn, count);
    absl::MutexLock lock(&mutex);
    const auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mutex) { return running == 0; };
    mutex.Await(absl::Condition(&done));
  }

  void Stop() {
    {
      absl::MutexLock lock(&mutex);
      stopping = true;
    }
    for (std::thread& worker : workers) worker.join();
    workers.clear();
  }
};

int DefaultHostCodecThreads() {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency() / 2), 1, 8);
}

absl::StatusOr<std::unique_ptr<HostCodecThreads>> HostCodecThreads::Create(int threads) {
  constexpr int kMaxThreads = 256;
  if (threads < 0 || threads > kMaxThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("CPU codec threads: ", threads, " is not in [0, ", kMaxThreads, "] (0 = the default)"));
  }
  if (threads == 0) threads = DefaultHostCodecThreads();
  auto state = std::make_unique<State>();
  try {
    for (int i = 1; i < threads; ++i) {
      std::thread& worker = state->workers.emplace_back([s = state.get()] { s->Work(); });
      pthread_setname_np(worker.native_handle(), "ucclzip-codec");
    }
  } catch (const std::system_error& e) {
    // Counted before Stop, which joins the workers that did start and forgets them.
    const size_t failed = state->workers.size() + 1;
    state->Stop();
    return absl::ResourceExhaustedError(
        absl::StrCat("CPU codec threads: starting worker ", failed, " of ", threads - 1, ": ", e.what()));
  }
  return std::unique_ptr<HostCodecThreads>(new HostCodecThreads(std::move(state)));
}

HostCodecThreads::HostCodecThreads(std::unique_ptr<State> state) : state_(std::move(state)) {}

HostCodecThreads::~HostCodecThreads() { state_->Stop(); }

int HostCodecThreads::threads() const { return static_cast<int>(state_->workers.size()) + 1; }

struct internal::HostCodecThreadsAccess {
  static HostCodecThreads::State* State(HostCodecThreads* threads) {
    return threads != nullptr ? threads->state_.get() : nullptr;
  }
};

namespace codec {

using Access = internal::HostCodecThreadsAccess;

ParallelCall::ParallelCall(HostCodecThreads* threads) : threads_(threads) {
  if (threads_ != nullptr) Access::State(threads_)->call_mutex.Lock();
}

ParallelCall::~ParallelCall() {
  if (threads_ != nullptr) Access::State(threads_)->call_mutex.Unlock();
}

uint32_t ParallelCall::TaskCount(uint64_t units) const {
  constexpr uint64_t kTasksPerThread = 4;
  const uint64_t threads = threads_ != nullptr ? threads_->threads() : 1;
  if (threads == 1) return units > 0 ? 1 : 0;
  return static_cast<uint32_t>(std::min<uint64_t>(units, kTasksPerThread * threads));
}

void ParallelCall::Run(uint32_t tasks, absl::FunctionRef<void(uint32_t task)> fn) {
  if (threads_ == nullptr || threads_->threads() == 1 || tasks <= 1) {
    for (uint32_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  Access::State(threads_)->Run(tasks, fn);
}

uint8_t* ParallelCall::Scratch(uint64_t bytes) { return Access::State(threads_)->scratch.Reserve(bytes); }

uint8_t* ThreadScratch(uint64_t bytes) {
  static thread_local ScratchBuffer buffer;
  return buffer.Reserve(bytes);
}

}  // namespace codec
}  // namespace ucclzip
