#!/usr/bin/env bash
# The codec against an earlier version of itself, side by side on the same GPU in one run: a
# kernel change is judged by what it changes, not against figures of another day (the machine
# drifts by up to 10 % between calls). CODEC_BASELINE names a source tree of the earlier
# version (baseline.bash says how to make one). Its benchmark is built beside this tree's, then
# both take turns, the order alternating from round to round, on bf16 and fp32 Gaussians at each
# size.
#   CODEC_BASELINE  source tree of the baseline (unset: the script is skipped)
#   BUILD  this tree's build (default: build)
#   AB_ROUNDS  rounds (default 3)      AB_SIZES  sizes (default: 1M 16M 256M)
#   AB_VARIANTS  "|"-separated sets of more benchmark flags, each a case of its own, e.g.
#                "|--lane_symbols 128" (the default lanes, then 128-symbol lanes)
#   AB_CPU=1  also the CPU codec (the host path's), one thread, 64 MB, in every round: the cases
#             of variant "cpu" (this host's cores, not the GPU, set their time)
# Writes $OUT/codec-ab.jsonl (the benchmark's rows with "build", "round" and "variant") and
# prints, per case, the medians over the rounds and this tree's time as a share of the
# baseline's.
set -euo pipefail
OUT=${OUT:?set OUT to the folder for the logs}
if [[ -z ${CODEC_BASELINE:-} ]]; then
  echo "codec-ab skipped: CODEC_BASELINE names the baseline's source tree"
  exit 0
fi
source "$(dirname "$0")/baseline.bash"
ours="${BUILD:-build}/benchmarks/ucclzip-bench"
theirs=$(build_baseline "$CODEC_BASELINE" build-codec-baseline)
jsonl="$OUT/codec-ab.jsonl"
: >"$jsonl"
# run_case BUILD VARIANT FLAGS...: one benchmark row of that build, tagged, into the JSON lines.
run_case() {
  local which=$1 variant=$2 bench=$ours
  shift 2
  [[ $which == baseline ]] && bench=$theirs
  "$bench" codec --json "$@" |
    sed "s/}$/, \"build\": \"$which\", \"round\": $round, \"variant\": \"$variant\"}/" >>"$jsonl"
}
IFS='|' read -r -a variants <<<"${AB_VARIANTS:-}"
[[ ${#variants[@]} -gt 0 ]] || variants=("")
for ((round = 1; round <= ${AB_ROUNDS:-3}; round++)); do
  builds=(ours baseline)
  ((round % 2 == 0)) && builds=(baseline ours)
  for variant in "${variants[@]}"; do
    read -r -a extra <<<"$variant"
    for bytes in ${AB_SIZES:-1M 16M 256M}; do
      for spec in bf16:gaussian:0.02 fp32:gaussian:1; do
        dtype=${spec%%:*} dist=${spec#*:}
        for which in "${builds[@]}"; do
          run_case "$which" "$variant" --device gpu --iters 30 --warmup 5 --dtype "$dtype" --dist "$dist" \
            --bytes "$bytes" "${extra[@]}"
        done
      done
    done
  done
  [[ ${AB_CPU:-0} == 1 ]] || continue
  for spec in bf16:gaussian:0.02 fp32:gaussian:1; do
    for which in "${builds[@]}"; do
      run_case "$which" cpu --device cpu --threads 1 --iters 5 --warmup 1 --dtype "${spec%%:*}" --dist "${spec#*:}" \
        --bytes 64M
    done
  done
done
python3 - "$jsonl" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        runs[(r["variant"], r["dtype"], r["bytes"], r["build"])].append(r)
print(f"{'variant':18} {'dtype':6} {'bytes':>10} {'build':9} {'ratio':>7} {'comp_us':>9} {'dec_us':>9} {'comp ours/base':>15} {'dec ours/base':>14} ok")
for (variant, dtype, size, build), rows in sorted(runs.items()):
    comp = statistics.median(r["compress_us"] for r in rows)
    dec = statistics.median(r["decompress_us"] for r in rows)
    share = ""
    if build == "ours" and (variant, dtype, size, "baseline") in runs:
        base = runs[(variant, dtype, size, "baseline")]
        share = (f"{comp / statistics.median(r['compress_us'] for r in base):15.3f} "
                 f"{dec / statistics.median(r['decompress_us'] for r in base):14.3f}")
    ok = all(r["roundtrip_ok"] for r in rows)
    print(f"{variant or 'default':18} {dtype:6} {size:>10} {build:9} {rows[0]['ratio']:7.4f} {comp:9.1f} {dec:9.1f} {share:>30} {ok}")
PY
