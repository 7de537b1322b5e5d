#!/usr/bin/env bash
# Transport benchmark on the GPU machine, side by side with ucx_perftest (two processes on this
# host, over TCP and over shared memory): 16 MB tag bandwidth and 8 B tag latency of raw UCX,
# then `ucclzip-bench sendrecv`, ucclzip's uncompressed Send/Recv, for host and device memory
# (device memory is staged through pinned host memory unless the UCX in use takes CUDA memory).
# Logs go to $OUT; a table is printed.
#   BUILD            build folder (default: build)
#   TRANSPORT_MEMORY memories to run ucclzip-bench with (default: "host device"; "host" without a GPU)
#   PERFTEST_ITERS   ucx_perftest iterations for bandwidth (default 1000) and 20x that for latency
#   TRANSPORT_BLOCKS transport block sizes to run ucclzip-bench with (default "4M")
set -euo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
memories=${TRANSPORT_MEMORY:-host device}
iters=${PERFTEST_ITERS:-1000}
declare -A transports=([tcp]=tcp [shm]=posix,sysv)
summary="$OUT/transport-summary.txt"
: >"$summary"

source "$(dirname "$0")/perftest.bash"

for name in tcp shm; do
  tls=${transports[$name]}
  bw=$(perftest "$name" "$tls" tag_bw 16777216 "$iters" | awk '{print $7 * 1048576 / 1e9}')
  lat=$(perftest "$name" "$tls" tag_lat 8 $((iters * 20)) | awk '{print $3}')
  echo "$name perftest tag_bw_16M_GBps=$bw tag_lat_8B_us=$lat" >>"$summary"
  for memory in $memories; do
   for block in ${TRANSPORT_BLOCKS:-4M}; do
    log="$OUT/sendrecv-$name-$memory-$block.jsonl"
    "$bench" sendrecv --ranks 2 --tls "$tls" --memory "$memory" --pattern oneway --min_bytes 16M --max_bytes 256M \
      --block_bytes "$block" --iters 30 --warmup 5 --json --latency_iters $((iters * 20)) >"$log" \
      2>"$OUT/sendrecv-$name-$memory-$block.err"
    python3 - "$log" "$name" "$memory-$block" >>"$summary" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
bw = {r["size"]: r["algbw_GBps"] for r in rows if r["bench"] == "sendrecv"}
wrong = sum(r.get("wrong", 0) for r in rows if r["bench"] == "sendrecv")
lat = [r["oneway_us"] for r in rows if r["bench"] == "sendrecv_latency"]
print(f"{sys.argv[2]} ucclzip-{sys.argv[3]} tag_bw_16M_GBps={bw.get(16 << 20, 0):.3f} "
      f"bw_256M_GBps={bw.get(256 << 20, 0):.3f} tag_lat_8B_us={lat[0] if lat else 0:.2f} wrong={wrong}")
PY
   done
  done
done

python3 - "$summary" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    transport, who, *fields = line.split()
    rows[(transport, who)] = dict(f.split("=") for f in fields)
print(f"{'transport':9} {'measured by':18} {'16 MB GB/s':>11} {'of perftest':>11} {'8 B us':>8} {'vs perftest':>11} {'#wrong':>6}")
for (transport, who), f in rows.items():
    ref = rows.get((transport, "perftest"), {})
    bw, lat = float(f["tag_bw_16M_GBps"]), float(f["tag_lat_8B_us"])
    ref_bw, ref_lat = float(ref.get("tag_bw_16M_GBps", 0)), float(ref.get("tag_lat_8B_us", 0))
    share = f"{100 * bw / ref_bw:.0f} %" if ref_bw else "-"
    ratio = f"{lat / ref_lat:.2f}x" if ref_lat else "-"
    print(f"{transport:9} {who:18} {bw:11.3f} {share:>11} {lat:8.2f} {ratio:>11} {f.get('wrong', '-'):>6}")
PY
