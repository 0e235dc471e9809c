#!/usr/bin/env python3
"""Turns broadphase-bench JSON (Google Benchmark's --benchmark_out) into the README's markdown
table: one row per scene and N, one column per method/update and thread count, median ms per
frame (the median over repetitions when the run has them, else the single figure)."""
import json
import statistics
import sys
from collections import defaultdict


def parse(name):
    # step/<scene>/<method>[/<update>]/n:<N>/threads:<T>[/real_time]
    parts = [p for p in name.split("/") if p != "real_time"]
    fields = {p.split(":")[0]: p.split(":")[1] for p in parts if ":" in p}
    plain = [p for p in parts if ":" not in p]
    scene, method = plain[1], plain[2]
    update = plain[3] if len(plain) > 3 else ""
    return scene, int(fields["n"]), (method + ("/" + update if update else "")), int(fields["threads"])


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: report.py results.json")
    with open(sys.argv[1]) as f:
        data = json.load(f)
    times = defaultdict(list)
    pairs = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        scene, n, column, threads = parse(b["run_name"] if "run_name" in b else b["name"])
        ms = b["real_time"] if b.get("time_unit") == "ms" else b["real_time"] / 1e6
        times[(scene, n, column, threads)].append(ms)
        pairs[(scene, n)] = int(b.get("pairs", 0))
    columns = sorted({(c, t) for (_, _, c, t) in times})
    rows = sorted({(s, n) for (s, n, _, _) in times})
    ctx = data.get("context", {})
    print(f"Machine: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs at "
          f"{ctx.get('mhz_per_cpu', '?')} MHz; median ms per frame (lower is better).\n")
    print("| scene | N | pairs | " + " | ".join(f"{c} {t}T" for c, t in columns) + " |")
    print("|---|---:|---:|" + "---:|" * len(columns))
    for s, n in rows:
        cells = []
        for c, t in columns:
            v = times.get((s, n, c, t))
            cells.append(f"{statistics.median(v):.3g}" if v else "")
        print(f"| {s} | {n:,} | {pairs.get((s, n), 0):,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
