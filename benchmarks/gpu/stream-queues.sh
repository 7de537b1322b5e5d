#!/usr/bin/env bash
# Which streams a held stream stops (docs/PIPELINE.md, "Known limits"): CUDA puts each stream of
# a context in one of CUDA_DEVICE_MAX_CONNECTIONS hardware queues, and a queue runs its work in
# order, so a cuStreamWaitValue32 that holds one stream also stops later work of the streams
# that share its queue. This probe holds HELD streams of the primary context (64 fill every
# queue), then queues a small kernel that writes primary-context memory on each of 8 later
# streams of four kinds: default priority, the greatest priority, a green context's stream
# (cuGreenCtxStreamCreate, every SM) and a green context's stream of the greatest priority. It
# counts those that finish within 2 s while the hold lasts, lets the hold go, and checks what
# every kernel wrote. It answers whether the pipeline can keep its own work clear of a held
# caller stream. Needs nvcc and the CUDA driver only (not ucclzip); writes $OUT/stream-queues.txt.
#   QUEUES  values of CUDA_DEVICE_MAX_CONNECTIONS to try (default: "1 8 32")
#   HELD    numbers of held streams to try (default: "1 64"); where the host blocks, the probe
#           is stopped after 15 s and the last step it began is printed
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
#include <vector>

__global__ void Touch(int* out, int value) { *out = value; }

constexpr int kStreams = 8;
constexpr int kKinds = 4;
const char* const kKindNames[kKinds] = {"default priority", "greatest priority", "green context",
                                        "green context, greatest priority"};

#define CHECK(call)                                                             \
  do {                                                                          \
    if (CUresult r = (call); r != CUDA_SUCCESS) {                               \
      const char* text = nullptr;                                               \
      cuGetErrorString(r, &text);                                               \
      std::printf("%s failed: %s\n", #call, text ? text : "unknown error");    \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

int main(int argc, char** argv) {
  const int held_count = argc > 1 ? std::atoi(argv[1]) : 1;
  int least = 0, greatest = 0;
  unsigned* flag = nullptr;
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess ||
      cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess ||
      cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(unsigned), cudaHostAllocMapped) != cudaSuccess) {
    std::printf("no usable CUDA device: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  *flag = 0;
  CUdeviceptr device_flag = 0;
  CHECK(cuMemHostGetDevicePointer(&device_flag, flag, 0));

  CUdevice device;
  CHECK(cuDeviceGet(&device, 0));
  CUdevResource sms;
  CHECK(cuDeviceGetDevResource(device, &sms, CU_DEV_RESOURCE_TYPE_SM));
  CUdevResourceDesc desc;
  CHECK(cuDevResourceGenerateDesc(&desc, &sms, 1));
  CUgreenCtx green;
  CHECK(cuGreenCtxCreate(&green, desc, device, CU_GREEN_CTX_DEFAULT_STREAM));

  cudaFunction_t touch_runtime;
  if (cudaGetFuncBySymbol(&touch_runtime, reinterpret_cast<const void*>(Touch)) != cudaSuccess) return 1;
  const CUfunction touch = reinterpret_cast<CUfunction>(touch_runtime);
  int* out = nullptr;
  cudaMalloc(&out, sizeof(int) * kKinds * kStreams);
  CUstream probe[kKinds][kStreams];
  CUevent done[kKinds][kStreams];
  // Everything that may synchronize (allocation, module loading, a first launch on each stream)
  // happens before the hold, so that only the hardware queues decide what runs during it.
  for (int kind = 0; kind < kKinds; ++kind) {
    const int priority = kind % 2 == 0 ? least : greatest;
    for (int i = 0; i < kStreams; ++i) {
      if (kind < 2) {
        CHECK(cuStreamCreateWithPriority(&probe[kind][i], CU_STREAM_NON_BLOCKING, priority));
      } else {
        CHECK(cuGreenCtxStreamCreate(&probe[kind][i], green, CU_STREAM_NON_BLOCKING, priority));
      }
      CHECK(cuEventCreate(&done[kind][i], CU_EVENT_DISABLE_TIMING));
      int* target = out + kind * kStreams + i;
      int zero = 0;
      void* args[] = {&target, &zero};
      CHECK(cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, probe[kind][i], args, nullptr));
    }
  }
  CHECK(cuCtxSynchronize());
  std::printf("set up; holding %d stream(s)\n", held_count);
  std::fflush(stdout);
  std::vector<CUstream> held(held_count);
  CUevent released;
  CHECK(cuEventCreate(&released, CU_EVENT_DISABLE_TIMING));
  for (int k = 0; k < held_count; ++k) {
    // Where a call blocks the host (more held streams than it can take), the last line says which.
    std::fprintf(stderr, "creating held stream %d\n", k + 1);
    CHECK(cuStreamCreateWithPriority(&held[k], CU_STREAM_NON_BLOCKING, least));
    std::fprintf(stderr, "queuing the wait on held stream %d\n", k + 1);
    CHECK(cuStreamWaitValue32(held[k], device_flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
  }
  CHECK(cuEventRecord(released, held.back()));
  std::fprintf(stderr, "launching on the later streams\n");
  for (int kind = 0; kind < kKinds; ++kind) {
    for (int i = 0; i < kStreams; ++i) {
      int* target = out + kind * kStreams + i;
      int value = 1000 + kind * kStreams + i;
      void* args[] = {&target, &value};
      CHECK(cuLaunchKernel(touch, 1, 1, 1, 1, 1, 1, 0, probe[kind][i], args, nullptr));
      CHECK(cuEventRecord(done[kind][i], probe[kind][i]));
    }
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  bool pending = true;
  while (pending && std::chrono::steady_clock::now() < until) {
    pending = false;
    for (auto& kind_done : done)
      for (CUevent event : kind_done) pending |= cuEventQuery(event) == CUDA_ERROR_NOT_READY;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int finished[kKinds] = {};
  for (int kind = 0; kind < kKinds; ++kind)
    for (CUevent event : done[kind]) finished[kind] += cuEventQuery(event) == CUDA_SUCCESS;
  std::printf("counted; letting go\n");
  std::fflush(stdout);
  *flag = 1;
  const CUresult end = cuEventSynchronize(released);
  CHECK(cuCtxSynchronize());
  int written[kKinds * kStreams];
  cudaMemcpy(written, out, sizeof(written), cudaMemcpyDeviceToHost);
  int right = 0;
  for (int i = 0; i < kKinds * kStreams; ++i) right += written[i] == 1000 + i;
  const char* queues = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::printf("CUDA_DEVICE_MAX_CONNECTIONS=%s, %d held stream(s):", queues ? queues : "unset", held_count);
  for (int kind = 0; kind < kKinds; ++kind)
    std::printf(" %s %d/%d;", kKindNames[kind], finished[kind], kStreams);
  const char* end_text = nullptr;
  cuGetErrorString(end, &end_text);
  std::printf(" after the hold: %s, %d of %d kernels wrote their value\n", end_text, right, kKinds * kStreams);
  return 0;
}
CU
cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")
nvcc -O2 -arch=sm_90 -o "$work/probe" "$work/probe.cu" -L"$cuda_home/lib64/stubs" -lcuda
: >"$OUT/stream-queues.txt"
for queues in ${QUEUES:-1 8 32}; do
  for held in ${HELD:-1 64}; do
    { CUDA_DEVICE_MAX_CONNECTIONS=$queues timeout 15 "$work/probe" "$held" 2>"$work/progress" ||
      echo "probe with $queues queues, $held held: exit $?, last step: $(tail -1 "$work/progress")"; } |
      tee -a "$OUT/stream-queues.txt"
  done
done
