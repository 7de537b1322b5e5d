#!/usr/bin/env bash
# Where GPU-direct uncompressed send/recv loses to ucx_perftest (issue 10: 3-10 % of
# `ucx_perftest -m cuda` in H200 run s4-4): one-way 256 MB device send/recv, compression off,
# over the CUDA-enabled UCX (cuda_copy, cuda_ipc) with tcp and with shm beside it, for several
# pipeline and transport block sizes, against ucx_perftest's one 256 MB message in the same run.
# Uncompressed, a 256 MB message goes as one plain run (docs/PIPELINE.md, "Plain runs"): one
# envelope per pipeline block and one transport message of 256 MB, which the transport cuts
# into transport blocks, all posted to UCX at once: 64 UCX messages with the default 4 MB ones,
# one with 256M, where perftest sends one. Before plain runs each 16 MB pipeline block was its
# own envelope and rendezvous, two blocks at a time (3-10 % of perftest in run s4-4).
#   CU13_BUILD, CU13_UCX  as scripts/gpu-run sets them     ITERS  timed iterations (default 8)
#   DIRECT_BLOCKS  PIPELINE:TRANSPORT block pairs, "default" for either leaving the option unset
#                  (default: 16M:4M 16M:16M 16M:64M default:default 256M:256M)
#   DIRECT_WINDOWS messages sent back to back per acknowledgement (`sendrecv --window`), each
#                  a run of every pair: 1 is one message's time; more streams them, as
#                  ucx_perftest does (default: "1 8")
#   DIRECT_HOLDS   values of UCCLZIP_HOLD_STREAM, each a run of every pair and window: 0 leaves
#                  the caller's stream free (the benchmark waits on each Operation, so it times
#                  the same work), to see whether a stream wait pending in one process costs the
#                  other process's copies time on the GPU they share (default: "1")
#   DIRECT_B_TREE  an earlier version's source tree (baseline.bash), built here against the same
#                  UCX: each case then runs this tree's benchmark (side A) and that one's (B),
#                  taking turns, the order reversed every other round, to tell a change of ours
#                  from the machine's (s34-3's 80-85 % of perftest at window 8 against s29-6's
#                  90-92 %, both on an H100)
#   DIRECT_ROUNDS  rounds of every case (default 1)
#   DIRECT_STREAM  the stream of the calls (`sendrecv --stream`, default legacy): nonblocking puts
#                  them on a stream of the benchmark's own (both sides' trees must know the flag)
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
if [[ -z ${CU13_BUILD:-} || ! -d ${CU13_UCX:-/nonexistent}/lib ]]; then
  echo "direct-blocks skipped: no build against the CUDA-enabled UCX (scripts/gpu-gather --cuda-ucx)"
  exit 0
fi
source "$(dirname "$0")/perftest.bash"
source "$(dirname "$0")/baseline.bash"
export LD_LIBRARY_PATH="$CU13_UCX/lib:${LD_LIBRARY_PATH:-}" UCX_MODULE_DIR="$CU13_UCX/lib/ucx" PATH="$CU13_UCX/bin:$PATH"
declare -A benches=([A]="$CU13_BUILD/benchmarks/ucclzip-bench")
if [[ -n ${DIRECT_B_TREE:-} ]]; then
  benches[B]=$(build_baseline "$DIRECT_B_TREE" build-direct-baseline "$CU13_UCX") ||
    { echo "direct-blocks: building $DIRECT_B_TREE against $CU13_UCX failed"; exit 1; }
fi
summary="$OUT/direct-blocks-summary.jsonl"
: >"$summary"
declare -A transports=([tcp]=tcp,cuda_copy,cuda_ipc [shm]=posix,sysv,cuda_copy,cuda_ipc)
for name in tcp shm; do
  tls=${transports[$name]}
  PERFTEST_MEMORY=cuda perftest "direct-$name-256M" "$tls" tag_bw 268435456 "${PERFTEST_ITERS:-100}" |
    awk -v n="$name" '{printf "{\"tls_name\":\"%s\",\"bench\":\"ucx_perftest\",\"algbw_GBps\":%.4f}\n", n, $7 * 1048576 / 1e9}' \
      >>"$summary"
  for ((round = 1; round <= ${DIRECT_ROUNDS:-1}; round++)); do
  sides=$(printf '%s\n' "${!benches[@]}" | sort)
  ((round % 2 == 0)) && sides=$(sort -r <<<"$sides")
  for hold in ${DIRECT_HOLDS:-1}; do
  for window in ${DIRECT_WINDOWS:-1 8}; do
  for pair in ${DIRECT_BLOCKS:-16M:4M 16M:16M 16M:64M default:default 256M:256M}; do
  for side in $sides; do
    IFS=: read -r pipeline transport <<<"$pair"
    log="$OUT/direct-blocks-$name-$pipeline-$transport-w$window-hold$hold-$side$round"
    block_flags=()
    [[ $pipeline != default ]] && block_flags+=(--pipeline_block "$pipeline")
    [[ $transport != default ]] && block_flags+=(--block_bytes "$transport")
    [[ ${DIRECT_STREAM:-legacy} != legacy ]] && block_flags+=(--stream "$DIRECT_STREAM")
    UCCLZIP_HOLD_STREAM=$hold timeout -k 10 120 "${benches[$side]}" sendrecv --ranks 2 --memory device --tls "$tls" --compress off --pattern oneway \
      --min_bytes 256M --max_bytes 256M --iters "${ITERS:-8}" --warmup 3 --latency_iters 0 --window "$window" \
      "${block_flags[@]}" --json >"$log.jsonl" 2>"$log.err" ||
      echo "$name $pair window $window side $side failed: $(tail -c 300 "$log.err")"
    sed "s/^{/{\"tls_name\":\"$name\",\"blocks\":\"$pair\",\"hold\":$hold,\"side\":\"$side\",\"round\":$round,/" "$log.jsonl" |
      grep '^{' >>"$summary"
  done
  done
  done
  done
  done
done
python3 - "$summary" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
perf = {r["tls_name"]: r["algbw_GBps"] for r in rows if r["bench"] == "ucx_perftest"}
# GB/s by the median call (algbw) and over the whole run (size over the mean call); side A is
# this tree, B the baseline (DIRECT_B_TREE).
print(f"{'tls':4} {'pipeline:transport':>18} {'hold':>4} {'window':>6} {'side':>4} {'round':>5} {'GB/s':>9} {'of perftest':>11} "
      f"{'mean GB/s':>9} {'#wrong':>6}")
for r in rows:
    if r["bench"] != "sendrecv":
        continue
    ref = perf.get(r["tls_name"])
    share = f"{100 * r['algbw_GBps'] / ref:.0f} %" if ref else "-"
    print(f"{r['tls_name']:4} {r['blocks']:>18} {r['hold']:4} {r['window']:6} {r['side']:>4} {r['round']:5} {r['algbw_GBps']:9.2f} "
          f"{share:>11} {r['size'] / r['mean_us'] / 1e3:9.2f} {r['wrong']:6}")
for name, bw in sorted(perf.items()):
    print(f"ucx_perftest -m cuda tag_bw 256 MB over {name}: {bw:.2f} GB/s")
PY
