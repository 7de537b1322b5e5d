// The CPU codec's work on host blocks (encode; decode and reduce), run in turn on a thread of
// its own rather than on the pipeline thread. Coding a 16 MB block takes the CPU milliseconds;
// on the pipeline thread that stalled every other block meanwhile, so a receiver decoding one
// block posted the next one's receives late and the link idled (1 Gbit/s shaped link, CPU
// machine: benchmarks/RESULTS.md, sixteenth session).
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ucclzip/codec.h"

namespace ucclzip::pipeline {

class HostCodecJobs {
 public:
  // A job's work, given the codec threads it may use: the communicator's, or none (null: it runs
  // on its own thread alone).
  using Work = std::function<absl::StatusOr<uint64_t>(HostCodecThreads* threads)>;

  // What a job gives back; the pipeline thread reads it once done() is true.
  class Job {
   public:
    bool done() const { return done_.load(std::memory_order_acquire); }
    const absl::StatusOr<uint64_t>& result() const { return result_; }  // e.g. the frame's bytes
    absl::Duration took() const { return took_; }

   private:
    friend class HostCodecJobs;
    Work work_;
    absl::StatusOr<uint64_t> result_ = uint64_t{0};
    absl::Duration took_;
    std::atomic<bool> done_{false};
  };

  // `threads`: the CPU codec's threads the jobs use (may be null); `wake` runs on the worker
  // after each job (the pipeline thread's wake-up).
  HostCodecJobs(HostCodecThreads* threads, std::function<void()> wake);
  // Runs what is queued, then stops.
  ~HostCodecJobs();
  HostCodecJobs(const HostCodecJobs&) = delete;
  HostCodecJobs& operator=(const HostCodecJobs&) = delete;

  // Queues `work` on `bytes` of payload, which must leave alone what the pipeline thread uses
  // until the job is done. Below kQueuedBytes it runs at once, on the calling thread: there
  // the hand-off to the worker and back costs more than it saves (4 ranks' 1 MB allreduces on
  // the CPU machine took 11 % longer with every host reduction queued). Such a job gets the
  // codec threads only while the worker is not running a job: the worker's job holds them, and
  // the small job would wait for all of it (a 16 MB encode) and count that wait as its own time,
  // which the policy reads as the CPU codec's speed.
  std::shared_ptr<const Job> Run(uint64_t bytes, Work work);

  static constexpr uint64_t kQueuedBytes = uint64_t{1} << 20;

 private:
  void Loop();
  static void Execute(Job& job, HostCodecThreads* threads);

  HostCodecThreads* const threads_;
  const std::function<void()> wake_;
  absl::Mutex mutex_;
  std::deque<std::shared_ptr<Job>> queue_ ABSL_GUARDED_BY(mutex_);
  bool running_ ABSL_GUARDED_BY(mutex_) = false;  // the worker is running a job
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace ucclzip::pipeline
