#!/usr/bin/env bash
# Where the codec kernels spend their time: Nsight Compute (clocks left alone) on one launch of
# each kernel that PROFILE_KERNELS names (default: the three compress kernels and the decoder),
# after the benchmark's warm-up has raised the clocks, at each of PROFILE_SIZES. Prints
# duration, throughput, occupancy and the warp stall breakdown.
# PROFILE_SOURCE=1 also samples where each kernel's warps stall, per SASS instruction (ncu's
# SourceCounters section), and prints the instructions that hold the most samples with each
# one's main stall reasons; the reports go to $OUT as
# codec-profile-SIZE-KERNEL[-VARIANT].ncu-rep, for the Nsight Compute GUI. Session 40's codec
# patch guessed its stalls from the listing and gained nothing: the per-instruction samples say
# which step of a chain the warps wait on.
# PROFILE_CACHE_CONTROL=none keeps the caches as the benchmark's calls leave them (ncu's default,
# all, flushes them before the launch): frame format v5's decoder lost 14-24 % at 16 MB fp32 in
# calls back to back and nothing with the caches flushed (RESULTS.md, fifty-second session).
set -euo pipefail
cache_control=${PROFILE_CACHE_CONTROL:-all}
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
out=${OUT:-/tmp}
# PROFILE_VARIANTS: "|"-separated sets of more benchmark flags, each profiled in turn, e.g.
# "|--lane_symbols 64" (the default lanes, then 64-symbol lanes).
IFS='|' read -r -a variants <<<"${PROFILE_VARIANTS:-}"
[[ ${#variants[@]} -gt 0 ]] || variants=("")
for variant in "${variants[@]}"; do
 for bytes in ${PROFILE_SIZES:-1M 256M}; do
  for kernel in ${PROFILE_KERNELS:-SplitKernel TileModelKernel EncodeKernel DecodeKernel}; do
   echo "-- bf16 gaussian:1 $bytes $kernel $variant"
   read -r -a extra <<<"$variant"
   run=("$bench" codec --device gpu --dtype bf16 --dist gaussian:1 --bytes "$bytes" --iters 2 --warmup 40 "${extra[@]}")
   ncu --clock-control none --cache-control "$cache_control" --launch-skip 10 --launch-count 1 -k "regex:$kernel" \
     --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_misc_per_issue_active.ratio \
     "${run[@]}" 2>&1 |
     grep -E "Kernel<|gpu__|sm__|smsp__|dram__|launch__" | sed -E 's/ {2,}/ /g; s/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' || true
   [[ ${PROFILE_SOURCE:-0} == 1 ]] || continue
   report="$out/codec-profile-$bytes-$kernel${variant:+-$(tr -c 'A-Za-z0-9_.\n' '-' <<<"${variant# }")}"
   ncu --clock-control none --cache-control "$cache_control" --launch-skip 10 --launch-count 1 -k "regex:$kernel" --section SourceCounters \
     --section WarpStateStats -f -o "$report" "${run[@]}" >"$report.log" 2>&1 || { tail -3 "$report.log"; continue; }
   ncu -i "$report.ncu-rep" --page source --csv --print-source sass >"$report.sass.csv" 2>"$report.log" ||
     { tail -3 "$report.log"; continue; }
   python3 - "$report.sass.csv" <<'PY' || echo "   (its listing could not be read: see $report.sass.csv)"
# The instructions with the most warp stall samples, with each one's largest stall reasons
# (ncu's stall_* columns), and the kernel's samples by reason. Offsets count bytes from the
# kernel's first instruction, as the report's listing in the Nsight Compute GUI does.
import collections, csv, sys
# ncu prints a "Kernel Name" line before the table's header, which starts with "Address".
lines = open(sys.argv[1]).read().splitlines()
header = next((i for i, line in enumerate(lines) if line.startswith('"Address"')), None)
if header is None:
    sys.exit("no table header in " + sys.argv[1])
rows = list(csv.DictReader(lines[header:]))
if not rows:
    sys.exit("no rows in " + sys.argv[1])
total_column = next((c for c in rows[0] if "Sampling (All" in c), None)
if total_column is None:
    sys.exit("no sampling column among: " + ", ".join(rows[0]))
def number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return 0.0
# Each reason has an "(Not Issued)" twin, which counts only the samples of warps that did not
# issue; the plain columns count every sample, as the total column does.
reasons = [c for c in rows[0] if c.startswith("stall_") and "Not Issued" not in c]
total = sum(number(r[total_column]) for r in rows) or 1.0
by_reason = sorted(((sum(number(r[c]) for r in rows), c) for c in reasons), reverse=True)
print(f"   {total:.0f} samples: " + ", ".join(f"{c} {v / total:.0%}" for v, c in by_reason[:6] if v > 0))
# An instruction's executions tell the phase it belongs to (once a warp, once a chunk, once a
# step of an unrolled loop), so the samples summed by executions split the time between a
# kernel's setup and its loops; the executions summed count its warp-level instructions.
executed = collections.Counter()
by_executions = collections.Counter()
for r in rows:
    runs = int(number(r.get("Instructions Executed", 0)))
    executed[runs] += 1
    by_executions[runs] += number(r[total_column])
print(f"   {sum(runs * n for runs, n in executed.items()):.0f} warp-level instructions executed; samples by an "
      "instruction's executions: " + ", ".join(f"{runs} ({executed[runs]} instructions) {v / total:.0%}"
                                               for runs, v in by_executions.most_common(8) if v > 0))
first_address = int(rows[0]["Address"], 16)
print("   the instructions with the most (offset, share, SASS, executions, main reasons):")
for r in sorted(rows, key=lambda r: -number(r[total_column]))[:25]:
    top = sorted(((number(r[c]), c) for c in reasons), reverse=True)[:3]
    why = ", ".join(f"{c} {v:.0f}" for v, c in top if v > 0)
    offset = int(r["Address"], 16) - first_address
    print(f"   {offset:#7x} {number(r[total_column]) / total:6.1%} {r['Source'].strip()[:52]:52} "
          f"{r.get('Instructions Executed', ''):>7} {why}")
PY
  done
 done
done
