#!/usr/bin/env bash
# The algorithms for small messages against the ring and the chain on the GPU machine (issue 8,
# docs/COLLECTIVES.md): allreduce by recursive doubling (--recursive_doubling 1G: every size)
# against the ring (0), broadcast down the binomial tree (--tree_broadcast 1G) against the chain
# (0), device memory (or MEMORY), bf16 Gaussian sigma 0.02, uncompressed, from 8 B to MAX_BYTES,
# the two taking turns (the order reversed every other round). Rows go to $OUT/small-collectives.jsonl, tagged
# with the round; the summary gives, per case, the median over the rounds of ring / recursive
# doubling (chain / tree) time.
#   BUILD  build folder (default: build)      RANKS  world sizes (default "2 3 4")
#   TLS    UCX transports (default "tcp posix,sysv")   ROUNDS (default 2)   ITERS (default 30)
#   MEMORY memories, device and/or host (default device)   MAX_BYTES the largest size (default 4M)
set -uo pipefail
source "$(dirname "$0")/json-rows.bash"
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
rows="$OUT/small-collectives.jsonl"
: >"$rows"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for memory in ${MEMORY:-device}; do
    for tls in ${TLS:-tcp posix,sysv}; do
      for ranks in ${RANKS:-2 3 4}; do
        for op in allreduce broadcast; do
          if [[ $op == allreduce ]]; then flag=--recursive_doubling small=1G; else flag=--tree_broadcast small=1G; fi
          settings=(0 "$small")
          ((round % 2 == 0)) && settings=("$small" 0)
          for setting in "${settings[@]}"; do
            timeout 300 "$bench" "$op" -b 8 -e "${MAX_BYTES:-4M}" -f 8 --ranks "$ranks" --memory "$memory" --tls "$tls" --compress off \
              -d bf16 -n "${ITERS:-30}" -w 5 -c 1 "$flag" "$setting" --json 2>"$OUT/small-$op-$ranks-$memory-$tls-$setting.err" |
              tag_rows "\"round\":$round" >>"$rows" ||
              echo "$op $ranks ranks $memory $tls $flag $setting: failed ($(tail -1 "$OUT/small-$op-$ranks-$memory-$tls-$setting.err"))"
          done
        done
      done
    done
  done
done
python3 - "$rows" <<'EOF'
import collections, json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"{len(rows)} rows, {sum(r['wrong'] for r in rows)} wrong elements")
times = collections.defaultdict(list)
for r in rows:
    small = r["recursive_doubling"] > 0 if r["bench"] == "allreduce" else r["tree_broadcast"] > 0
    times[(r["bench"], r["memory"], r["tls"], r["ranks"], r["size"], small)].append(r["time_us"])
print("op         memory tls         ranks     bytes   large us   small us  large/small")
for key in sorted({k[:5] for k in times}):
    large, small = times[key + (False,)], times[key + (True,)]
    if large and small:
        print(f"{key[0]:10} {key[1]:6} {key[2]:11} {key[3]:5} {key[4]:9} {statistics.median(large):10.1f} "
              f"{statistics.median(small):10.1f} {statistics.median(large) / statistics.median(small):10.2f}")
EOF
