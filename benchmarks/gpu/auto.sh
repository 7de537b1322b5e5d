#!/usr/bin/env bash
# Issue 10's table on the GPU machine: compression off, on and auto taking turns in every run,
# on every memory path, each over tcp and over shared memory:
#   host     host memory (CPU codec), Debian's UCX 1.13 ($BUILD)
#   staged   device memory through pinned host memory, UCX 1.13, which takes no CUDA memory
#   host122  host memory, UCX 1.22 of the libucx-cu13 wheel ($CU13_BUILD)
#   staged122  device memory through pinned host memory, UCX 1.22 of the wheel, whose UCX_TLS
#            here names no CUDA transport (issue 10: >= 90 % of perftest on UCX 1.22 over tcp,
#            staged device memory as well as host)
#   direct   device memory GPU-direct, the wheel's cuda_copy and cuda_ipc ($CU13_BUILD)
# Cases: one-way send/recv of bf16 Gaussian (sigma 0.02) and of random bytes, 16 MB and 256 MB,
# two processes; and a weight sync (one sender to one receiver, a 2-layer Llama-3-8B-shaped
# model of 1.4 GB). ucx_perftest tag_bw at 16 and 256 MB runs in the same run on each path
# (with -m cuda on the direct one), for the "of perftest" columns: uncompressed send/recv
# >= 90 % there. Targets: auto >= 0.97 x off and >= 0.95 x the better of on and off, in GB/s
# over the whole run (size over the mean time, the weight sync's mean sync; until session 34
# over the median time).
# Rows go to $OUT/auto-summary.jsonl; a table is printed.
#   BUILD, CU13_BUILD, CU13_UCX  as scripts/gpu-run sets them
#   AUTO_PATHS    paths to run (default "host staged host122 staged122 direct"; the last three
#                 need CU13_BUILD)
#   ITERS         timed iterations (default 8; ITERS_16M for the 16 MB send/recv rows, default 30)
#   CASE_TIMEOUT  seconds per case (default 150)
#   AUTO_TLS      transports to run (default "tcp shm")
#   AUTO_CASES    cases to run (default "gaussian random-bytes weightsync"): a row near auto's
#                 break-even, which goes either way between runs, is rerun alone several times
#                 (perftest runs only with a send/recv case)
#   WEIGHTSYNC_ITERS  the weight sync's timed iterations (default 3)
#   AUTO_WINDOW   messages the send/recv cases send back to back per acknowledgement
#                 (`sendrecv --window`, default 1: one message per call). One message per call
#                 on the direct path spreads p10 to p90 by 3-4 x (RESULTS.md, s33-3), which the
#                 medians of modes sending the same bytes could not tell apart; a window of 8
#                 streams messages as perftest does (s29-6: 90-92 % of perftest uncompressed)
#   DIRECT_TLS_tcp, DIRECT_TLS_shm  UCX_TLS of the direct path (default: tcp or posix,sysv, plus
#                 cuda_copy,cuda_ipc)
#   AUTO_DECISIONS=1  logs at debug level and keeps auto's decisions (below): a diagnosis, not a
#                 timing run (until session 29 it was the default)
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
iters=${ITERS:-8}
iters_16m=${ITERS_16M:-30}
limit=${CASE_TIMEOUT:-150}
summary="$OUT/auto-summary.jsonl"
: >"$summary"
source "$(dirname "$0")/perftest.bash"
cu13=${CU13_UCX:-/tmp/libucx-cu13/libucx}

# tls PATH NAME: the UCX_TLS of transport NAME (tcp, shm) on PATH.
tls() {
  case $1:$2 in
    direct:tcp) echo "${DIRECT_TLS_tcp:-tcp,cuda_copy,cuda_ipc}" ;;
    direct:shm) echo "${DIRECT_TLS_shm:-posix,sysv,cuda_copy,cuda_ipc}" ;;
    *:tcp) echo tcp ;;
    *:shm) echo posix,sysv ;;
  esac
}

# on_path PATH COMMAND...: COMMAND with PATH's build and UCX (the wheel's for host122, staged122
# and direct).
on_path() {
  local path=$1
  shift
  case $path in
    host | staged) BENCH="${BUILD:-build}/benchmarks/ucclzip-bench" "$@" ;;
    host122 | staged122 | direct)
      LD_LIBRARY_PATH="$cu13/lib:${LD_LIBRARY_PATH:-}" UCX_MODULE_DIR="$cu13/lib/ucx" PATH="$cu13/bin:$PATH" \
        BENCH="$CU13_BUILD/benchmarks/ucclzip-bench" "$@" ;;
  esac
}

# tagged TAGS LOG -- ARGS...: runs the bench with ARGS within the case timeout; its JSON lines,
# TAGS in front, go to the summary. With AUTO_DECISIONS=1 it logs at debug level and keeps
# auto's decisions with the rates behind them ("auto: blocks to peer ... now go ...") in
# LOG.decisions, to see why auto chose what it did.
tagged() {
  local tags=$1 log=$2
  shift 3
  UCCLZIP_LOG_LEVEL=$([[ ${AUTO_DECISIONS:-0} == 1 ]] && echo debug || echo "${UCCLZIP_LOG_LEVEL:-error}") \
    timeout -k 10 "$limit" "$BENCH" "$@" --json >"$log.jsonl" 2>"$log.err" ||
    echo "$(basename "$log"): failed (rc $?): $(tail -c 300 "$log.err")"
  [[ ${AUTO_DECISIONS:-0} == 1 ]] && grep -h "auto:" "$log.err" >"$log.decisions" 2>/dev/null
  sed "s/^{/{$tags,/" "$log.jsonl" | grep '^{' >>"$summary"
}

run_path() {
  local path=$1 memory=host
  [[ $path == staged || $path == staged122 || $path == direct ]] && memory=device
  local cases=" ${AUTO_CASES:-gaussian random-bytes weightsync} "
  for name in ${AUTO_TLS:-tcp shm}; do
    local t
    t=$(tls "$path" "$name")
    for size in 16777216 268435456; do
      [[ $cases == *" gaussian "* || $cases == *" random-bytes "* ]] || break
      # The staged path's wire carries host memory, and its UCX takes no CUDA memory.
      PERFTEST_MEMORY=$([[ $path == direct ]] && echo cuda) \
        perftest "$path-$name-$size" "$t" tag_bw "$size" "${PERFTEST_ITERS:-200}" |
        awk -v p="$path" -v n="$name" -v s="$size" \
          '{printf "{\"path_name\":\"%s\",\"tls_name\":\"%s\",\"bench\":\"ucx_perftest\",\"size\":%d,\"algbw_GBps\":%.4f}\n", p, n, s, $7 * 1048576 / 1e9}' \
          >>"$summary"
    done
    for dist in gaussian:0.02 random-bytes; do
      [[ $cases == *" ${dist%%:*} "* ]] || continue
      # Each size its own run: 16 MB takes more iterations for the same time, and needs them
      # (s27-3: rows where auto sent every block plain, as off does, measured 0.84-0.96 x off
      # over 8 iterations).
      for size in 16M:"$iters_16m" 256M:"$iters"; do
        tagged "\"path_name\":\"$path\",\"tls_name\":\"$name\"" "$OUT/auto-$path-$name-${dist%%:*}-${size%%:*}" -- \
          sendrecv --ranks 2 --memory "$memory" --tls "$t" --pattern oneway --compress off,on,auto --dist "$dist" \
          -b "${size%%:*}" -e "${size%%:*}" --iters "${size#*:}" --warmup 3 --latency_iters 0 --window "${AUTO_WINDOW:-1}"
      done
    done
    [[ $cases == *" weightsync "* ]] || continue
    tagged "\"path_name\":\"$path\",\"tls_name\":\"$name\"" "$OUT/auto-$path-$name-weightsync" -- \
      weightsync --ranks 2 --memory "$memory" --tls "$t" --compress off,on,auto --layers 2 --vocab 32000 \
      --iters "${WEIGHTSYNC_ITERS:-3}" --warmup 1
  done
}

for path in ${AUTO_PATHS:-host staged host122 staged122 direct}; do
  if [[ ($path == host122 || $path == staged122 || $path == direct) && (-z ${CU13_BUILD:-} || ! -d $cu13/lib) ]]; then
    echo "$path skipped: no build against the CUDA-enabled UCX (scripts/gpu-gather --cuda-ucx)"
    continue
  fi
  echo "== $path"
  on_path "$path" run_path "$path"
done

python3 - "$summary" <<'PY'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
perf = {(r["path_name"], r["tls_name"], r["size"]): r["algbw_GBps"] for r in rows if r["bench"] == "ucx_perftest"}
# The path each row's device memory really took (sendrecv rows say): staged122 relies on UCX 1.22
# reporting no CUDA memory when UCX_TLS names no CUDA transport; if it did, its rows are direct.
expected = {"host": "host", "host122": "host", "staged": "staged", "staged122": "staged", "direct": "direct"}
wrong_path = collections.Counter((r["path_name"], r["path"]) for r in rows
                                 if "path" in r and r["path"] != expected.get(r["path_name"], r["path"]))
for (name, taken), count in sorted(wrong_path.items()):
    print(f"WARNING: {count} {name} rows took the {taken} path, not {expected[name]}: they do not measure {name}")
cases = {}
for r in rows:
    if r["bench"] == "sendrecv":
        key = (r["path_name"], r["tls_name"], r["dist"].split(":")[0], f"{r['size'] >> 20} MB")
        # GB/s over the whole run (size over the mean time), as perftest's "overall" figure is:
        # what a stream of transfers gets, auto's probes included.
        # The median's ratio is printed beside it: where off and auto both send plainly it is
        # noise (direct path, s34-2: p10 to p90 of 214-320 us for the same 256 MB).
        cases.setdefault(key, {})[r["compress"]] = (r["size"] / r["mean_us"] / 1e3, r["wrong"], r["ratio"], r["size"],
                                                    r["algbw_GBps"])
    elif r["bench"] == "weightsync":
        key = (r["path_name"], r["tls_name"], "weightsync", f"{r['bytes'] / 1e9:.1f} GB")
        # The mean sync where the benchmark gives it (since session 34), else the median.
        cases.setdefault(key, {})[r["compress"]] = (r["bytes"] / r.get("mean_s", r["time_s"]) / 1e9, r["wrong"],
                                                    r["ratio"], None, r["bytes"] / r["time_s"] / 1e9)
print(f"{'path':8} {'tls':4} {'case':10} {'size':7} {'off GB/s':>9} {'of perftest':>11} {'on GB/s':>8} {'auto GB/s':>9} "
      f"{'auto ratio':>10} {'auto/off':>8} {'auto/best':>9} {'median a/o':>10} {'targets':>12} {'#wrong':>6}")
for (path, tls, case, size), m in sorted(cases.items()):
    if not all(k in m for k in ("off", "on", "auto")): continue
    off, on, auto = m["off"][0], m["on"][0], m["auto"][0]
    ref = perf.get((path, tls, m["off"][3])) if m["off"][3] else None
    share = f"{100 * off / ref:.0f} %" if ref else "-"
    a_off, a_best = auto / off, auto / max(on, off)
    met = "met" if a_off >= 0.97 and a_best >= 0.95 else "NOT met"
    wrong = sum(v[1] for v in m.values())
    print(f"{path:8} {tls:4} {case:10} {size:7} {off:9.3f} {share:>11} {on:8.3f} {auto:9.3f} {m['auto'][2]:10.3f} "
          f"{a_off:7.2f}x {a_best:8.2f}x {m['auto'][4] / m['off'][4]:9.2f}x {met:>12} {wrong:6}")
PY
