#!/usr/bin/env bash
# How late a short timed wait wakes (docs/PIPELINE.md, "Stages and files"): the pipeline thread
# polls CUDA events with 20 us timed waits while a task waits on the GPU, and Linux lets a timed
# wait run late by the thread's timer slack (/proc/self/timerslack_ns, 50 us unless set). This
# times 2000 20 us waits of nanosleep and of a condition variable, under the default slack and
# under the 1 us the pipeline thread sets (PR_SET_TIMERSLACK). Needs a C++ compiler only; runs
# on the CPU machine and on the GPU machine (`scripts/gpu-run timer-slack`).
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/slack.cc" <<'CC'
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <vector>

int main() {
  std::mutex mutex;
  std::condition_variable never;
  for (unsigned long slack_ns : {50000ul, 1000ul}) {
    prctl(PR_SET_TIMERSLACK, slack_ns);
    std::vector<double> sleeps, waits;
    for (int i = 0; i < 2000; ++i) {
      auto start = std::chrono::steady_clock::now();
      timespec twenty_us{0, 20000};
      nanosleep(&twenty_us, nullptr);
      sleeps.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
      start = std::chrono::steady_clock::now();
      std::unique_lock lock(mutex);
      never.wait_for(lock, std::chrono::microseconds(20));
      waits.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(sleeps.begin(), sleeps.end());
    std::sort(waits.begin(), waits.end());
    std::printf("timer slack %lu ns: a 20 us nanosleep took %.1f us (median), a 20 us condition wait %.1f us\n",
                slack_ns, sleeps[sleeps.size() / 2], waits[waits.size() / 2]);
  }
}
CC
c++ -std=c++20 -O2 -o "$work/slack" "$work/slack.cc"
"$work/slack"
