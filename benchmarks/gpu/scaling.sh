#!/usr/bin/env bash
# Where a ring's uncompressed bandwidth goes on one host: the same 256 MB moved one way between
# two ranks, both ways at once (every rank sends and receives, as in a ring), and by 2- and
# 4-rank broadcast, allgather and allreduce, over tcp and shared memory, from host memory (no
# GPU in the path) and from device memory (staged). A per-thread CPU snapshot (top -H) taken in
# the middle of the 4-rank broadcast shows which threads are busy.
#   BUILD   build folder (default: build)     ITERS  timed iterations (default 5)
#   SCALING_MEMORY   memories to run (default: "host device")
set -uo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
iters=${ITERS:-5}
declare -A transports=([tcp]=tcp [shm]=posix,sysv)
summary="$OUT/scaling-summary.jsonl"
: >"$summary"
source "$(dirname "$0")/perftest.bash"

# record NAME MEMORY: tags the JSON lines of the command that follows and appends them.
record() {
  local name=$1 memory=$2
  shift 2
  timeout -k 10 200 "$@" --json 2>"$OUT/scaling-last.err" |
    sed "s/^{/{\"tls_name\":\"$name\",\"memory_name\":\"$memory\",/" | grep '^{' >>"$summary" ||
    echo "failed: $* ($(tail -c 300 "$OUT/scaling-last.err"))"
}

for name in tcp shm; do
  tls=${transports[$name]}
  perftest "$name" "$tls" tag_bw 268435456 40 |
    awk -v n="$name" '{printf "{\"tls_name\":\"%s\",\"memory_name\":\"host\",\"bench\":\"ucx_perftest\",\"ranks\":2,\"pattern\":\"oneway\",\"busbw_GBps\":%.4f}\n", n, $7 * 1048576 / 1e9}' \
      >>"$summary"
  for memory in ${SCALING_MEMORY:-host device}; do
    for pattern in oneway shift; do
      record "$name" "$memory" "$bench" sendrecv --ranks 2 --memory "$memory" --tls "$tls" --compress off \
        --pattern "$pattern" --min_bytes 256M --max_bytes 256M --iters "$iters" --warmup 2 --latency_iters 0
    done
    for ranks in 2 4; do
      if [[ $ranks == 4 && $memory == host ]]; then
        (sleep 2; top -H -b -n 2 -d 1 -w 160 | awk '/^top -/{n++} n==2' | grep -E 'PID|ucclzip|ucx' | head -30 >"$OUT/top-broadcast-$name.txt") &
      fi
      record "$name" "$memory" "$bench" broadcast --ranks "$ranks" --memory "$memory" --tls "$tls" --compress off \
        -b 256M -e 256M -n "$iters" -w 2 -c 0 --dist gaussian:0.02
      wait
    done
    record "$name" "$memory" "$bench" allgather --ranks 4 --memory "$memory" --tls "$tls" --compress off \
      -b 1G -e 1G -n "$iters" -w 2 -c 0 --dist gaussian:0.02
    record "$name" "$memory" "$bench" allreduce --ranks 4 --memory "$memory" --tls "$tls" --compress off \
      -b 256M -e 256M -n "$iters" -w 2 -c 0 --dist gaussian:0.02
  done
done

python3 - "$summary" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(f"{'bench':13} {'ranks':>5} {'pattern':7} {'tls':4} {'memory':6} {'busbw GB/s':>10}")
for r in rows:
    print(f"{r['bench']:13} {r.get('ranks', 2):5} {r.get('pattern', '-'):7} {r['tls_name']:4} {r['memory_name']:6} "
          f"{r['busbw_GBps']:10.3f}")
PY
for f in "$OUT"/top-broadcast-*.txt; do [[ -f $f ]] && { echo "== $f"; head -25 "$f"; }; done
