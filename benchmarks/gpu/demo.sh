#!/usr/bin/env bash
# What a newcomer sees on the GPU machine: examples/demo's table on device memory (4 ranks on
# the one GPU), and the figures the examples report there (kv_cache_transfer puts its pages on
# the GPU when there is one; rl_weight_sync and allreduce_training_step use host memory).
#   BUILD   build folder (default: build)     EXAMPLES=0  the demo alone
set -uo pipefail
build=${BUILD:-build}
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
run=scripts/ucclzip-run
example() {
  local name=$1 n=$2
  shift 2
  echo "== $name $*"
  timeout -k 10 300 "$run" -n "$n" --timeout 280 "$build/examples/$name" "$@" 2>&1 | tee "$OUT/example-$name.log" | tail -25
}
example demo 4 --memory=device
[[ ${EXAMPLES:-1} == 0 ]] && exit 0
example kv_cache_transfer 2 --pages=256
example rl_weight_sync 4 --layers=8 --width=2048 --steps=3
example allreduce_training_step 4 --elements=16000000 --steps=3
