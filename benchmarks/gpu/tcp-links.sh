#!/usr/bin/env bash
# Where four ranks' uncompressed links lose to ucx_perftest (issue 8: the uncompressed allreduce
# over tcp at 71-78 % of perftest on an H100 in s29-3, while it moved more than the same four
# ranks' plain sends to their neighbours): the ring's links alone (`sendrecv --pattern shift`,
# every rank sending to rank+1 and receiving from rank-1, nothing forwarded or reduced) on host
# memory and on staged device memory, with each transport block size, beside perftest's pairs,
# and the allreduce on device memory with each transport block size. Host memory takes no GPU
# copy: if its links keep up with perftest's pairs and the device's do not, the staging through
# the one GPU that the ranks time-slice is what is missing; if neither does, it is our transport.
# The cases take turns within each round. Rows go to $OUT/tcp-links.jsonl; a table is printed.
#   BUILD     build folder (default: build)        RANKS  ranks and perftest pairs (default 4)
#   SIZE_MB   MB per rank (default 256)            ROUNDS (default 2)
#   TLS       UCX_TLS (default tcp)                MEMORIES  (default "host device")
#   TBLOCKS   transport block sizes (`--block_bytes`, UCCLZIP_BLOCK_BYTES; default "4M 16M")
set -uo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
source "$(dirname "$0")/perftest.bash"
ranks=${RANKS:-4}
mb=${SIZE_MB:-256}
tls=${TLS:-tcp}
rows="$OUT/tcp-links.jsonl"
: >"$rows"
# tag JSON: the bench's JSON lines on stdin, JSON's fields put in front of each.
tag() { sed "s/^{/{$1,/" | grep '^{' >>"$rows"; }
for ((round = 1; round <= ${ROUNDS:-2}; round++)); do
  perftest_pairs "r$round" "$tls" tag_bw $((mb << 20)) "${PERFTEST_ITERS:-20}" "$ranks" |
    awk -v r="$round" '{printf "{\"round\":%d,\"bench\":\"ucx_perftest\",\"busbw_GBps\":%.4f}\n", r, $7 * 1048576 / 1e9}' >>"$rows"
  for memory in ${MEMORIES:-host device}; do
    for tblock in ${TBLOCKS:-4M 16M}; do
      timeout -k 10 120 "$bench" sendrecv --ranks "$ranks" --tls "$tls" --memory "$memory" --compress off --pattern shift \
        --block_bytes "$tblock" --min_bytes "${mb}M" --max_bytes "${mb}M" --iters 5 --warmup 2 --latency_iters 0 --json \
        2>"$OUT/shift-$memory-$tblock-r$round.err" | tag "\"round\":$round,\"tblock\":\"$tblock\"" ||
        echo "shift $memory $tblock: failed: $(tail -c 300 "$OUT/shift-$memory-$tblock-r$round.err")"
    done
  done
  if [[ " ${MEMORIES:-host device} " == *" device "* ]]; then
    for tblock in ${TBLOCKS:-4M 16M}; do
      UCCLZIP_BLOCK_BYTES=$tblock timeout -k 10 120 "$bench" allreduce --ranks "$ranks" --tls "$tls" --memory device \
        --compress off -d bf16 -b "${mb}M" -e "${mb}M" -n 5 -w 2 -c 0 --json 2>"$OUT/allreduce-$tblock-r$round.err" |
        tag "\"round\":$round,\"tblock\":\"$tblock\"" ||
        echo "allreduce $tblock: failed: $(tail -c 300 "$OUT/allreduce-$tblock-r$round.err")"
    done
  fi
done
python3 - "$rows" <<'PY'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
perf = [r["busbw_GBps"] for r in rows if r["bench"] == "ucx_perftest"]
cases = collections.defaultdict(list)
for r in rows:
    if r["bench"] != "ucx_perftest" and "busbw_GBps" in r:
        cases[(r["bench"], r["memory"], r["tblock"])].append(r["busbw_GBps"])
ref = statistics.median(perf) if perf else None
print(f"ucx_perftest, {len(perf)} pairs' figures over the rounds: median {ref or 0:.3f} GB/s per pair")
print(f"{'case':10} {'memory':6} {'tblock':6} {'GB/s (busbw, per link)':>24} {'of perftest':>11}  rounds")
for (bench, memory, tblock), values in sorted(cases.items()):
    median = statistics.median(values)
    share = f"{100 * median / ref:.0f} %" if ref else "-"
    print(f"{bench:10} {memory:6} {tblock:6} {median:24.3f} {share:>11}  {', '.join(f'{v:.3f}' for v in values)}")
PY
