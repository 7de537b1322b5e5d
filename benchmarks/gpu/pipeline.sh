#!/usr/bin/env bash
# Pipeline targets on the GPU machine (issue 4), two processes on the one GPU, device memory
# (staged through pinned memory unless UCX takes CUDA memory), over UCX tcp and shared memory:
#   256 MB bf16 Gaussian, one send, compressed vs uncompressed   (target >= 1.40x)
#   256 MB random bytes as bf16 with auto vs uncompressed        (target >= 0.97x)
#   weightsync, Llama-3-8B-shaped, compressed vs uncompressed    (target >= 1.35x)
# Logs go to $OUT; a table of the ratios is printed.
#   BUILD            build folder (default: build)
#   PIPELINE_BLOCKS  pipeline block sizes to try for every case (default: "16M", the default)
#   PIPELINE_SWEEP_BLOCKS  further block sizes for the 256 MB Gaussian case only
#   ITERS            timed iterations (default 10)
#   CASE_TIMEOUT     seconds before a case counts as hung (default 150; weightsync gets 3 times that)
set -uo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
iters=${ITERS:-10}
declare -A transports=([tcp]=tcp [shm]=posix,sysv)
summary="$OUT/pipeline-summary.jsonl"
: >"$summary"
limit=${CASE_TIMEOUT:-150}

# run_case CASE BLOCK LOG -- ucclzip-bench arguments: appends the JSON line, tagged with the case
# and the pipeline block ("pblock": sendrecv's rows have a "block" of their own, the transport's,
# which a tag of that name lost to, so that every pipeline block fell in one row of the table),
# to the summary. A case still running after $limit seconds has its ranks' stacks written to its
# log (when gdb is there) and is killed; the others still run.
run_case() {
  local case=$1 block=$2 log=$3
  shift 4
  "$bench" "$@" --pipeline_block "$block" --json >"$log.json" 2>"$log" &
  local pid=$! waited=0 case_limit=${CASE_LIMIT:-$limit}
  while kill -0 "$pid" 2>/dev/null && ((waited < case_limit)); do sleep 1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$case $block: still running after ${case_limit}s; killed (stacks in $(basename "$log"))"
    if command -v gdb >/dev/null; then
      for rank in $(pgrep -P "$pid"); do
        gdb -p "$rank" -batch -nx -ex 'thread apply all bt 30' >>"$log" 2>&1
      done
    fi
    kill -9 "$pid"
  fi
  wait "$pid" || echo "$case $block: failed: $(tail -c 400 "$log")"
  sed "s/^{/{\"case\":\"$case\",\"pblock\":\"$block\",/" "$log.json" >>"$summary"
}

# Compressed and uncompressed messages take turns within one run (sendrecv --compress off,on),
# so that the ratio between them does not ride on the machine's drift between runs.
for block in ${PIPELINE_BLOCKS:-16M}; do
  for name in tcp shm; do
    tls=${transports[$name]}
    run_case gaussian "$block" "$OUT/gaussian-$name-$block.err" -- sendrecv --ranks 2 --memory device --pattern oneway \
      --tls "$tls" --compress off,on --dist gaussian:0.02 --min_bytes 256M --max_bytes 256M --iters "$iters" --warmup 3
    run_case random "$block" "$OUT/random-$name-$block.err" -- sendrecv --ranks 2 --memory device --pattern oneway \
      --tls "$tls" --compress off,auto --dist random-bytes --min_bytes 256M --max_bytes 256M --iters "$iters" --warmup 3
    # 16 GB a sync, 10 syncs: allow minutes.
    CASE_LIMIT=$((limit * 3)) run_case weightsync "$block" "$OUT/weightsync-$name-$block.err" -- weightsync --ranks 2 \
      --memory device --tls "$tls" --compress on --iters 3 --warmup 1
  done
done

# Block-size sweep on the main case only (256 MB bf16), to choose the default.
for block in ${PIPELINE_SWEEP_BLOCKS:-}; do
  for name in tcp shm; do
    run_case gaussian "$block" "$OUT/sweep-$name-$block.err" -- sendrecv --ranks 2 --memory device --pattern oneway \
      --tls "${transports[$name]}" --compress off,on --dist gaussian:0.02 --min_bytes 256M --max_bytes 256M \
      --iters "$iters" --warmup 3
  done
done

python3 - "$summary" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(f"{'case':11} {'tls':11} {'block':6} {'uncompressed':>14} {'compressed':>14} {'ratio':>7} {'speedup':>8} {'target':>7} "
      f"{'enc(us)':>8} {'dec(us)':>8} {'#wrong':>6}")
pairs = {}
for r in rows:
    # Not the 8-byte latency's row (bench sendrecv_latency), which sendrecv adds after the sizes.
    if r["case"] in ("gaussian", "random") and r["bench"] == "sendrecv":
        pairs.setdefault((r["case"], r["tls"], r["pblock"]), {})[r["compress"]] = r
for (case, tls, block), m in pairs.items():
    off, on = m.get("off"), m.get("on") or m.get("auto")
    if not off or not on: continue
    target = 1.40 if case == "gaussian" else 0.97
    print(f"{case:11} {tls:11} {block:6} {off['algbw_GBps']:11.2f}GB/s {on['algbw_GBps']:11.2f}GB/s {on['ratio']:7.3f} "
          f"{on['vs_first']:7.2f}x {target:6.2f}x {on['encode_us']:8.0f} {on['decode_us']:8.0f} {off['wrong'] + on['wrong']:6}")
syncs = {}
for r in rows:
    if r["case"] == "weightsync":
        syncs.setdefault((r["tls"], r["pblock"]), {})[r["compress"]] = r
for (tls, block), m in syncs.items():
    off, on = m.get("off"), m.get("on")
    if not off or not on: continue
    print(f"{'weightsync':11} {tls:11} {block:6} {off['time_s']:13.3f}s {on['time_s']:13.3f}s {on['ratio']:7.3f} "
          f"{off['time_s'] / on['time_s']:7.2f}x {1.35:6.2f}x {'':8} {'':8} {off['wrong'] + on['wrong']:6}")
PY
