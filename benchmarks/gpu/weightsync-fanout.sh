#!/usr/bin/env bash
# RL weight sync to N receivers (issue 8's broadcast target, in the shape users run it): a
# Llama-shaped model of WS_LAYERS layers pushed from rank 0, device memory, by one Broadcast per
# tensor (--fanout broadcast) and by a Send per receiver (--fanout sends), to 1 and to 3
# receivers, over tcp and shared memory, off / on / auto taking turns within each run. Rows go to
# $OUT/weightsync-fanout.jsonl; the summary gives each case's median over the rounds and how
# much longer 3 receivers take than 1 (target: broadcast at most 1.25x).
#   BUILD  build folder (default: build)     ROUNDS (default 2)     WS_ITERS (default 3)
#   WS_LAYERS (default 2: about 2.2 GB of bf16)    WS_MEMORY (default device)
set -uo pipefail
source "$(dirname "$0")/json-rows.bash"
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
rows="$OUT/weightsync-fanout.jsonl"
: >"$rows"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for tls in tcp posix,sysv; do
    for fanout in broadcast sends; do
      for ranks in 2 4; do
        err="$OUT/weightsync-$fanout-$ranks-$tls.err"
        timeout -k 10 300 "$bench" weightsync --ranks "$ranks" --memory "${WS_MEMORY:-device}" --tls "$tls" --fanout "$fanout" \
          --compress off,on,auto --layers "${WS_LAYERS:-2}" --iters "${WS_ITERS:-3}" --warmup 1 --json 2>"$err" |
          tag_rows "\"round\":$round" >>"$rows" ||
          echo "weightsync $fanout $ranks ranks $tls: failed ($(tail -1 "$err"))"
      done
    done
  done
done
python3 - "$rows" <<'EOF'
import collections, json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"{len(rows)} rows, {sum(r['wrong'] for r in rows)} wrong elements")
times, ratios = collections.defaultdict(list), collections.defaultdict(list)
for r in rows:
    key = (r["tls"], r["fanout"], r["compress"], r["receivers"])
    times[key].append(r["time_s"])
    ratios[key].append(r["ratio"])
print("tls         fanout    compress  1 receiver s  3 receivers s  3 / 1   ratio")
for tls, fanout, compress in sorted({k[:3] for k in times}):
    one, three = times.get((tls, fanout, compress, 1)), times.get((tls, fanout, compress, 3))
    if one and three:
        m1, m3 = statistics.median(one), statistics.median(three)
        ratio = statistics.median(ratios[(tls, fanout, compress, 3)])
        print(f"{tls:11} {fanout:9} {compress:8} {m1:13.3f} {m3:14.3f} {m3 / m1:6.2f} {ratio:7.3f}")
EOF
