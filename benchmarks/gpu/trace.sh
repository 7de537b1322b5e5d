#!/usr/bin/env bash
# Block timelines of the uncompressed chain and ring (UCCLZIP_LOG_LEVEL=debug: one line per
# block started, landed and done on every rank), to see where a pipeline waits: 4-rank
# broadcast and allgather over tcp, host and device memory, 256 MB, one warm-up and two timed
# iterations. The logs go to $OUT/trace-*.log; benchmarks/trace_summary.py reads them.
#   BUILD   build folder (default: build)
set -uo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
for memory in host device; do
  for op in broadcast allgather; do
    size=256M
    [[ $op == allgather ]] && size=1G
    UCCLZIP_LOG_LEVEL=debug timeout -k 10 200 "$bench" "$op" --ranks 4 --memory "$memory" --tls tcp --compress off \
      -b "$size" -e "$size" -n 2 -w 1 -c 0 --dist gaussian:0.02 >"$OUT/trace-$op-$memory.out" 2>"$OUT/trace-$op-$memory.log" ||
      echo "$op $memory failed: $(tail -c 300 "$OUT/trace-$op-$memory.log")"
    python3 "$(dirname "$0")/../trace_summary.py" "$OUT/trace-$op-$memory.log" "$op" >"$OUT/trace-$op-$memory.txt"
    grep "^link" "$OUT/trace-$op-$memory.txt"
  done
done
