#!/usr/bin/env bash
# The shaped link (benchmarks/shaped-link: ranks in network namespaces joined by veth pairs and a
# bridge, `tc tbf` limiting each rank's NIC) on the GPU machine, for issue 10's "say which":
# first whether namespaces, veth, a bridge and tbf work there (iproute2 from the gathered .debs
# where the machine has none), written to $OUT/shaped-probe.txt; where they do, device send/recv
# of 256 MB bf16 with off, on and auto taking turns at each rate, into $OUT/shaped.jsonl.
#   BUILD  build folder (default: build)   SHAPED_RATES  rates (default: 1gbit 10gbit unshaped)
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the logs}
mkdir -p "$OUT"
probe="$OUT/shaped-probe.txt"
ns=uzprobe-$$
# Without ip and tc of its own, the machine gets Debian's from .gpu/iproute2 (scripts/gpu-gather),
# unpacked into a prefix of their own and run through wrappers that give them its libraries:
# those libraries are not put on every program's path, where they could shadow the machine's.
if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  iproute=/tmp/ucclzip-iproute2
  rm -rf "$iproute" && mkdir -p "$iproute/wrappers"
  for deb in .gpu/iproute2/*.deb; do [[ -f $deb ]] && dpkg -x "$deb" "$iproute"; done
  libs="$iproute/usr/lib/x86_64-linux-gnu:$iproute/lib/x86_64-linux-gnu"
  for tool in bin/ip sbin/tc; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' "$libs" "$iproute/$tool" \
      >"$iproute/wrappers/${tool#*/}"
  done
  chmod +x "$iproute"/wrappers/*
  export PATH="$iproute/wrappers:$PATH"
fi
{
  echo "uid $(id -u); ip: $(command -v ip || echo none); tc: $(command -v tc || echo none)"
  ip -V 2>&1
} >"$probe"
# The same steps as shaped-link's, on one namespace and one veth pair, each one's error kept.
works=1
for step in "ip netns add $ns" "ip -n $ns link add uzbridge type bridge" \
            "ip -n $ns link add uzp0 type veth peer name uzp1" \
            "ip -n $ns link set uzp0 master uzbridge" \
            "tc -n $ns qdisc add dev uzp1 root tbf rate 1gbit burst 1250000 latency 200ms"; do
  if out=$($step 2>&1); then echo "ok: $step" >>"$probe"; else echo "fails: $step: $out" >>"$probe"; works=0; break; fi
done
ip netns del "$ns" 2>/dev/null
if ((works == 0)); then
  echo "shaped link: not available on this machine ($(grep '^fails' "$probe"))"
  exit 0
fi
echo "shaped link: namespaces, veth, bridge and tbf work here"
BUILD="${BUILD:-build}" "$(dirname "$0")/../shaped-link" --rates "${SHAPED_RATES:-1gbit 10gbit unshaped}" \
  --out "$OUT/shaped.jsonl" -- sendrecv --memory device --compress off,on,auto --pattern oneway \
  --dist gaussian:0.02 --min_bytes 256M --max_bytes 256M --iters 5 --warmup 2 --latency_iters 0 --json >/dev/null
[[ -s $OUT/shaped.jsonl ]] || exit 0
python3 - "$OUT/shaped.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        print(f"{r['link']:9} {r['compress']:5} {r['algbw_GBps']:8.3f} GB/s  ratio {r['ratio']:.3f}  "
              f"vs off {r['vs_first']:.3f}x  wrong {r['wrong']}")
PY
