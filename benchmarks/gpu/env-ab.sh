#!/usr/bin/env bash
# One collective benchmark under two environments (or two sets of its flags), taking turns (the
# order reversed every other round), to settle whether a setting of the library's environment
# (docs/CONFIGURATION.md) or a flag moves a time beyond the machine's drift: e.g.
# AB_B="UCCLZIP_HOLD_STREAM=0" against the default. Rows go to $OUT/env-ab.jsonl, tagged with the
# side ("A" or "B") and the round; the summary gives, per case and size, the median over the
# rounds of A's and B's time and A / B.
#   BUILD  build folder (default: build)
#   AB_A, AB_B  the two sides: space-separated NAME=VALUE settings (default: none, i.e. as is)
#   AB_A_ARGS, AB_B_ARGS  more benchmark arguments for one side, e.g. AB_B_ARGS="--warmup_ms 0"
#   AB_B_TREE  side B runs the benchmark of this source tree, an earlier version (baseline.bash),
#          built here first; A runs this tree's
#   AB_CASES  space-separated OP:RANKS:TLS[:MEMORY], MEMORY overriding AB_ARGS' (default
#          "allreduce:4:tcp allreduce:4:posix,sysv broadcast:4:tcp broadcast:2:tcp")
#   AB_ARGS  the benchmark's other arguments (default: device memory, off, bf16, 8 B to 16 MB by 8)
#   ROUNDS (default 2)
#   AB_CU13=1  both sides run the build against the CUDA-enabled UCX 1.22 that scripts/gpu-run
#          made (CU13_BUILD, CU13_UCX), e.g. to A/B a setting on UCX 1.22's tcp
set -uo pipefail
source "$(dirname "$0")/json-rows.bash"
source "$(dirname "$0")/baseline.bash"
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
if [[ ${AB_CU13:-0} == 1 ]]; then
  if [[ -z ${CU13_BUILD:-} || ! -d ${CU13_UCX:-/nonexistent}/lib ]]; then
    echo "env-ab: AB_CU13=1 but scripts/gpu-run built no CUDA-enabled UCX"; exit 1
  fi
  bench="$CU13_BUILD/benchmarks/ucclzip-bench"
  export LD_LIBRARY_PATH="$CU13_UCX/lib:${LD_LIBRARY_PATH:-}" UCX_MODULE_DIR="$CU13_UCX/lib/ucx"
fi
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
bench_b=$bench
if [[ -n ${AB_B_TREE:-} && ${AB_CU13:-0} == 1 ]]; then
  echo "env-ab: AB_B_TREE builds against Debian's UCX only; leave out AB_CU13"; exit 1
fi
if [[ -n ${AB_B_TREE:-} ]]; then
  bench_b=$(build_baseline "$AB_B_TREE" build-env-ab-baseline) || { echo "env-ab: building $AB_B_TREE failed"; exit 1; }
fi
rows="$OUT/env-ab.jsonl"
: >"$rows"
read -r -a args <<<"${AB_ARGS:---memory device --compress off -d bf16 -b 8 -e 16M -f 8 -n 30 -w 5 -c 1}"
echo "A: $bench ${AB_A:-(as is)} ${AB_A_ARGS:-}; B: $bench_b ${AB_B:-(as is)} ${AB_B_ARGS:-}; ${args[*]}"
for round in $(seq 1 "${ROUNDS:-2}"); do
  sides=(A B)
  ((round % 2 == 0)) && sides=(B A)
  for case in ${AB_CASES:-allreduce:4:tcp allreduce:4:posix,sysv broadcast:4:tcp broadcast:2:tcp}; do
    IFS=: read -r op ranks tls memory <<<"$case"
    for side in "${sides[@]}"; do
      settings=${AB_A:-} side_args=${AB_A_ARGS:-} side_bench=$bench
      [[ $side == B ]] && settings=${AB_B:-} side_args=${AB_B_ARGS:-} side_bench=$bench_b
      read -r -a setting_list <<<"$settings"
      read -r -a side_arg_list <<<"$side_args"
      err="$OUT/env-ab-$op-$ranks-$tls${memory:+-$memory}-$side.err"
      env "${setting_list[@]}" timeout -k 10 300 "$side_bench" "$op" --ranks "$ranks" --tls "$tls" "${args[@]}" "${side_arg_list[@]}" ${memory:+--memory "$memory"} --json 2>"$err" |
        tag_rows "\"side\":\"$side\",\"round\":$round" >>"$rows" ||
        echo "$op $ranks ranks $tls side $side: failed ($(tail -1 "$err"))"
    done
  done
done
python3 - "$rows" <<'EOF'
import collections, json, statistics, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "time_us" in r]  # not sendrecv's latency row
checked = [r["wrong"] for r in rows if r["wrong"] is not None]  # null: -c 0 compared nothing
print(f"{len(rows)} rows, {len(checked)} checked, {sum(checked)} wrong elements")
times = collections.defaultdict(list)
for r in rows:
    times[(r["bench"], r["memory"], r["tls"], r["ranks"], r["compress"], r["size"], r["side"])].append(r["time_us"])
print("op         memory tls         ranks compress     bytes       A us       B us      A/B")
for key in sorted({k[:6] for k in times}):
    a, b = times[key + ("A",)], times[key + ("B",)]
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{key[0]:10} {key[1]:6} {key[2]:11} {key[3]:5} {key[4]:8} {key[5]:9} {ma:10.1f} {mb:10.1f} {ma / mb:8.2f}")
EOF
