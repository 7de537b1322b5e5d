#!/usr/bin/env bash
# Where the codec kernels spend their time: Nsight Compute (clocks left alone) on one split,
# encode and decode launch each, after the benchmark's warm-up has raised the clocks. Prints
# duration, throughput, occupancy and the warp stall breakdown.
set -euo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
for bytes in ${PROFILE_SIZES:-1M 256M}; do
  echo "-- bf16 gaussian:1 $bytes"
  ncu --clock-control none --launch-skip 30 --launch-count 3 -k 'regex:SplitKernel|EncodeKernel|DecodeKernel' \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    "$bench" codec --device gpu --dtype bf16 --dist gaussian:1 --bytes "$bytes" --iters 2 --warmup 40 2>&1 |
    grep -E "^  [a-zA-Z].*Kernel|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Issued Warp Per Scheduler|No Eligible|Warp Cycles Per Issued|Stall|stall|Registers Per|Theoretical Occ" |
    sed -E 's/ {2,}/ /g' || true
done
