#!/usr/bin/env bash
# Checks that ucclzip-bench refuses bad flags before it starts any rank (a ctest): a sweep that
# would measure nothing or numbers of no iterations (as nccl_driver refuses it), and a flag that
# the subcommand does not read but another does, which it would otherwise ignore without a word.
# Each is named and exits 2.
#   check_flags.sh path/to/ucclzip-bench
set -uo pipefail
bench=$1
failures=0
# The launchers' variables of the environment ctest runs in do not reach the cases.
clean=(env -u RANK -u OMPI_COMM_WORLD_RANK -u UCCLZIP_RANK -u UCCLZIP_UNIQUE_ID)

# expect RC TEXT -- ARGS...: ucclzip-bench exits RC and prints TEXT.
expect() {
  local want_rc=$1 want_text=$2
  shift 3
  local out rc
  out=$(timeout 60 "${clean[@]}" "$bench" "$@" 2>&1)
  rc=$?
  if [[ $rc != "$want_rc" ]] || ! grep -qF -- "$want_text" <<<"$out"; then
    echo "FAIL: $* exited $rc (want $want_rc) printing:"
    echo "$out" | head -5
    echo "  (want the text: $want_text)"
    ((failures++))
  else
    echo "ok: $* -> $rc"
  fi
}

expect 2 "-b 8192 is larger than -e 4096" -- allreduce --ranks 2 -b 8K -e 4K
expect 2 "-b 2097152 is larger than -e 1048576" -- sendrecv --ranks 2 --min_bytes 2M --max_bytes 1M
expect 2 "-b 67108864 is larger than -e 33554432" -- allgather --ranks 2 -b 64M
expect 2 "-n 0 is not at least 1" -- reducescatter --ranks 2 -n 0
expect 2 "-n -3 is not at least 1" -- sendrecv --ranks 2 --iters -3
expect 2 "-w -1 is not at least 0" -- broadcast --ranks 2 -w -1
expect 2 "-f 0 is not a factor of 1 or more" -- reduce --ranks 2 -f 0
expect 2 "-f nan is not a factor of 1 or more" -- allreduce --ranks 2 -f nan
expect 2 "-c 2 is not 0 or 1" -- allreduce --ranks 2 -c 2
expect 2 "weightsync does not read -d, -n" -- weightsync --ranks 2 -d fp16 -n 2
expect 2 "sendrecv does not read -c, -o" -- sendrecv --ranks 2 -c 0 -o max
expect 2 "allreduce does not read --pattern, --layers" -- allreduce --ranks 2 --pattern=oneway --layers 3
expect 2 "codec does not read --ranks" -- codec --ranks 2
expect 2 "allreduce does not read --stream" -- allreduce --ranks 2 --stream nonblocking
expect 1 "--stream nonblocking: only with --memory device" -- sendrecv --ranks 2 --memory host --stream nonblocking
expect 1 "--stream bogus: must be legacy or nonblocking" -- sendrecv --ranks 2 --stream bogus
# Flags the subcommand reads, in every spelling, still run: -f 1 is one size.
expect 0 "1024 " -- allreduce --ranks 2 -b 1K -e 64K -f 1 -n 1 -w 0 --warmup_ms 0 -c 0 --nojson --in_place
((failures == 0)) || { echo "$failures case(s) failed"; exit 1; }
