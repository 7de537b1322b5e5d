#!/usr/bin/env bash
# Where the codec kernels spend their time: Nsight Compute (clocks left alone) on one launch of
# each kernel that PROFILE_KERNELS names (default: the three compress kernels and the decoder),
# after the benchmark's warm-up has raised the clocks, at each of PROFILE_SIZES. Prints
# duration, throughput, occupancy and the warp stall breakdown.
set -euo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
for bytes in ${PROFILE_SIZES:-1M 256M}; do
 for kernel in ${PROFILE_KERNELS:-SplitKernel TileModelKernel EncodeKernel DecodeKernel}; do
  echo "-- bf16 gaussian:1 $bytes $kernel"
  ncu --clock-control none --launch-skip 10 --launch-count 1 -k "regex:$kernel" \
    --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_misc_per_issue_active.ratio \
    "$bench" codec --device gpu --dtype bf16 --dist gaussian:1 --bytes "$bytes" --iters 2 --warmup 40 2>&1 |
    grep -E "Kernel<|gpu__|sm__|smsp__|dram__|launch__" | sed -E 's/ {2,}/ /g; s/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' || true
 done
done
