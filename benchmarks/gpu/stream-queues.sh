#!/usr/bin/env bash
# Which streams a held stream stops (docs/PIPELINE.md, "Known limits"): CUDA puts each stream of
# a process in one of CUDA_DEVICE_MAX_CONNECTIONS hardware queues, and a queue runs its work in
# order, so a cuStreamWaitValue32 that holds one stream also stops later work of the streams
# that share its queue. This probe holds one stream of default priority, then queues a small
# kernel on each of 8 later streams of default priority and 8 of the greatest priority, and
# counts those that finish within 2 s while the hold lasts; the hold is then let go. It answers
# whether the pipeline could keep its own work clear of a held caller stream by giving its
# streams another priority. Needs nvcc and the CUDA driver only (not ucclzip); writes
# $OUT/stream-queues.txt.
#   QUEUES  values of CUDA_DEVICE_MAX_CONNECTIONS to try (default: "1 8 32")
set -euo pipefail
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/probe.cu" <<'CU'
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

__global__ void Touch(int* out) { *out = 1; }

// Streams of `priority` created after the held one: how many finish a kernel while it is held.
static int FinishedWhileHeld(int priority, int streams) {
  int finished = 0;
  cudaStream_t probe[64];
  cudaEvent_t done[64];
  int* out = nullptr;
  cudaMalloc(&out, sizeof(int) * streams);
  for (int i = 0; i < streams; ++i) {
    cudaStreamCreateWithPriority(&probe[i], cudaStreamNonBlocking, priority);
    cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming);
    Touch<<<1, 1, 0, probe[i]>>>(out + i);
    cudaEventRecord(done[i], probe[i]);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  bool pending = true;
  while (pending && std::chrono::steady_clock::now() < until) {
    pending = false;
    for (int i = 0; i < streams; ++i) pending |= cudaEventQuery(done[i]) == cudaErrorNotReady;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int i = 0; i < streams; ++i) finished += cudaEventQuery(done[i]) == cudaSuccess;
  return finished;
}

int main() {
  int least = 0, greatest = 0;
  unsigned* flag = nullptr;
  if (cudaSetDevice(0) != cudaSuccess || cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess ||
      cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(unsigned), cudaHostAllocMapped) != cudaSuccess) {
    std::printf("no usable CUDA device: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  *flag = 0;
  CUdeviceptr device_flag = 0;
  cudaStream_t held;
  cudaStreamCreateWithPriority(&held, cudaStreamNonBlocking, least);
  if (cuMemHostGetDevicePointer(&device_flag, flag, 0) != CUDA_SUCCESS ||
      cuStreamWaitValue32(held, device_flag, 1, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
    std::printf("could not hold a stream with cuStreamWaitValue32\n");
    return 1;
  }
  cudaEvent_t released;
  cudaEventCreateWithFlags(&released, cudaEventDisableTiming);
  cudaEventRecord(released, held);
  const int kStreams = 8;
  const int default_done = FinishedWhileHeld(least, kStreams);
  const int greatest_done = FinishedWhileHeld(greatest, kStreams);
  *flag = 1;
  const cudaError_t end = cudaEventSynchronize(released);
  const char* queues = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::printf("CUDA_DEVICE_MAX_CONNECTIONS=%s: while one stream was held, %d of %d later streams of default "
              "priority and %d of %d of the greatest priority (%d) finished a kernel; the hold ended: %s\n",
              queues ? queues : "unset", default_done, kStreams, greatest_done, kStreams, greatest,
              cudaGetErrorString(end));
  return 0;
}
CU
cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
nvcc -O2 -arch=sm_90 -o "$work/probe" "$work/probe.cu" -L"$cuda_home/lib64/stubs" -lcuda
: >"$OUT/stream-queues.txt"
for queues in ${QUEUES:-1 8 32}; do
  CUDA_DEVICE_MAX_CONNECTIONS=$queues "$work/probe" | tee -a "$OUT/stream-queues.txt"
done
