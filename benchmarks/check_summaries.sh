#!/usr/bin/env bash
# Checks the summaries that the GPU scripts (benchmarks/gpu/*.sh) print from the benchmark's JSON
# rows (a ctest): each script's Python, taken from the script itself, runs on rows that
# ucclzip-bench writes here (host memory, tcp, small sizes), tagged as that script tags them, and
# must print its table. A summary that breaks on a row it did not expect loses the whole run's
# table on the GPU machine.
#   check_summaries.sh path/to/ucclzip-bench
set -uo pipefail
bench=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
# summary_of SCRIPT: the Python between SCRIPT's `<<'PY'` (or `<<'EOF'`) and its closing line.
summary_of() {
  sed -n -e "/<<'PY'\$/,/^PY\$/p" -e "/<<'EOF'\$/,/^EOF\$/p" "$here/gpu/$1" | sed '1d;$d'
}
# expect SCRIPT PATTERN ROWS: SCRIPT's summary of ROWS succeeds and prints a line matching PATTERN.
expect() {
  local script=$1 pattern=$2 rows=$3 out
  if ! out=$(python3 <(summary_of "$script") "$rows" 2>&1) || ! grep -Eq "$pattern" <<<"$out"; then
    echo "FAIL: $script's summary, no line matching '$pattern':"
    echo "$out"
    ((failures++))
  else
    echo "ok: $script"
  fi
}
run() { timeout 120 "$bench" "$@" --warmup_ms 0 --json; }

# pipeline.sh: its sendrecv runs keep the default 8-byte latency, whose row has no "compress";
# each pipeline block (its tag "pblock", as run_case writes it) is a row of its own.
for block in 1M 16M; do
  run sendrecv --ranks 2 --tls tcp --pattern oneway --compress off,on --dist gaussian:0.02 -b 64K -e 64K -n 1 -w 0 \
    --latency_iters 5 --pipeline_block "$block" | sed "s/^{/{\"case\":\"gaussian\",\"pblock\":\"$block\",/"
done >"$work/pipeline.jsonl"
expect pipeline.sh '^gaussian +tcp +1M ' "$work/pipeline.jsonl"
expect pipeline.sh '^gaussian +tcp +16M ' "$work/pipeline.jsonl"

# env-ab.sh: AB_ARGS may compare without checking (-c 0), whose rows' "wrong" is null.
source "$here/gpu/json-rows.bash"
for side in A B; do
  run allreduce --ranks 2 --tls tcp --compress off -b 64K -e 64K -n 1 -w 0 -c 0 | tag_rows "\"side\":\"$side\",\"round\":1"
done >"$work/env-ab.jsonl"
expect env-ab.sh '^allreduce +host +tcp +2 +off +65536 ' "$work/env-ab.jsonl"

# tcp-links.sh: perftest's rows (its own JSON), then each case's rows tagged with round and
# transport block; here the allreduce on host memory stands in for the device's.
{
  echo '{"round":1,"bench":"ucx_perftest","busbw_GBps":1.5}'
  run sendrecv --ranks 2 --tls tcp --memory host --compress off --pattern shift --block_bytes 4M -b 64K -e 64K -n 1 -w 0 \
    --latency_iters 0 | sed 's/^{/{"round":1,"tblock":"4M",/'
  run allreduce --ranks 2 --tls tcp --compress off -b 64K -e 64K -n 1 -w 0 -c 0 | sed 's/^{/{"round":1,"tblock":"4M",/'
} | grep '^{' >"$work/tcp-links.jsonl"
expect tcp-links.sh '^sendrecv +host +4M ' "$work/tcp-links.jsonl"
expect tcp-links.sh '^allreduce +host +4M ' "$work/tcp-links.jsonl"

((failures == 0)) || { echo "$failures summary(ies) failed"; exit 1; }
