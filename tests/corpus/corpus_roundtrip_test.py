#!/usr/bin/env python3
"""Real weights through the CPU codec: builds a sample of the corpus (scripts/make-corpus
--sample) and runs `ucclzip-bench codec --device cpu --input` on every type's file. Each must
round-trip bit for bit and compress to at least the ratio below, a margin under what v1 reaches
(benchmarks/RESULTS.md), so that a codec that stops compressing real data fails here.
Exits 77 (skipped, for ctest) with the reason when the corpus cannot be built: the weights
package or a Python module is not installed (scripts/install-deps installs them).

    corpus_roundtrip_test.py BENCH MAKE_CORPUS WORK_DIR
"""
import json
import subprocess
import sys

SKIP = 77
MISSING_INPUT = 3  # scripts/make-corpus: an input is missing
SAMPLE = "32K"  # elements of every tensor
MIN_RATIO = {"fp32": 1.12, "bf16": 1.33, "fp16": 1.06, "fp8e4m3": 1.10, "fp8e5m2": 1.29}


def main():
    bench, make_corpus, work = sys.argv[1:4]
    made = subprocess.run([make_corpus, "--sample", SAMPLE, "--out", work], capture_output=True, text=True)
    if made.returncode == MISSING_INPUT:
        print(f"SKIP: no corpus: {made.stderr.strip()}")
        return SKIP
    if made.returncode != 0:
        print(made.stdout + made.stderr)
        return 1
    print(made.stdout.strip())
    manifest = json.load(open(f"{work}/manifest.json"))
    failures = 0
    for dtype, entry in manifest["files"].items():
        run = subprocess.run([bench, "codec", "--device", "cpu", "--dtype", dtype, "--input", f"{work}/{entry['file']}",
                              "--json", "--iters", "4"], capture_output=True, text=True)
        rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        if run.returncode != 0 or len(rows) != 1:
            print(f"{dtype}: ucclzip-bench failed (exit {run.returncode}): {run.stdout}{run.stderr}")
            failures += 1
            continue
        row = rows[0]
        ok = row["roundtrip_ok"] is True and row["bytes"] == entry["bytes"] and row["ratio"] >= MIN_RATIO[dtype]
        print(f"{dtype}: {row['bytes']} bytes, ratio {row['ratio']:.4f} (at least {MIN_RATIO[dtype]}), "
              f"exponent bound {row['bound_ratio']:.4f}, round trip {'ok' if row['roundtrip_ok'] else 'FAILED'}"
              f"{'' if ok else '  <-- FAILED'}")
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
