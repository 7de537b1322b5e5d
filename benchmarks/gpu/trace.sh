#!/usr/bin/env bash
# Block timelines of the uncompressed chain and ring (UCCLZIP_LOG_LEVEL=debug: one line per
# block started, landed and done on every rank), to see where a pipeline waits: broadcast from
# 4 ranks (also in place) and from 2 (a send to one, the chain's yardstick), allgather and allreduce, over tcp,
# host and device memory, 256 MB per rank, one warm-up and two timed iterations. The logs go to
# $OUT/trace-*.log; benchmarks/trace_summary.py reads them and prints each link's idle time and
# blocks in flight.
#   BUILD   build folder (default: build)
set -uo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
for memory in host device; do
  # OP:RANKS[:in_place]; the root's broadcast in place makes no local copy of its 256 MB.
  for run in broadcast:4 broadcast:4:in_place broadcast:2 allgather:4 allreduce:4; do
    IFS=: read -r op ranks placement <<<"$run"
    size=256M
    [[ $op == allgather ]] && size=1G
    name=trace-$op-$ranks-$memory${placement:+-$placement}
    UCCLZIP_LOG_LEVEL=debug timeout -k 10 200 "$bench" "$op" --ranks "$ranks" --memory "$memory" --tls tcp --compress off \
      -b "$size" -e "$size" -n 2 -w 1 -c 0 --dist gaussian:0.02 --in_place="$([[ -n $placement ]] && echo true || echo false)" \
      >"$OUT/$name.out" 2>"$OUT/$name.log" ||
      echo "$op $ranks ranks $memory failed: $(tail -c 300 "$OUT/$name.log")"
    python3 "$(dirname "$0")/../trace_summary.py" "$OUT/$name.log" "$op" >"$OUT/$name.txt"
    echo "$op, $ranks ranks, $memory memory${placement:+, in place}: $(grep -v '^#' "$OUT/$name.out" | tail -1)"
    grep "^link" "$OUT/$name.txt"
  done
done
