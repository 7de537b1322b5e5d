#!/usr/bin/env bash
# Per-kernel GPU time of one compress and one decompress (Nsight Compute, clocks left alone),
# at the sizes the latency and throughput targets name.
set -euo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
for bytes in 1M 16M 256M; do
  echo "-- bf16 gaussian:1 $bytes"
  ncu --clock-control none --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes.sum.per_second \
    "$bench" codec --device gpu --dtype bf16 --dist gaussian:1 --bytes "$bytes" --iters 1 --warmup 0 2>&1 |
    grep -E "Kernel|Stored|gpu__time_duration|warps_active|dram__bytes" | sed -E 's/\(int, int, int\)//; s/ +/ /g' || true
done
