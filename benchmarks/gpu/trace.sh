#!/usr/bin/env bash
# Block timelines of the chain and ring, uncompressed unless TRACE_COMPRESS says
# (UCCLZIP_LOG_LEVEL=debug: one line per block started, encoded, landed, processed and done on
# every rank), to see where a pipeline waits: broadcast from 4 ranks (also in place) and from 2
# (a send to one, the chain's yardstick), allgather and allreduce, over tcp, host and device
# memory, 256 MB per rank, one warm-up and two timed iterations. The logs go to
# $OUT/trace-*.log; benchmarks/trace_summary.py reads them and prints each link's idle time,
# blocks in flight and codec time per block.
# Then one-way device send/recv of 256 MB, uncompressed, staged (UCX 1.13) and, where
# scripts/gpu-run built against the CUDA-enabled UCX, GPU-direct (cuda_ipc), over tcp and shm:
# where a direct block's time goes against ucx_perftest's one message.
#   BUILD   build folder (default: build)     TRACE_MEMORY  memories of the collectives (default: host device)
#   TRACE_RUNS  the collectives, OP:RANKS[:in_place] (default: all five above)
#   TRACE_COMPRESS  compression modes of the collectives' traces, e.g. "off on" (default off; a
#           compressed trace also shows each frame's encode and each block's decode or reduction)
#   TRACE_SENDRECV=0  leaves out the send/recv traces
#   CU13_BUILD, CU13_UCX  as scripts/gpu-run sets them (the direct path's build and UCX)
set -uo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
for memory in ${TRACE_MEMORY:-host device}; do
  # OP:RANKS[:in_place]; the root's broadcast in place makes no local copy of its 256 MB.
  for run in ${TRACE_RUNS:-broadcast:4 broadcast:4:in_place broadcast:2 allgather:4 allreduce:4}; do
    IFS=: read -r op ranks placement <<<"$run"
    size=256M
    [[ $op == allgather ]] && size=1G
    for mode in ${TRACE_COMPRESS:-off}; do
      name=trace-$op-$ranks-$memory${placement:+-$placement}
      [[ $mode != off ]] && name+=-$mode
      UCCLZIP_LOG_LEVEL=debug timeout -k 10 200 "$bench" "$op" --ranks "$ranks" --memory "$memory" --tls tcp --compress "$mode" \
        -b "$size" -e "$size" -n 2 -w 1 -c 0 --dist gaussian:0.02 --in_place="$([[ -n $placement ]] && echo true || echo false)" \
        >"$OUT/$name.out" 2>"$OUT/$name.log" ||
        echo "$op $ranks ranks $memory $mode failed: $(tail -c 300 "$OUT/$name.log")"
      python3 "$(dirname "$0")/../trace_summary.py" "$OUT/$name.log" "$op" >"$OUT/$name.txt"
      echo "$op, $ranks ranks, $memory memory${placement:+, in place}, compression $mode: $(grep -v '^#' "$OUT/$name.out" | tail -1)"
      grep "^link" "$OUT/$name.txt"
    done
  done
done

# trace_sendrecv NAME TLS BENCH [ENV...]: one-way 256 MB device send/recv under BENCH.
trace_sendrecv() {
  local label=$1 tls=$2 bench_path=$3
  local name=trace-sendrecv-$label
  shift 3
  env "$@" UCCLZIP_LOG_LEVEL=debug timeout -k 10 120 "$bench_path" sendrecv --ranks 2 --memory device --tls "$tls" \
    --compress off --pattern oneway --min_bytes 256M --max_bytes 256M --iters 2 --warmup 1 --latency_iters 0 \
    >"$OUT/$name.out" 2>"$OUT/$name.log" || echo "sendrecv $label failed: $(tail -c 300 "$OUT/$name.log")"
  python3 "$(dirname "$0")/../trace_summary.py" "$OUT/$name.log" sendrecv >"$OUT/$name.txt"
  echo "sendrecv one way, $label: $(grep -v '^#' "$OUT/$name.out" | grep -v '^$' | tail -1)"
  grep "^link" "$OUT/$name.txt"
}
[[ ${TRACE_SENDRECV:-1} == 0 ]] && exit 0
trace_sendrecv staged-tcp tcp "$bench"
trace_sendrecv staged-shm posix,sysv "$bench"
if [[ -n ${CU13_BUILD:-} && -d ${CU13_UCX:-/nonexistent}/lib ]]; then
  cu13_env=(LD_LIBRARY_PATH="$CU13_UCX/lib:${LD_LIBRARY_PATH:-}" UCX_MODULE_DIR="$CU13_UCX/lib/ucx")
  trace_sendrecv direct-tcp tcp,cuda_copy,cuda_ipc "$CU13_BUILD/benchmarks/ucclzip-bench" "${cu13_env[@]}"
  trace_sendrecv direct-shm posix,sysv,cuda_copy,cuda_ipc "$CU13_BUILD/benchmarks/ucclzip-bench" "${cu13_env[@]}"
fi
