#!/usr/bin/env python3
"""Summarises benchmarks/gpu/multi-gpu.sh: nccl-tests-style tables of busbw for ucclzip (off, on,
auto; staged and direct), NCCL and ucclzip's NCCL API side by side, size by size; the ratios the
issue's targets name; where compression pays; and the codec's in-pipeline time per block beside
its isolated figures. Writes the joined rows and the verdicts as JSON lines.

  multi_gpu_summary.py RESULTS.jsonl CODEC.jsonl SUMMARY.jsonl   (several RESULTS files: comma-separated)
"""
import collections
import json
import sys

AUTO_TARGET = 0.97   # auto never loses: >= 0.97 x uncompressed
NCCL_TARGET = 0.8    # uncompressed ucclzip, direct path, >= 0.8 x NCCL's busbw ...
NCCL_TARGET_BYTES = 256 << 20  # ... at 256 MB and up ...
NCCL_TARGET_OPS = ("sendrecv", "allgather", "allreduce")  # ... on these
MODES = ("off", "on", "auto")


def series(row):
    """The column a result belongs to: ucclzip's path and mode, NCCL, or the shim's path and mode."""
    if row["impl"] == "nccl":
        return "nccl"
    prefix = "" if row["impl"] == "ucclzip" else "shim-"
    return f"{prefix}{row['ucx']}:{row['compress']}"


def column_order(names):
    order = [f"{p}{u}:{m}" for p in ("", "shim-") for u in ("staged", "direct") for m in MODES]
    order.insert(6, "nccl")
    return [c for c in order if c in names]


def chunk_bytes(row):
    """The bytes one rank's chunk holds: ring operations cut the size into one chunk per rank."""
    ring = row["bench"] in ("allreduce", "allgather", "reducescatter")
    return row["size"] // row["ranks"] if ring else row["size"]


def load(paths):
    rows = []
    for path in paths:
        for line in open(path):
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def main(results_paths, codec_path, summary_path):
    rows = load(results_paths.split(","))
    codec = {(r["dtype"], r["bytes"]): r for r in load([codec_path])}
    out = []
    cases = collections.defaultdict(dict)  # (bench, type, ranks) -> count -> series -> row
    for r in rows:
        cases[(r["bench"], r["type"], r["ranks"])].setdefault(r["count"], {})[series(r)] = r
        if r["impl"] == "ucclzip" and r.get("memory") == "device" and r.get("path") != r["ucx"]:
            print(f"warning: {r['bench']} {r['type']} {r['size']}: the {r['ucx']} build ran {r.get('path')}")

    wrong_rows, auto_ratios, nccl_ratios, pays, beats_nccl, codec_rows = [], [], [], [], [], []
    for (bench, dtype, ranks), by_count in sorted(cases.items()):
        columns = column_order({s for per in by_count.values() for s in per})
        paths = [p for p in ("staged", "direct") if f"{p}:off" in columns and f"{p}:auto" in columns]
        print(f"\n# {bench} {dtype}, {ranks} ranks: busbw (GB/s)")
        header = f"#{'size':>11} {'count':>12} " + " ".join(f"{c:>13}" for c in columns)
        header += " " + " ".join(f"{p[:2] + ' auto/off':>12}" for p in paths)
        header += f" {'di off/nccl':>11} {'#wrong':>7}"
        print(header)
        for count, per in sorted(by_count.items()):
            size = next(iter(per.values()))["size"]
            busbw = {s: per[s]["busbw_GBps"] for s in columns if s in per}
            wrong = sum(per[s]["wrong"] for s in per)
            auto = {p: busbw[f"{p}:auto"] / busbw[f"{p}:off"] for p in paths
                    if f"{p}:auto" in busbw and busbw.get(f"{p}:off")}
            vs_nccl = busbw["direct:off"] / busbw["nccl"] if "direct:off" in busbw and busbw.get("nccl") else None
            line = f"{size:12} {count:12} " + " ".join(f"{busbw[c]:13.2f}" if c in busbw else f"{'-':>13}" for c in columns)
            line += " " + " ".join(f"{auto[p]:12.3f}" if p in auto else f"{'-':>12}" for p in paths)
            line += f" {vs_nccl:11.3f}" if vs_nccl is not None else f" {'-':>11}"
            print(line + f" {wrong:7}")
            case = {"bench": bench, "type": dtype, "ranks": ranks, "size": size, "count": count}
            for s in per:
                if per[s]["wrong"]:
                    wrong_rows.append(dict(case, series=s, wrong=per[s]["wrong"]))
            for p, ratio in auto.items():
                auto_ratios.append(dict(case, ucx=p, auto_vs_off=round(ratio, 4)))
            if vs_nccl is not None and bench in NCCL_TARGET_OPS and size >= NCCL_TARGET_BYTES:
                nccl_ratios.append(dict(case, direct_off_vs_nccl=round(vs_nccl, 4)))
            for p in ("staged", "direct"):
                best = max((m for m in ("on", "auto") if f"{p}:{m}" in busbw), key=lambda m: busbw[f"{p}:{m}"], default=None)
                compressed = best and per[f"{p}:{best}"].get("ratio", 1) > 1.01  # auto may have sent plain bytes
                if compressed and busbw.get(f"{p}:off") and busbw[f"{p}:{best}"] > busbw[f"{p}:off"]:
                    pays.append(dict(case, ucx=p, mode=best, busbw=busbw[f"{p}:{best}"], off=busbw[f"{p}:off"],
                                     ratio=per[f"{p}:{best}"].get("ratio")))
                if best and busbw.get("nccl") and busbw[f"{p}:{best}"] > busbw["nccl"]:
                    beats_nccl.append(dict(case, ucx=p, mode=best, busbw=busbw[f"{p}:{best}"], nccl=busbw["nccl"]))
            for p in ("staged", "direct"):
                r = per.get(f"{p}:on")
                if r is None or not r.get("codec_block_us") or chunk_bytes(r) < r["pipeline_block"]:
                    continue
                alone = codec.get((dtype, r["pipeline_block"]))
                codec_rows.append(dict(case, ucx=p, block=r["pipeline_block"], in_pipeline_us=r["codec_block_us"],
                                       encode_us=alone and alone["compress_us"], decode_us=alone and alone["decompress_us"]))
            out.append(dict(case, busbw=busbw, time_us={s: per[s]["time_us"] for s in per},
                            wrong={s: per[s]["wrong"] for s in per}, auto_vs_off=auto, direct_off_vs_nccl=vs_nccl,
                            codec_block_us={p: per[f"{p}:on"].get("codec_block_us") for p in ("staged", "direct")
                                            if f"{p}:on" in per}))

    print("\n# Targets")
    verdicts = []

    def verdict(name, met, detail):
        word = "not measured" if met is None else ("met" if met else "NOT met")
        print(f"- {name}: {word}; {detail}")
        verdicts.append({"target": name, "met": met, "detail": detail})

    results = sum(len(per) for by_count in cases.values() for per in by_count.values())
    verdict("#wrong = 0 everywhere", (not wrong_rows) if results else None,
            f"{results} results, {len(wrong_rows)} with wrong elements or bytes"
            + "".join(f"\n    {w}" for w in wrong_rows))
    worst = min(auto_ratios, key=lambda r: r["auto_vs_off"], default=None)
    failing = [r for r in auto_ratios if r["auto_vs_off"] < AUTO_TARGET]
    verdict(f"auto / off >= {AUTO_TARGET} on every operation and size", (not failing) if auto_ratios else None,
            f"{len(auto_ratios)} cases, worst {worst}" + "".join(f"\n    {r}" for r in failing))
    low = [r for r in nccl_ratios if r["direct_off_vs_nccl"] < NCCL_TARGET]
    verdict(f"direct off / NCCL >= {NCCL_TARGET} on {', '.join(NCCL_TARGET_OPS)} at >= 256 MB",
            (not low) if nccl_ratios else None, "".join(f"\n    {r}" for r in nccl_ratios) or "no direct path or NCCL rows")
    print("\n# Where compression pays (the better of on and auto, with a wire ratio above 1.01, above off)")
    for r in pays:
        print(f"  {r['bench']} {r['type']} {r['size']} {r['ucx']}: {r['mode']} {r['busbw']:.2f} vs off {r['off']:.2f} GB/s "
              f"({r['busbw'] / r['off']:.2f}x, wire ratio {r['ratio']})")
    if not pays:
        print("  nowhere")
    print("# Compressed ucclzip above NCCL's busbw (stretch: allgather or broadcast over NVLink)")
    for r in beats_nccl:
        print(f"  {r['bench']} {r['type']} {r['size']} {r['ucx']}: {r['mode']} {r['busbw']:.2f} vs NCCL {r['nccl']:.2f} GB/s")
    if not beats_nccl:
        print("  nowhere")
    print("\n# Codec per block in the pipeline (compress on, full blocks; codec time launch to done over the frames"
          " sent: with 2 ranks one block's encode + decode, + its reduction in allreduce, reducescatter and reduce)"
          " beside the codec alone on one GPU (CUDA events)")
    print(f"{'op':14} {'type':5} {'size':>11} {'ucx':7} {'block':>9} {'pipeline us':>12} {'alone enc+dec us':>17} {'x':>6}")
    for r in codec_rows:
        alone = r["encode_us"] + r["decode_us"] if r["encode_us"] is not None else None
        print(f"{r['bench']:14} {r['type']:5} {r['size']:11} {r['ucx']:7} {r['block']:9} {r['in_pipeline_us']:12.1f} "
              + (f"{alone:17.1f} {r['in_pipeline_us'] / alone:6.2f}" if alone else f"{'-':>17} {'-':>6}"))
    with open(summary_path, "w") as f:
        for row in out:
            f.write(json.dumps(row) + "\n")
        for v in verdicts:
            f.write(json.dumps(v) + "\n")
        for r in codec_rows + [dict(r, where_compression_pays=True) for r in pays]:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
