#!/usr/bin/env bash
# Codec benchmark on the GPU machine: the issue's target table (bf16 Gaussians at 1 MB, 16 MB and
# 256 MB), the ratio of every type and distribution against its entropy bound, and a sweep of
# the lane length that trades ratio for latency. Writes $OUT/codec.jsonl and prints tables.
set -euo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"
jsonl="$OUT/codec.jsonl"
: >"$jsonl"
: >"$OUT/lanes.jsonl"
run() { "$bench" codec --device gpu --json --iters 30 --warmup 5 "$@" | tee -a "$jsonl"; }

for dist in gaussian:1 gaussian:0.02; do
  for bytes in 1M 16M 256M; do run --dtype bf16 --dist "$dist" --bytes "$bytes"; done
done
# CODEC_BENCH=quick skips the all-types table.
[[ "${CODEC_BENCH:-full}" == quick ]] || for dtype in bf16 fp16 fp32 fp8e4m3 fp8e5m2; do
  for dist in gaussian:1 gaussian:0.02 laplace:0.01 uniform:1 student-t3:0.01 random-bytes special; do
    run --dtype "$dtype" --dist "$dist" --bytes 64M
  done
done
for bytes in 1M 16M 256M; do
  for lanes in 32 64 128 256 512 1024; do
    "$bench" codec --device gpu --json --iters 30 --warmup 5 --dtype bf16 --dist gaussian:1 --bytes "$bytes" \
      --lane_symbols "$lanes" | sed "s/}$/, \"lane_symbols\": $lanes}/" >>"$OUT/lanes.jsonl"
  done
done
python3 - "$jsonl" "$OUT/lanes.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(f"{'dtype':8} {'dist':14} {'bytes':>10} {'ratio':>7} {'bound':>7} {'of_bnd':>7} {'comp_us':>9} {'dec_us':>9} {'comp_GB/s':>10} {'dec_GB/s':>10} ok")
for r in rows:
    print(f"{r['dtype']:8} {r['dist']:14} {r['bytes']:>10} {r['ratio']:7.4f} {r['bound_ratio']:7.4f} {r['ratio']/r['bound_ratio']:7.4f} "
          f"{r['compress_us']:9.1f} {r['decompress_us']:9.1f} {r['compress_gbps']:10.1f} {r['decompress_gbps']:10.1f} {r['roundtrip_ok']}")
print("\nlane sweep (bf16 gaussian:1)")
for l in open(sys.argv[2]):
    if not l.startswith("{"): continue
    r = json.loads(l)
    print(f"lanes {r.get('lane_symbols', '?'):>5} {r['bytes']:>10} ratio {r['ratio']:.4f} comp {r['compress_us']:8.1f} us dec {r['decompress_us']:8.1f} us")
PY
