#!/usr/bin/env bash
# Checks that a sweep measures each size once (a ctest): sizes that round down to the same whole
# elements (and, for allgather and reducescatter, the same multiple of the ranks) as the size
# before them are not printed again.
#   check_sizes.sh path/to/ucclzip-bench
set -uo pipefail
bench=$1
failures=0
# expect_sizes WANT -- ARGS...: the JSON rows' sizes, one per mode, are WANT (space-separated).
expect_sizes() {
  local want=$1
  shift 2
  local got
  got=$(timeout 120 "$bench" "$@" --warmup_ms 0 -n 1 -w 0 --json | grep -o '"size":[0-9]*' | cut -d: -f2 | tr '\n' ' ')
  if [[ "$got" != "$want " ]]; then
    echo "FAIL: $*: sizes '$got', want '$want'"
    ((failures++))
  else
    echo "ok: $* -> $got"
  fi
}
# 3 ranks of bf16: 0, 1, 2 and 4 bytes are all 0 elements per rank, 8 one.
expect_sizes "0 6" -- allgather --ranks 3 --compress off -b 0 -e 12
# 0 and 1 byte are both 0 elements.
expect_sizes "0 2 4" -- allreduce --ranks 2 --compress off -b 0 -e 4
# fp32 from 4 bytes by 1.1: 4..7 bytes are one element, 8..11 two.
expect_sizes "4 8" -- sendrecv --ranks 2 -d fp32 -b 4 -e 10 -f 1.1 --latency_iters 0
((failures == 0)) || { echo "$failures case(s) failed"; exit 1; }
