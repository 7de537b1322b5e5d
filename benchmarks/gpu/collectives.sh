#!/usr/bin/env bash
# Collective targets on the GPU machine (issue 8): 4 processes on the one GPU, device memory
# (staged through pinned memory unless UCX takes CUDA memory), over UCX tcp and shared memory,
# bf16 Gaussian sigma 0.02, 256 MB send buffer per rank (SIZE_MB), compression off, on and auto taking
# turns in every run; broadcast also with 2 ranks (a send to one, for the 3-receiver target);
# ucx_perftest tag_bw at 256 MB in the same run (for the ring's efficiency target).
#   BUILD   build folder (default: build)     ITERS  timed iterations (default 5)
#   RANKS   ranks (default 4)                 CASE_TIMEOUT  seconds per case (default 300)
#   COLLECTIVES  operations to run (default: all four)
#   SIZE_MB  MB per rank of every run, perftest and the links alone included (default 256)
#   PERFTEST_PAIRS  how many ucx_perftest pairs run at once, each count a run (default: "1 RANKS-1 RANKS")
# Beside them, each round times the ring's links alone (sendrecv --pattern shift, uncompressed)
# and, where broadcast runs, the chain's (--pattern chain, off and on): what the links take on
# this host with nothing forwarded, against which the broadcast's own cost shows.
#   SWEEP   settings to compare, KNOB:VALUE each, e.g. "slots:4 pblock:32M": the collectives run
#           once more per setting with its variable set, rows tagged "KNOB":"VALUE". Knobs: lanes
#           (UCCLZIP_TRANSPORT_LANES), wakeups (UCCLZIP_STAGING_WAKEUPS), slots
#           (UCCLZIP_DEVICE_SLOTS), pblock (UCCLZIP_PIPELINE_BLOCK_BYTES), spin (UCCLZIP_WAIT_SPIN),
#           fwd (UCCLZIP_FORWARD_FROM_HOST), hold (UCCLZIP_HOLD_STREAM: the benchmark waits on each
#           call's Operation, so it times the same with the caller's stream held or not), pool
#           (UCCLZIP_STAGING_POOL_BYTES), tblock (UCCLZIP_BLOCK_BYTES, the transport's staging
#           unit), minblock (UCCLZIP_MIN_PIPELINE_BLOCK_BYTES: 16M gives an operation under 64 MB
#           one block per 16 MB again) (default: none)
#   SWEEP_MODES  compression modes of those runs (default: off)
#   SWEEP_OPS    operations of those runs (default: COLLECTIVES)
#   LANES, WAKEUPS  values to compare, e.g. "1 2": short for SWEEP="lanes:1 lanes:2"
#   ROUNDS  how many times the whole set runs (perftest, the defaults, every SWEEP setting),
#           the settings' order reversed every other round, so that the machine's drift (up to
#           35 % between the cases of one call, H200 run s6-1) shows and averages out: the
#           summary gives medians over the rounds and each round's on / off (default 1)
#   AUTO_DECISIONS=1  logs at debug level (every mode of the run: a diagnosis, not a timing run)
#           and keeps auto's decisions with the rates behind them in $OUT/OP-RANKS-TLS-rROUND.decisions
set -uo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
iters=${ITERS:-5}
ranks=${RANKS:-4}
limit=${CASE_TIMEOUT:-300}
mb=${SIZE_MB:-256}
declare -A transports=([tcp]=tcp [shm]=posix,sysv)
summary="$OUT/collectives-summary.jsonl"
: >"$summary"
round=1
source "$(dirname "$0")/perftest.bash"
# The settings SWEEP compares, and the variables that set them.
declare -A knob_variables=([lanes]=UCCLZIP_TRANSPORT_LANES [wakeups]=UCCLZIP_STAGING_WAKEUPS
  [slots]=UCCLZIP_DEVICE_SLOTS [pblock]=UCCLZIP_PIPELINE_BLOCK_BYTES [spin]=UCCLZIP_WAIT_SPIN
  [fwd]=UCCLZIP_FORWARD_FROM_HOST [hold]=UCCLZIP_HOLD_STREAM [pool]=UCCLZIP_STAGING_POOL_BYTES
  [tblock]=UCCLZIP_BLOCK_BYTES [minblock]=UCCLZIP_MIN_PIPELINE_BLOCK_BYTES)
sweep=${SWEEP:-}
for lanes in ${LANES:-}; do sweep+=" lanes:$lanes"; done
for wakeups in ${WAKEUPS:-}; do sweep+=" wakeups:$wakeups"; done
for setting in $sweep; do
  [[ -n ${knob_variables[${setting%%:*}]:-} && $setting == *:* ]] || { echo "SWEEP: no knob '$setting'"; exit 2; }
done

# run OP RANKS SIZE TLSNAME [KNOB VALUE]: one nccl-tests-style run, its JSON lines tagged and
# appended; with KNOB, in SWEEP_MODES, with that setting at VALUE.
run() {
  local op=$1 n=$2 size=$3 name=$4 knob=${5:-} value=${6:-}
  local log="$OUT/$op-$n-$name${knob:+-$knob$value}-r$round" modes=off,on,auto setting=()
  local tag="\"tls_name\":\"$name\",\"round\":$round,"
  if [[ -n $knob ]]; then
    modes=${SWEEP_MODES:-off} tag+="\"$knob\":\"$value\"," setting=(env "${knob_variables[$knob]}=$value")
  elif [[ ${AUTO_DECISIONS:-0} == 1 ]]; then
    setting=(env UCCLZIP_LOG_LEVEL=debug)
  fi
  "${setting[@]}" timeout -k 10 "$limit" "$bench" "$op" --ranks "$n" --memory device \
    --tls "${transports[$name]}" --compress "$modes" -b "$size" -e "$size" -n "$iters" -w 2 -c 1 -r 0 \
    --dist gaussian:0.02 --json >"$log.jsonl" 2>"$log.err" ||
    echo "$op $n ranks $name${knob:+ $knob $value}: failed (rc $?): $(tail -c 300 "$log.err")"
  [[ ${setting[1]:-} == UCCLZIP_LOG_LEVEL=debug ]] && grep -h "auto:" "$log.err" >"$log.decisions"
  sed "s/^{/{$tag/" "$log.jsonl" >>"$summary"
}

# run_collectives TLSNAME [KNOB VALUE]: every operation at RANKS, broadcast also at 2.
run_collectives() {
  local op size
  local ops=${COLLECTIVES:-allreduce allgather reducescatter broadcast}
  [[ -n ${2:-} ]] && ops=${SWEEP_OPS:-$ops}
  for op in $ops; do
    # SIZE_MB per rank: nccl-tests' size is the whole gathered buffer for allgather.
    size=${mb}M
    [[ $op == allgather ]] && size=$((mb * ranks))M
    run "$op" "$ranks" "$size" "$1" "${2:-}" "${3:-}"
    [[ $op == broadcast ]] && run broadcast 2 "${mb}M" "$1" "${2:-}" "${3:-}"
  done
}

{ echo "nproc $(nproc); cgroup cpu.max $(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo none)"; lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"; } \
  >"$OUT/host.txt" 2>&1
# The settings of a round: the defaults ("") and SWEEP's, reversed in even rounds.
settings=("" $sweep)
for ((round = 1; round <= ${ROUNDS:-1}; round++)); do
for name in tcp shm; do
  # One pair, and as many pairs at once as the ring (ranks) and the chain (ranks - 1) have links:
  # the pairs share the host as the ring's links do.
  for pairs in ${PERFTEST_PAIRS:-1 $((ranks - 1)) $ranks}; do
    perftest_pairs "$name" "${transports[$name]}" tag_bw $((mb << 20)) "${PERFTEST_ITERS:-40}" "$pairs" |
      awk -v n="$name" -v p="$pairs" -v k="$round" -v b=$((mb << 20)) '{s += $7; c++} END {if (c) printf "{\"tls_name\":\"%s\",\"round\":%d,\"bench\":\"ucx_perftest\",\"pairs\":%d,\"size\":%d,\"busbw_GBps\":%.4f}\n", n, k, p, b, s / c * 1048576 / 1e9}' \
        >>"$summary"
  done
  # The ring's links without its dependencies: every rank sends to rank+1 and receives from rank-1.
  timeout -k 10 "$limit" "$bench" sendrecv --ranks "$ranks" --memory device --tls "${transports[$name]}" --compress off \
    --pattern shift --min_bytes "${mb}M" --max_bytes "${mb}M" --iters "$iters" --warmup 2 --latency_iters 0 --json \
    2>"$OUT/shift-$name-r$round.err" | sed "s/^{/{\"tls_name\":\"$name\",\"round\":$round,/" | grep '^{' >>"$summary" ||
    echo "sendrecv shift over $name: failed (rc $?): $(tail -c 300 "$OUT/shift-$name-r$round.err")"
  # The broadcast chain's links without its dependencies (nothing forwarded), off and on taking
  # turns: what its links alone take on this host, which the chain then adds its filling to.
  if [[ " ${COLLECTIVES:-broadcast} " == *" broadcast "* ]]; then
    timeout -k 10 "$limit" "$bench" sendrecv --ranks "$ranks" --memory device --tls "${transports[$name]}" --compress off,on \
      --pattern chain --min_bytes "${mb}M" --max_bytes "${mb}M" --iters "$iters" --warmup 2 --latency_iters 0 \
      --dist gaussian:0.02 --json 2>"$OUT/chain-$name-r$round.err" |
      sed "s/^{/{\"tls_name\":\"$name\",\"round\":$round,/" | grep '^{' >>"$summary" ||
      echo "sendrecv chain over $name: failed (rc $?): $(tail -c 300 "$OUT/chain-$name-r$round.err")"
  fi
  order=("${settings[@]}")
  if ((round % 2 == 0)); then
    order=()
    for ((i = ${#settings[@]} - 1; i >= 0; i--)); do order+=("${settings[i]}"); done
  fi
  for setting in "${order[@]}"; do
    if [[ -z $setting ]]; then run_collectives "$name"; else run_collectives "$name" "${setting%%:*}" "${setting#*:}"; fi
  done
done
done

python3 - "$summary" "$ranks" <<'PY'
import collections, json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
knobs = ("lanes", "wakeups", "slots", "pblock", "spin", "fwd", "hold", "pool", "tblock", "minblock")  # SWEEP's reruns
# One row per case and mode: the median over the rounds (the sum of #wrong).
def case_key(r):
    return tuple(sorted((k, str(v)) for k, v in r.items() if k in ("bench", "ranks", "tls_name", "compress", "pairs", "pattern") + knobs))
groups = collections.OrderedDict()
for r in runs:
    groups.setdefault(case_key(r), []).append(r)
all_rows = []
for same in groups.values():
    row = dict(same[0])
    for field in ("time_us", "busbw_GBps", "algbw_GBps", "ratio"):
        if field in row:
            row[field] = statistics.median(x[field] for x in same)
    if "wrong" in row:
        row["wrong"] = sum(x["wrong"] for x in same)
    all_rows.append(row)
rows = [r for r in all_rows if not any(k in r for k in knobs)]
ranks = int(sys.argv[2])
perf = {(r["tls_name"], r["pairs"]): r["busbw_GBps"] for r in rows if r["bench"] == "ucx_perftest"}
print(f"{'op':13} {'ranks':>5} {'tls':4} {'mode':5} {'time(ms)':>9} {'busbw':>8} {'ratio':>6} {'vs off':>7} {'#wrong':>6}")
for r in rows:
    if r["bench"] in ("ucx_perftest", "sendrecv"):
        continue
    # A case whose off run failed has no base: its other rows print without "vs off".
    base = next((x for x in rows if x.get("bench") == r["bench"] and x.get("ranks") == r["ranks"]
                 and x["tls_name"] == r["tls_name"] and x.get("compress") == "off"), None)
    vs_off = f"{base['time_us'] / r['time_us']:6.2f}x" if base else f"{'-':>7}"
    print(f"{r['bench']:13} {r['ranks']:5} {r['tls_name']:4} {r['compress']:5} {r['time_us'] / 1e3:9.1f} "
          f"{r['busbw_GBps']:8.3f} {r['ratio']:6.3f} {vs_off} {r['wrong']:6}")
for (name, pairs), bw in sorted(perf.items()):
    print(f"ucx_perftest tag_bw 256 MB over {name}, {pairs} pair(s) at once: {bw:.3f} GB/s per pair")
links = {"shift": "the ring's links", "chain": "the broadcast chain's links"}
for r in rows:
    if r["bench"] == "sendrecv":
        print(f"sendrecv {r['pattern']}, {r['ranks']} ranks over {r['tls_name']}, compression {r['compress']} "
              f"({links[r['pattern']]}, no dependencies): {r['algbw_GBps']:.3f} GB/s per link"
              + (f", {r['wrong']} WRONG" if r.get("wrong") else ""))
for name in sorted({n for n, _ in perf}):
    off = [r for r in rows if r["bench"] == "allreduce" and r["tls_name"] == name and r.get("compress") == "off"]
    for pairs in sorted(p for n, p in perf if n == name):
        bw = perf[(name, pairs)]
        share = f"{100 * off[0]['busbw_GBps'] / bw:.0f} %" if off and bw else "-"
        print(f"uncompressed allreduce busbw over {name} is {share} of ucx_perftest with {pairs} pair(s) at once")
for name in sorted({n for n, _ in perf}):
    b = {r["ranks"]: r["time_us"] for r in rows if r["bench"] == "broadcast" and r["tls_name"] == name and r["compress"] == "on"}
    if ranks in b and 2 in b:
        print(f"broadcast over {name}, compressed: {ranks - 1} receivers take {b[ranks] / b[2]:.2f}x the time of one")
    for mode in ("off", "on"):
        chain = [r for r in rows if r["bench"] == "sendrecv" and r.get("pattern") == "chain" and r["tls_name"] == name
                 and r["compress"] == mode]
        cast = [r for r in rows if r["bench"] == "broadcast" and r["tls_name"] == name and r["compress"] == mode
                and r["ranks"] == ranks]
        if chain and cast:
            print(f"broadcast over {name}, compression {mode}: {ranks - 1} receivers take "
                  f"{cast[0]['time_us'] / chain[0]['time_us']:.2f}x the time of the chain's links alone")
# Per setting of each knob (SWEEP): each row against the main run's row of the same case and
# mode, and against the same setting's uncompressed row.
def same_case(x, r):
    return x["bench"] == r["bench"] and x["ranks"] == r["ranks"] and x["tls_name"] == r["tls_name"]
for knob in knobs:
    knob_rows = [r for r in all_rows if knob in r]
    for r in knob_rows:
        main = next((x for x in rows if same_case(x, r) and x.get("compress") == r["compress"]), None)
        off = next((x for x in knob_rows if x[knob] == r[knob] and same_case(x, r) and x["compress"] == "off"), None)
        against = f", {main['time_us'] / r['time_us']:.2f}x the default" if main else ""
        vs_off = f", {off['time_us'] / r['time_us']:.2f}x off" if off and r["compress"] != "off" else ""
        print(f"{knob} {r[knob]}: {r['bench']:13} {r['ranks']:5} {r['tls_name']:4} {r['compress']:5} {r['time_us'] / 1e3:9.1f} ms "
              f"{r['busbw_GBps']:8.3f} GB/s{against}{vs_off}, {r['wrong']} wrong")
    for value in sorted({r[knob] for r in knob_rows}):
        for name in sorted({n for n, _ in perf}):
            off = [r for r in knob_rows if r[knob] == value and r["bench"] == "allreduce" and r["tls_name"] == name
                   and r["compress"] == "off"]
            bw = perf.get((name, ranks))
            if off and bw:
                print(f"{knob} {value}: uncompressed allreduce busbw over {name} is {100 * off[0]['busbw_GBps'] / bw:.0f} % "
                      f"of ucx_perftest with {ranks} pairs at once")
            for mode in ("off", "on"):
                b = {r["ranks"]: r["time_us"] for r in knob_rows
                     if r[knob] == value and r["bench"] == "broadcast" and r["tls_name"] == name and r["compress"] == mode}
                if ranks in b and 2 in b:
                    print(f"{knob} {value}: broadcast over {name}, compression {mode}: {ranks - 1} receivers take "
                          f"{b[ranks] / b[2]:.2f}x the time of one")
# Each round's on / off (and auto / off) per case: how far the machine's drift moves a ratio.
rounds = sorted({r.get("round", 1) for r in runs})
if len(rounds) > 1:
    for key, same in groups.items():
        r = same[0]
        if r["bench"] in ("ucx_perftest", "sendrecv") or r.get("compress") == "off":
            continue
        setting = next((f"{k} {r[k]}" for k in knobs if k in r), "defaults")
        ratios = []
        for k in rounds:
            mode = next((x for x in same if x.get("round") == k), None)
            off = next((x for x in runs if x.get("round") == k and case_key(x) == case_key({**r, "compress": "off"})), None)
            ratios.append(f"{off['time_us'] / mode['time_us']:.2f}x" if mode and off else "-")
        print(f"{setting}: {r['bench']} {r['ranks']} ranks {r['tls_name']} {r['compress']} / off by round: {', '.join(ratios)}")
PY
