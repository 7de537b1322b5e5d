#!/usr/bin/env python3
"""Renders `ucclzip-bench codec --json` lines as a Markdown table (for benchmarks/RESULTS.md).

    benchmarks/codec_table.py codec.jsonl [lanes.jsonl]
"""
import json
import sys


def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.startswith("{")]


def size(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}B"
    return f"{n} B"


def main():
    print("| dtype | dist | size | ratio | bound | ratio/bound | compress µs | decompress µs | compress GB/s | decompress GB/s | round trip |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows(sys.argv[1]):
        print(f"| {r['dtype']} | {r['dist']} | {size(r['bytes'])} | {r['ratio']:.4f} | {r['bound_ratio']:.4f} | "
              f"{r['ratio'] / r['bound_ratio']:.4f} | {r['compress_us']:.1f} | {r['decompress_us']:.1f} | "
              f"{r['compress_gbps']:.1f} | {r['decompress_gbps']:.1f} | {'ok' if r['roundtrip_ok'] else 'FAILED'} |")
    if len(sys.argv) > 2:
        print("\n| lane symbols | size | ratio | compress µs | decompress µs |")
        print("|---:|---:|---:|---:|---:|")
        for r in rows(sys.argv[2]):
            print(f"| {r['lane_symbols']} | {size(r['bytes'])} | {r['ratio']:.4f} | {r['compress_us']:.1f} | {r['decompress_us']:.1f} |")


if __name__ == "__main__":
    main()
