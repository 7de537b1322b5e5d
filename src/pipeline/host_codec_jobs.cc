#include "pipeline/host_codec_jobs.h"

#include <pthread.h>

namespace ucclzip::pipeline {

HostCodecJobs::HostCodecJobs(HostCodecThreads* threads, std::function<void()> wake)
    : threads_(threads), wake_(std::move(wake)) {
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

std::shared_ptr<const HostCodecJobs::Job> HostCodecJobs::Run(uint64_t bytes, Work work) {
  auto job = std::make_shared<Job>();
  job->work_ = std::move(work);
  if (bytes < kQueuedBytes) {
    HostCodecThreads* threads = nullptr;
    {
      absl::MutexLock lock(&mutex_);
      if (!running_) threads = threads_;
    }
    Execute(*job, threads);
    return job;
  }
  absl::MutexLock lock(&mutex_);
  queue_.push_back(job);
  return job;
}

void HostCodecJobs::Execute(Job& job, HostCodecThreads* threads) {
  const absl::Time start = absl::Now();
  job.result_ = job.work_(threads);
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
      running_ = true;
    }
    Execute(*job, threads_);
    {
      absl::MutexLock lock(&mutex_);
      running_ = false;
    }
    wake_();
  }
}

}  // namespace ucclzip::pipeline
