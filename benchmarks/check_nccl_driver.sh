#!/usr/bin/env bash
# Checks nccl_driver's command line (a ctest, for nccl_driver and nccl_driver_ucclzip alike):
# --help exits 0 with the usage; each bad flag, operation or rank environment is named and exits
# 2 before any CUDA or NCCL call; a one-rank run either measures with no wrong element (on a
# machine with a GPU) or fails naming the missing device (without one).
#   check_nccl_driver.sh path/to/nccl_driver
set -uo pipefail
driver=$1
failures=0
# The launchers' variables of the environment ctest runs in do not reach the cases.
clean=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u UCCLZIP_RANK -u UCCLZIP_WORLD_SIZE -u UCCLZIP_LOCAL_RANK
       -u NCCL_DRIVER_ID_FILE NCCL_NVLS_ENABLE=0)

# expect RC TEXT [VAR=VALUE...] -- ARGS...: the driver exits RC and prints TEXT.
expect() {
  local want_rc=$1 want_text=$2 vars=()
  shift 2
  while [[ $1 != -- ]]; do vars+=("$1"); shift; done
  shift
  local out rc
  out=$("${clean[@]}" "${vars[@]}" "$driver" "$@" 2>&1)
  rc=$?
  if [[ $rc != "$want_rc" ]] || ! grep -qF -- "$want_text" <<<"$out"; then
    echo "FAIL: ${vars[*]} $* exited $rc (want $want_rc) printing:"
    echo "$out" | head -5
    echo "  (want the text: $want_text)"
    ((failures++))
  else
    echo "ok: ${vars[*]} $* -> $rc"
  fi
}

expect 0 "usage: nccl_driver allreduce|allgather" -- --help
expect 0 "NCCL_DRIVER_ID_FILE" -- allreduce -h
expect 2 "no operation given" --
expect 2 "unknown operation 'alltoall'" -- alltoall
expect 2 "one operation expected, got 'allreduce' and more" -- allreduce allgather
expect 2 "-d 'int8': the types are bf16, fp16 and fp32" -- allreduce -d int8
expect 2 "-b '1X' is not a size" -- allreduce -b 1X
expect 2 "-e '-4' is not a size" -- allreduce -e -4
expect 2 "-b 4194304 is larger than -e 1048576" -- allgather -b 4M -e 1M
expect 2 "-c '2' is not an integer in [0, 1]" -- reduce -c 2
expect 2 "-n '0' is not an integer in [1, 1000000]" -- reduce -n 0
expect 2 "-f 'x' is not a factor of 1 or more" -- sendrecv -f x
expect 2 "-o 'max': only sum is supported" -- allreduce -o max
expect 2 "unknown flag '--bogus'" -- allreduce --bogus
expect 2 "-n needs a value" -- allreduce -n
expect 2 "set NCCL_DRIVER_ID_FILE" RANK=0 WORLD_SIZE=2 -- allreduce
expect 2 "rank 2 is not a rank of a world of 2" UCCLZIP_RANK=2 UCCLZIP_WORLD_SIZE=2 -- allreduce
expect 2 "WORLD_SIZE='two' is not a non-negative integer" WORLD_SIZE=two -- allreduce
expect 2 "-r 3 is not a rank of 2" RANK=1 WORLD_SIZE=2 NCCL_DRIVER_ID_FILE=/nonexistent -- broadcast -r 3
expect 2 "-c 1 knows exact bf16 sums of up to 32 ranks, not 33" RANK=0 WORLD_SIZE=33 NCCL_DRIVER_ID_FILE=/x -- allreduce

# One rank: measured and right where there is a GPU, a clear failure where there is none.
out=$("${clean[@]}" "$driver" allreduce -b 1M -e 4M -f 4 -n 2 -w 1 -d fp16 --json 2>&1)
rc=$?
if [[ $rc == 0 ]]; then
  rows=$(grep -c '^{"bench":"allreduce".*"wrong":0,' <<<"$out")
  if [[ $rows == 2 ]]; then echo "ok: one rank on a GPU measured 2 sizes, 0 wrong"; else
    echo "FAIL: one rank on a GPU printed:"; echo "$out"; ((failures++)); fi
elif [[ $rc == 1 ]] && grep -q "rank 0 of 1: setup: no usable CUDA device" <<<"$out"; then
  echo "ok: no GPU here, named: $(tail -1 <<<"$out")"
else
  echo "FAIL: one rank exited $rc printing:"; echo "$out" | tail -5; ((failures++))
fi
((failures == 0)) || { echo "$failures case(s) failed"; exit 1; }
