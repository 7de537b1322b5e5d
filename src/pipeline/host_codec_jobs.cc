#include "pipeline/host_codec_jobs.h"

#include <pthread.h>

namespace ucclzip::pipeline {

HostCodecJobs::HostCodecJobs(std::function<void()> wake) : wake_(std::move(wake)) {
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), "ucclzip-hostcodec");
}

HostCodecJobs::~HostCodecJobs() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  thread_.join();
}

std::shared_ptr<const HostCodecJobs::Job> HostCodecJobs::Run(uint64_t bytes,
                                                             std::function<absl::StatusOr<uint64_t>()> work) {
  auto job = std::make_shared<Job>();
  job->work_ = std::move(work);
  if (bytes < kQueuedBytes) {
    Execute(*job);
    return job;
  }
  absl::MutexLock lock(&mutex_);
  queue_.push_back(job);
  return job;
}

void HostCodecJobs::Execute(Job& job) {
  const absl::Time start = absl::Now();
  job.result_ = job.work_();
  job.took_ = absl::Now() - start;
  job.work_ = nullptr;  // what it captured goes now, on this thread
  job.done_.store(true, std::memory_order_release);
}

void HostCodecJobs::Loop() {
  while (true) {
    std::shared_ptr<Job> job;
    {
      absl::MutexLock lock(&mutex_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mutex_) { return stopping_ || !queue_.empty(); };
      mutex_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, with nothing left to run
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    Execute(*job);
    wake_();
  }
}

}  // namespace ucclzip::pipeline
