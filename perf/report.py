#!/usr/bin/env python3
"""Turns broadphase-bench JSON (Google Benchmark's --benchmark_out) into the README's markdown
tables, median ms per frame (the median over repetitions when the run has them, else the single
figure):

- the trees: one row per scene, N and tree method (kdtree, octree), one column per update policy
  and thread count; when both trees ran, a `kdtree/octree` row under each pair gives the kd-tree's
  time divided by the octree's (above 1: the octree is faster), and a last row the geometric mean
  of those ratios per column;
- brute force (the oracle), when it ran: one row per scene and N, one column per thread count.

Usage: report.py results.json"""
import json
import math
import statistics
import sys
from collections import defaultdict

TREE_ORDER = ["kdtree", "octree"]
UPDATE_ORDER = ["auto", "rebuild", "refit"]
RATIO = ("kdtree", "octree")


def parse(name):
    # step/<scene>/<method>[/<update>]/n:<N>/threads:<T>[/real_time]
    parts = [p for p in name.split("/") if p != "real_time"]
    fields = {p.split(":")[0]: p.split(":")[1] for p in parts if ":" in p}
    plain = [p for p in parts if ":" not in p]
    scene, method = plain[1], plain[2]
    update = plain[3] if len(plain) > 3 else ""
    return scene, int(fields["n"]), method, update, int(fields["threads"])


def rank(order, value):
    return (order.index(value) if value in order else len(order), value)


def fmt(v):
    return f"{v:.3g}" if v is not None else ""


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__.strip())
    with open(sys.argv[1]) as f:
        data = json.load(f)
    times = defaultdict(list)  # (scene, n, method, update, threads) -> [ms]
    pairs = {}
    # Runs made with --benchmark_report_aggregates_only carry only aggregates: use their medians.
    only_aggregates = all(b.get("run_type") == "aggregate" for b in data["benchmarks"])
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            continue
        if b.get("run_type") == "aggregate" and not (
                only_aggregates and b.get("aggregate_name") == "median"):
            continue
        key = parse(b["run_name"] if "run_name" in b else b["name"])
        unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
        times[key].append(b["real_time"] * unit)
        pairs[key[:2]] = int(b.get("pairs", 0))
    median = {k: statistics.median(v) for k, v in times.items()}

    ctx = data.get("context", {})
    print(f"Machine: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs at "
          f"{ctx.get('mhz_per_cpu', '?')} MHz; median ms per frame (lower is better).\n")

    tree_keys = [k for k in median if k[3]]
    if tree_keys:
        methods = sorted({k[2] for k in tree_keys}, key=lambda m: rank(TREE_ORDER, m))
        columns = sorted({(k[3], k[4]) for k in tree_keys},
                         key=lambda c: (rank(UPDATE_ORDER, c[0]), c[1]))
        rows = sorted({k[:2] for k in tree_keys})
        ratio = all(m in methods for m in RATIO)
        ratios = defaultdict(list)  # column -> [kdtree ms / octree ms]
        print("| scene | N | pairs | method | " +
              " | ".join(f"{u} {t}T" for u, t in columns) + " |")
        print("|---|---:|---:|---|" + "---:|" * len(columns))
        for s, n in rows:
            head = f"| {s} | {n:,} | {pairs.get((s, n), 0):,} |"
            for m in methods:
                if any((s, n, m, u, t) in median for u, t in columns):
                    cells = [fmt(median.get((s, n, m, u, t))) for u, t in columns]
                    print(f"{head} {m} | " + " | ".join(cells) + " |")
            if ratio:
                cells = []
                for u, t in columns:
                    a, b = (median.get((s, n, m, u, t)) for m in RATIO)
                    if a and b:
                        ratios[(u, t)].append(a / b)
                        cells.append(f"{a / b:.2f}")
                    else:
                        cells.append("")
                if any(cells):
                    print(f"{head} {RATIO[0]}/{RATIO[1]} | " + " | ".join(cells) + " |")
        if ratio and ratios:
            cells = []
            for c in columns:
                r = ratios.get(c)
                cells.append(f"{math.exp(statistics.fmean(map(math.log, r))):.2f}" if r else "")
            print(f"| all | | | {RATIO[0]}/{RATIO[1]} (geomean) | " + " | ".join(cells) + " |")

    brute_keys = [k for k in median if not k[3]]
    if brute_keys:
        if tree_keys:
            print()
        for method in sorted({k[2] for k in brute_keys}):
            threads = sorted({k[4] for k in brute_keys if k[2] == method})
            print("| scene | N | pairs | " + " | ".join(f"{method} {t}T" for t in threads) + " |")
            print("|---|---:|---:|" + "---:|" * len(threads))
            for s, n in sorted({k[:2] for k in brute_keys if k[2] == method}):
                cells = [fmt(median.get((s, n, method, "", t))) for t in threads]
                print(f"| {s} | {n:,} | {pairs.get((s, n), 0):,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
