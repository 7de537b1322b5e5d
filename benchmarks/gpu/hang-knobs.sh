#!/usr/bin/env bash
# Which setting keeps the 8-rank device ring allreduce sweep from hanging at 256 KiB (H100
# s27-4, s27-7: every rank "made no progress for 1m" after the 8 B to 32 KiB rows). In s28-1
# only UCCLZIP_HOLD_STREAM=0 and CUDA_DEVICE_MAX_CONNECTIONS=32 passed: the hold of the bench's
# legacy default stream was the trigger, and device calls on that stream no longer hold it
# (src/pipeline/stream_order.h). The script stays for a stall of that kind coming back. Each variant
# runs the bench's sweep once with a short operation timeout; a variant still running after
# STALL_S seconds has every rank's stacks written to $OUT/stacks-<n>.txt (the bench has no
# watchdog of its own) and then fails by its timeout. A variant that passes only with a setting
# points at what that setting removes:
#   UCCLZIP_HOLD_STREAM=0            the caller's (legacy) stream held by cuStreamWaitValue32
#   CUDA_DEVICE_MAX_CONNECTIONS=32   too few hardware queues for the holds and waits queued
#   UCCLZIP_STAGING_WAKEUPS=0        the staging copies' host functions (cudaLaunchHostFunc)
#   UCCLZIP_FORWARD_FROM_HOST=0      forwards from pinned host frames (the allgather half)
#   UCCLZIP_TRANSPORT_LANES=1        the second progress thread and staging pool
# and two runs without a setting tell the calls that came before from the size: 256 KiB alone
# for as many calls as the sweep makes before it hangs, and the sweep with few calls per size.
#   BUILD  build folder (default: build)   TLS (default tcp)   STALL_S (default 20)
#   RUN_LIMIT_S  a run still going after this many seconds is killed (default 65: the operation
#          timeout's 35 s, after the rows before the hang, and the 10 s shutdown)
#   MEMORY  device (default) or host: host runs the script on a machine without a GPU
#   VARIANTS  "NAME=VALUE[,NAME=VALUE] ..." to run, "-" meaning none (default: the list above)
#   EXTRA_RUNS  the runs without a setting after them, bench arguments separated by ';' (default:
#          the two above). E.g. "-b 32K -e 256K -f 2 -n 30 -w 5": 256 KiB is the first size whose
#          staged copies are 32 KiB (4 KiB before), and small copies may take another path
#          through the GPU than large ones; the first size that hangs tells.
set -uo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
sweep=(allreduce -f 8 --ranks 8 --memory "${MEMORY:-device}" --tls "${TLS:-tcp}" --compress off -d bf16 -c 1 --recursive_doubling 0)
variants=(${VARIANTS:-- UCCLZIP_HOLD_STREAM=0 CUDA_DEVICE_MAX_CONNECTIONS=32 UCCLZIP_STAGING_WAKEUPS=0
  UCCLZIP_FORWARD_FROM_HOST=0 UCCLZIP_TRANSPORT_LANES=1})
runs=()
for v in "${variants[@]}"; do runs+=("$v|-b 8 -e 256K -n 30 -w 5"); done
IFS=';' read -ra extra <<<"${EXTRA_RUNS:--b 256K -e 256K -n 300 -w 5;-b 8 -e 256K -n 1 -w 0 --warmup_ms 0}"
for e in "${extra[@]}"; do runs+=("-|$e"); done
n=0
for run in "${runs[@]}"; do
  n=$((n + 1))
  settings=${run%%|*} args=${run#*|}
  env_list=()
  [[ $settings != - ]] && IFS=, read -ra env_list <<<"$settings"
  log="$OUT/hang-$n.log"
  env "${env_list[@]}" UCCLZIP_OP_TIMEOUT=35s "$bench" "${sweep[@]}" $args >"$log" 2>&1 &
  launcher=$!
  started=$SECONDS
  while ((SECONDS - started < ${STALL_S:-20})) && kill -0 "$launcher" 2>/dev/null; do sleep 1; done
  if kill -0 "$launcher" 2>/dev/null; then
    # The ranks are the launcher's children (re-executed from /proc/self/exe, so named "exe";
    # pgrep -f would match this shell). eu-stack waits for every thread to stop, which one stuck
    # in the driver may never do: at most 15 s a process.
    for pid in "$launcher" $(pgrep -P "$launcher"); do
      echo "=== pid $pid (parent $(ps -o ppid= -p "$pid"))"
      timeout -k 2 15 eu-stack -m -p "$pid" -n 30 2>&1
    done >"$OUT/stacks-$n.txt"
  fi
  # The operation timeout ends a stalled run only if its threads get to check it (a rank blocked
  # inside a CUDA call may not): past RUN_LIMIT_S the launcher is killed, and with it its ranks
  # (PR_SET_PDEATHSIG), so that one stuck run does not take the rest of the call.
  while ((SECONDS - started < ${RUN_LIMIT_S:-65})) && kill -0 "$launcher" 2>/dev/null; do sleep 1; done
  killed=""
  if kill -0 "$launcher" 2>/dev/null; then
    kill -KILL "$launcher" 2>/dev/null
    killed=" (killed after ${RUN_LIMIT_S:-65} s)"
  fi
  wait "$launcher"
  rc=$?
  echo "$n: ${settings} ${args}: rc $rc$killed, last row: $(grep -E '^ +[0-9]+ ' "$log" | tail -1 | awk '{print $1, $7}')$(
    ((rc != 0)) && echo "; $(grep -m1 -E 'DEADLINE|rror' "$log" | cut -c1-300)")"
done
