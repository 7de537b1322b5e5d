#!/usr/bin/env bash
# Codec benchmark on the GPU machine: the issue's target table (bf16 Gaussians at 1 MB, 16 MB and
# 256 MB), the ratio of every type and distribution against its entropy bound, and a sweep of
# the lane length that trades ratio for latency. Writes $OUT/codec.jsonl and prints tables.
# CODEC_BENCH=nvcomp instead measures ucclzip and nvCOMP's batched ANS (64 KiB and 1 MiB chunks)
# side by side, on Gaussians and on the corpus in $CORPUS (scripts/make-corpus; scripts/gpu-run
# builds it from what scripts/gpu-gather --corpus exported), and writes $OUT/nvcomp.jsonl.
set -euo pipefail
bench="${BUILD:-build}/benchmarks/ucclzip-bench"

if [[ "${CODEC_BENCH:-full}" == nvcomp ]]; then
  jsonl="$OUT/nvcomp.jsonl"
  : >"$jsonl"
  vs() { "$bench" codec --device gpu --json --iters 30 --warmup 5 --vs nvcomp --nvcomp_chunk 64K,1M "$@" >>"$jsonl"; }
  [[ -n "${CORPUS:-}" ]] || echo "no corpus (\$CORPUS unset): Gaussians only"
  for bytes in 1M 16M 256M; do
    vs --dtype bf16 --dist gaussian:0.02 --bytes "$bytes"
    vs --dtype fp32 --dist gaussian:1 --bytes "$bytes"
    vs --dtype fp16 --dist gaussian:0.02 --bytes "$bytes"
    if [[ -n "${CORPUS:-}" ]]; then
      for dtype in bf16 fp16 fp32; do vs --dtype "$dtype" --input "$CORPUS/$dtype.bin" --bytes "$bytes"; done
    fi
  done
  if [[ -n "${CORPUS:-}" ]]; then
    for dtype in fp8e4m3 fp8e5m2; do vs --dtype "$dtype" --input "$CORPUS/$dtype.bin" --bytes 16M; done
  fi
  python3 - "$jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
# comp_us, dec_us: one call at a time (launches included); *_strm: calls back to back (GpuTiming).
print(f"{'input':22} {'dtype':8} {'bytes':>10} {'codec':16} {'ratio':>7} {'comp_us':>9} {'dec_us':>9} {'comp_strm':>9} {'dec_strm':>9} {'comp_GB/s':>10} {'dec_GB/s':>10} ok")
for r in rows:
    source = r["dist"].rsplit("/", 1)[-1]
    print(f"{source:22} {r['dtype']:8} {r['bytes']:>10} {r['codec']:16} {r['ratio']:7.4f} {r['compress_us']:9.1f} "
          f"{r['decompress_us']:9.1f} {r['compress_streamed_us']:9.1f} {r['decompress_streamed_us']:9.1f} "
          f"{r['compress_gbps']:10.1f} {r['decompress_gbps']:10.1f} {r['roundtrip_ok']}")
PY
  exit 0
fi
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
# The CPU codec (host buffers) on this machine's cores: 1 to 8 threads on one 64 MB frame (the
# frame is the same bytes whatever the count).
: >"$OUT/cpu-threads.jsonl"
for threads in 1 2 4 8; do
  "$bench" codec --device cpu --json --iters 10 --warmup 2 --threads "$threads" --dtype bf16 --dist gaussian:0.02 \
    --bytes 64M | sed "s/}$/, \"threads\": $threads}/" >>"$OUT/cpu-threads.jsonl"
done
python3 - "$jsonl" "$OUT/lanes.jsonl" "$OUT/cpu-threads.jsonl" <<'PY'
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
print("\nCPU codec threads (bf16 gaussian:0.02, 64 MB)")
for l in open(sys.argv[3]):
    if not l.startswith("{"): continue
    r = json.loads(l)
    print(f"threads {r['threads']:>2} ratio {r['ratio']:.4f} comp {r['compress_gbps']:6.2f} GB/s dec {r['decompress_gbps']:6.2f} GB/s {r['roundtrip_ok']}")
PY
