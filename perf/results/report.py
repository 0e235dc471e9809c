#!/usr/bin/env python3
"""Turns broadphase-bench JSON (Google Benchmark's --benchmark_out) into markdown tables and SVG
plots. Python 3 standard library only.

Usage: report.py [options] results.json [more.json ...]
       report.py --regenerate

Reads the benchmarks named step/<scene>/<engine>[/<update>]/n:<N>/threads:<T>[/real_time] (the
`run_name` when there is one). Ours are `kdtree` and `octree` (update auto, rebuild or refit) and
`brute`; any other engine is a peer library (bullet-dbvt, bullet-sap, cgal, fcl, box2d, ...).
Every figure is a median: over the repetitions when a file has them, else the file's `median`
aggregate. Files are merged in order, a later file's figures replacing an earlier one's for the
same scene, N, engine, update and thread count, so that a peers run or a thread sweep can be laid
over the main run. Benchmarks that report an error are skipped (and named on stderr).

Markdown (stdout, --markdown FILE, or between the markers in --into FILE):
  engines  one row per scene and N: our best method at the highest thread count (which tree and
           update policy, or brute force where it ran), our best step/<scene>_rest/ case there
           (only-moved updates on, in a scene that stands still), each peer's ms, the speed-up
           over the best peer; when the trees ran with more than one thread, the same at 1
           thread (the peers are single-threaded)
  methods  each tree, update policy and thread count side by side, kdtree/octree ratios (with
           more than two thread counts only the lowest and highest, unless --all-threads);
           brute force
  phases   update / search / output ms of our methods at each scene's largest N, most threads
  threads  ms at each thread count and speed-up over 1 thread, at the largest N that has two or
           more thread counts
  floors   (--floors, alone) the project's speed targets at 2 threads, each met or not, with the
           cross-core round trip (perf/common/machine.h) its case began with
  still    (--still, alone) the worlds that mostly stand still
  queries  (--queries, alone) spatial query throughput
  summary  (--summary, alone) the README's table: each --summary-scene (default moving,moving2d)
           at every N, each tree at its best update policy at the most threads, the fastest peer,
           the speed-up over it at the most threads and at 1 thread
Plots (--plots DIR), for each --plot-scene (default moving,moving2d; the first one's files have
no suffix, the others' end in _<scene>):
  ms_vs_n[_<scene>].svg             ms per frame vs N, log-log: each tree at its best update
                                    policy per N, at the most threads that ran at two or more
                                    N (so a sweep at one N does not break the line); each peer
  speedup_vs_threads[_<scene>].svg  speed-up vs threads at the largest N, one line per method and
                                    update policy, linear scaling dashed

--into FILE (or its old name --readme FILE) replaces what lies between <!-- perf:begin --> and
<!-- perf:end --> in FILE (with --section NAME, <!-- perf:NAME:begin --> and
<!-- perf:NAME:end -->) with the markdown: the machine (from the JSON context), the data files,
the command, links to the plots written in the same run (paths relative to FILE), then the
tables. The text around the markers is kept as it is.

--regenerate (no files) writes every section of perf/RESULTS.md and the summary in README.md
from the committed JSON in perf/results/, and the plots beside it: it runs this script once per
section with the command listed in REGENERATE below, which is the command each section then
names under "Made by". Run it from anywhere; paths are the repository root's.

Exit status: 0 done; 1 an input unreadable or nothing to report; 2 bad usage, or --into markers
missing (then nothing is written, plots included).

Example (from the repository root):
  python3 perf/results/report.py --plots perf/results --into perf/RESULTS.md \\
      perf/results/bench-standard.json perf/results/bench-threads.json"""
import argparse
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
from collections import defaultdict, namedtuple
from xml.sax.saxutils import escape

TREES = ("kdtree", "octree")
OURS = TREES + ("brute",)
# Engine names in benchmark names as the tables show them: the suite names brute force by the
# library's name for it (broadphase_method_name, "brute_force") since the one list of methods;
# the files committed before say "brute".
ENGINE_ALIASES = {"brute_force": "brute"}
UPDATE_ORDER = ("auto", "rebuild", "refit")
PEER_ORDER = ("bullet-dbvt", "bullet-sap", "cgal", "fcl", "box2d")
RATIO = ("kdtree", "octree")
PHASES = ("update_ms", "search_ms", "output_ms")
COUNTERS = ("pairs",) + PHASES + ("items_per_second", "rebuilds_per_frame", "round_trip_ns")
UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
NAME_FLAGS = {"real_time", "process_time", "manual_time"}
AGGREGATE_SUFFIX = re.compile(r"_(mean|median|stddev|cv|min|max)$")
STANDARD_CONTEXT = {"date", "host_name", "executable", "num_cpus", "mhz_per_cpu",
                    "cpu_scaling_enabled", "aslr_enabled", "caches", "load_avg",
                    "library_build_type", "library_version", "json_schema_version"}
BEGIN, END = "<!-- perf:begin -->", "<!-- perf:end -->"
REST_SUFFIX = "_rest"


def markers(section):
    """The README markers of a section: perf:begin / perf:end, or perf:<section>:begin / end."""
    if not section:
        return BEGIN, END
    return f"<!-- perf:{section}:begin -->", f"<!-- perf:{section}:end -->"

Key = namedtuple("Key", "scene n engine update threads")


def warn(message):
    print(f"report.py: {message}", file=sys.stderr)


def rank(order, value):
    return (order.index(value) if value in order else len(order), value)


def method_rank(engine, update=""):
    return (rank(OURS, engine), rank(UPDATE_ORDER, update))


def label(engine, update):
    return f"{engine}/{update}" if update else engine


def fmt(v):
    """ms, three significant figures (no exponents)."""
    if v is None:
        return ""
    if v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def fmt_x(v):
    if v is None:
        return ""
    return f"{v:.2f}x" if v < 10 else f"{v:.1f}x" if v < 100 else f"{v:,.0f}x"


def geomean(values):
    return math.exp(statistics.fmean(map(math.log, values)))


# ---------------------------------------------------------------------------------------------
# Reading


def this_command():
    """The command line that made a section, as it is written under the section."""
    return "python3 perf/results/report.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def parse_name(name):
    """step/<scene>/<engine>[/<update>]/n:<N>/threads:<T>[/flags] -> Key, or None."""
    parts = [ENGINE_ALIASES.get(p, p) for p in name.split("/") if p and p not in NAME_FLAGS]
    if len(parts) < 4 or parts[0] != "step":
        return None
    fields, plain = {}, []
    for p in parts[1:]:
        if ":" in p:
            k, _, v = p.partition(":")
            fields.setdefault(k, v)
        else:
            plain.append(p)
    if len(plain) not in (2, 3) or "n" not in fields:
        return None
    try:
        n, threads = int(float(fields["n"])), int(fields.get("threads", "1"))
    except ValueError:
        return None
    return Key(plain[0], n, plain[1], plain[2] if len(plain) == 3 else "", threads)


def load(path):
    """-> ({Key: {metric: median}}, context). metric "ms" is the real time per frame."""
    try:
        with open(path) as f:
            data = json.load(f)
        benchmarks = data["benchmarks"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"report.py: {path}: cannot read Google Benchmark JSON ({e})")
    runs = defaultdict(lambda: defaultdict(list))  # Key -> metric -> [value per repetition]
    medians = {}  # Key -> {metric: value}, from the `median` aggregates
    errors, unknown = [], set()
    for b in benchmarks:
        run_type = b.get("run_type", "iteration")
        name = b.get("run_name") or (AGGREGATE_SUFFIX.sub("", b.get("name", ""))
                                     if run_type == "aggregate" else b.get("name", ""))
        if b.get("error_occurred"):
            errors.append(f"{name}: {b.get('error_message', 'error')}")
            continue
        key = parse_name(name)
        if key is None:
            unknown.add(name)
            continue
        if run_type == "aggregate" and b.get("aggregate_name") != "median":
            continue
        try:
            record = {"ms": float(b["real_time"]) * UNITS[b.get("time_unit", "ns")]}
        except (KeyError, TypeError, ValueError):
            unknown.add(name)
            continue
        for c in COUNTERS:
            if isinstance(b.get(c), (int, float)):
                record[c] = float(b[c])
        if run_type == "aggregate":
            medians[key] = record
        else:
            for metric, value in record.items():
                runs[key][metric].append(value)
    for e in sorted(set(errors)):
        warn(f"{path}: skipped (error): {e}")
    for u in sorted(unknown):
        warn(f"{path}: skipped (not step/<scene>/<engine>/...): {u}")
    records = dict(medians)
    for key, metrics in runs.items():  # repetitions, where present, over the aggregate
        records[key] = {m: statistics.median(v) for m, v in metrics.items()}
    return records, data.get("context", {})


def only_moved_scene(scene):
    """The scene a step/<scene>_rest/... case belongs to (only-moved updates on, in a scene of
    the standard set whose objects stand still), else None. `_no_rest` is another variant."""
    if scene.endswith(REST_SUFFIX) and not scene.endswith("_no" + REST_SUFFIX):
        return scene[:-len(REST_SUFFIX)]
    return None


class Results:
    def __init__(self, paths):
        self.paths = paths
        self.rec = {}
        self.rest = {}  # the _rest cases, keyed by their plain scene: see only_moved_scene
        self.contexts = []
        for path in paths:
            records, context = load(path)
            if not records:
                warn(f"{path}: no step/ benchmark figures")
            for key, record in records.items():
                base = only_moved_scene(key.scene)
                if base is None:
                    self.rec[key] = record
                else:
                    self.rest[key._replace(scene=base)] = record
            self.contexts.append((path, context))

    def best_only_moved(self, scene, n, threads):
        """(Key, ms) of our fastest _rest case at `threads`, or None."""
        keys = [k for k in self.rest if k.scene == scene and k.n == n and k.threads == threads]
        if not keys:
            return None
        best = min(keys, key=lambda k: self.rest[k]["ms"])
        return best, self.rest[best]["ms"]

    def ms(self, key):
        r = self.rec.get(key)
        return r["ms"] if r else None

    def keys(self, scene=None, n=None, engines=None, peers=False):
        return [k for k in self.rec
                if (scene is None or k.scene == scene) and (n is None or k.n == n)
                and (engines is None or k.engine in engines)
                and (not peers or k.engine not in OURS)]

    def scenes(self):
        return sorted({k.scene for k in self.rec})

    def peers(self):
        labels = {label(k.engine, k.update) for k in self.keys(peers=True)}
        return sorted(labels, key=lambda p: rank(PEER_ORDER, p))

    def pairs(self, scene, n):
        values = [self.rec[k]["pairs"] for k in self.keys(scene, n, OURS) if "pairs" in self.rec[k]]
        values = values or [self.rec[k]["pairs"] for k in self.keys(scene, n)
                            if "pairs" in self.rec[k]]
        return int(round(statistics.median(values))) if values else None

    def max_threads(self, scene, n, engines=TREES):
        threads = [k.threads for k in self.keys(scene, n, engines)]
        return max(threads) if threads else None

    def best_ours(self, scene, n, threads=None):
        """(Key, ms) of our fastest method (a tree at an update policy, or brute force where it
        ran) at `threads` (default: the most the trees ran with)."""
        if threads is None:
            threads = self.max_threads(scene, n)
        keys = [k for k in self.keys(scene, n, OURS) if k.threads == threads]
        if not keys:
            return None
        best = min(keys, key=lambda k: self.ms(k))
        return best, self.ms(best)

    def peer_ms(self, scene, n, peer):
        keys = [k for k in self.keys(scene, n, peers=True) if label(k.engine, k.update) == peer]
        if not keys:
            return None
        single = [k for k in keys if k.threads == 1]
        return min(self.ms(k) for k in (single or keys))

    def thread_series(self, scene, engine, update):
        """(N, {threads: ms}) at the largest N with two or more thread counts, or None."""
        by_n = defaultdict(dict)
        for k in self.keys(scene, engines=(engine,)):
            if k.update == update:
                by_n[k.n][k.threads] = self.ms(k)
        ns = [n for n, t in by_n.items() if len(t) >= 2]
        return (max(ns), by_n[max(ns)]) if ns else None


# ---------------------------------------------------------------------------------------------
# Markdown


def table(header, align, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def engines_table(res):
    """-> (markdown lines, the sentence that explains them)."""
    rows = sorted({(k.scene, k.n) for k in res.keys() if k.engine in TREES or k.engine not in OURS})
    if not rows:
        return [], ""
    peers = res.peers()
    tops = {r: res.max_threads(*r) for r in rows}
    top_set = {t for t in tops.values() if t is not None}
    single = len(top_set) == 1
    with_1t = bool(peers) and any(t and t > 1 and res.best_ours(s, n, 1)
                                  for (s, n), t in tops.items())
    ours_head = f"ours, best ({next(iter(top_set))}T)" if single else "ours, best (most threads)"
    if not top_set:
        ours_head = "ours"
    moved = bool(res.rest)
    header = ["scene", "N", "pairs", ours_head]
    align = ["---", "---:", "---:", "---:"]
    if moved:
        header.append(ours_head.replace("best", "only-moved updates"))
        align.append("---:")
    header += [f"{p} 1T" for p in peers]
    align += ["---:"] * len(peers)
    if peers:
        header.append("speed-up over best peer")
        align.append("---:")
    if with_1t:
        header += ["ours, best (1T)", "1T speed-up over best peer"]
        align += ["---:", "---:"]
    out = []
    for s, n in rows:
        pairs = res.pairs(s, n)
        cells = [s, f"{n:,}", f"{pairs:,}" if pairs is not None else ""]
        best = res.best_ours(s, n)
        if best:
            k, ms = best
            cells.append(f"{label(k.engine, k.update)} " + ("" if single else f"{k.threads}T ")
                         + fmt(ms))
        else:
            cells.append("")
        # As our users run a scene that stands still: with only-moved updates (the default).
        still = res.best_only_moved(s, n, best[0].threads) if best else None
        if moved:
            cells.append(f"{still[0].engine} {fmt(still[1])}" if still else "")
        peer_ms = {p: res.peer_ms(s, n, p) for p in peers}
        cells += [fmt(peer_ms[p]) for p in peers]
        present = {p: v for p, v in peer_ms.items() if v is not None}
        best_peer = min(present, key=present.get) if present else None

        def speedup(ours, moved_ours):
            if not (ours and best_peer):
                return ""
            name = f" ({best_peer})" if len(peers) > 1 else ""
            mine = min(ours[1], moved_ours[1]) if moved_ours else ours[1]
            return fmt_x(present[best_peer] / mine) + name

        if peers:
            cells.append(speedup(best, still))
        if with_1t:
            one, one_moved = res.best_ours(s, n, 1), res.best_only_moved(s, n, 1)
            cell = f"{label(one[0].engine, one[0].update)} {fmt(one[1])}" if one else ""
            if one and one_moved:
                cell += f"; only-moved {one_moved[0].engine} {fmt(one_moved[1])}"
            cells.append(cell)
            cells.append(speedup(one, one_moved))
        out.append(cells)
    note = ("Ours: the fastest of our methods (the kd-tree and the octree, each at its best update "
            "policy, and brute force where the suite runs it: N up to 1e4, and `dense`), at the "
            "most threads that ran.")
    if moved:
        note += (" In the scenes whose objects stand still, every object is pushed each frame "
                 "unchanged: `ours, best` times a full step of every object (only-moved updates "
                 "off), `only-moved updates` the same frames as our users run them by default "
                 "(`config.rest_share`: the unchanged objects rest, and a step costs the push, a "
                 "check of what changed and a pass over the last pairs), which is how bullet-dbvt, "
                 "bullet-sap and box2d run too: they query only the proxies that moved and keep "
                 "a pair cache.")
    if peers:
        note += (" Speed-up = the best peer's ms / ours (our faster figure of the two where a "
                 "scene has both)." if moved else " Speed-up = the best peer's ms / ours.")
    if with_1t:
        note += (" The peers are single-threaded, so the last two columns compare with our best "
                 "at 1 thread.")
    return table(header, align, out), note


def methods_table(res, all_threads):
    out = []
    tree_keys = res.keys(engines=TREES)
    if tree_keys:
        threads = sorted({k.threads for k in tree_keys})
        shown = set(threads) if all_threads or len(threads) <= 2 else {threads[0], threads[-1]}
        methods = sorted({k.engine for k in tree_keys}, key=lambda m: rank(TREES, m))
        columns = sorted({(k.update, k.threads) for k in tree_keys if k.threads in shown},
                         key=lambda c: (rank(UPDATE_ORDER, c[0]), c[1]))
        rows = sorted({k[:2] for k in tree_keys})
        with_ratio = all(m in methods for m in RATIO)
        ratios = defaultdict(list)  # column -> [kdtree ms / octree ms]
        body = []
        for s, n in rows:
            pairs = res.pairs(s, n)
            head = [s, f"{n:,}", f"{pairs:,}" if pairs is not None else ""]
            for m in methods:
                cells = [fmt(res.ms(Key(s, n, m, u, t))) for u, t in columns]
                if any(cells):
                    body.append(head + [m] + cells)
            if with_ratio:
                cells = []
                for u, t in columns:
                    a, b = (res.ms(Key(s, n, m, u, t)) for m in RATIO)
                    if a and b:
                        ratios[(u, t)].append(a / b)
                        cells.append(f"{a / b:.2f}")
                    else:
                        cells.append("")
                if any(cells):
                    body.append(head + [f"{RATIO[0]}/{RATIO[1]}"] + cells)
        if with_ratio and ratios:
            body.append(["all", "", "", f"{RATIO[0]}/{RATIO[1]} (geomean)"] +
                        [f"{geomean(ratios[c]):.2f}" if ratios.get(c) else "" for c in columns])
        out += table(["scene", "N", "pairs", "method"] + [f"{u} {t}T" for u, t in columns],
                     ["---", "---:", "---:", "---"] + ["---:"] * len(columns), body)
        if shown != set(threads):
            out += ["", f"(Thread counts {', '.join(map(str, threads))} ran; "
                        f"{threads[0]} and {threads[-1]} shown, the others under thread scaling.)"]
    others = [e for e in OURS if e not in TREES and res.keys(engines=(e,))]
    for engine in others:
        keys = res.keys(engines=(engine,))
        threads = sorted({k.threads for k in keys})
        body = []
        for s, n in sorted({k[:2] for k in keys}):
            pairs = res.pairs(s, n)
            cells = [fmt(res.ms(Key(s, n, engine, "", t))) for t in threads]
            body.append([s, f"{n:,}", f"{pairs:,}" if pairs is not None else ""] + cells)
        out += [""] if out else []
        out += table(["scene", "N", "pairs"] + [f"{engine} {t}T" for t in threads],
                     ["---", "---:", "---:"] + ["---:"] * len(threads), body)
    return out


def phases_table(res):
    body = []
    for s in res.scenes():
        ns = [k.n for k in res.keys(s, engines=TREES)] or [k.n for k in res.keys(s, engines=OURS)]
        if not ns:
            continue
        n = max(ns)
        t = res.max_threads(s, n, OURS)
        keys = sorted((k for k in res.keys(s, n, OURS) if k.threads == t),
                      key=lambda k: method_rank(k.engine, k.update))
        for k in keys:
            r = res.rec[k]
            phases = [r.get(p) for p in PHASES]
            rest = r["ms"] - sum(phases) if None not in phases else None
            body.append([s, f"{n:,}", str(t), label(k.engine, k.update), fmt(r["ms"])] +
                        [fmt(p) for p in phases] +
                        ["~0" if rest is not None and rest < 0.0005 * r["ms"] else fmt(rest)])
    if not body:
        return []
    return table(["scene", "N", "threads", "method", "frame ms", "update", "search", "output",
                  "other"], ["---", "---:", "---:", "---"] + ["---:"] * 5, body)


def threads_table(res):
    series = []
    for s in res.scenes():
        methods = sorted({(k.engine, k.update) for k in res.keys(s, engines=OURS)},
                         key=lambda m: method_rank(*m))
        for engine, update in methods:
            got = res.thread_series(s, engine, update)
            if got:
                series.append((s, label(engine, update), got[0], got[1]))
    if not series:
        return []
    threads = sorted({t for *_, by_t in series for t in by_t})
    body, lowest = [], False
    for s, m, n, by_t in series:
        base_t = 1 if 1 in by_t else min(by_t)
        lowest |= base_t != 1
        cells = []
        for t in threads:
            ms = by_t.get(t)
            if ms is None:
                cells.append("")
            elif t == base_t:
                cells.append(fmt(ms))
            else:
                cells.append(f"{fmt(ms)} ({fmt_x(by_t[base_t] / ms)})")
        top = max(by_t)
        efficiency = f"{100 * by_t[base_t] / by_t[top] / (top / base_t):.0f}%"
        body.append([s, f"{n:,}", m] + cells +
                    [efficiency + (f" ({top}T)" if top != threads[-1] else "")])
    out = table(["scene", "N", "method"] + [f"{t}T" for t in threads] + ["efficiency"],
                ["---", "---:", "---"] + ["---:"] * (len(threads) + 1), body)
    if lowest:
        out += ["", "(Where 1 thread did not run, speed-ups are over the lowest thread count.)"]
    return out


def machine_lines(res, base_dir):
    def describe(ctx):
        parts = [str(ctx.get("host_name", "?"))]
        if "num_cpus" in ctx:
            mhz = f" at {ctx['mhz_per_cpu']} MHz" if ctx.get("mhz_per_cpu") else ""
            parts.append(f"{ctx['num_cpus']} CPUs{mhz}")
        if "library_build_type" in ctx:
            parts.append(f"Google Benchmark library build {ctx['library_build_type']}")
        parts += [f"{k}={ctx[k]}" for k in sorted(ctx)
                  if k not in STANDARD_CONTEXT and isinstance(ctx[k], (str, int, float, bool))]
        return ", ".join(parts)

    described = [(rel(p, base_dir), describe(c), str(c.get("date", ""))[:10])
                 for p, c in res.contexts]
    files = ", ".join(f"[`{p}`]({p})" + (f" ({d})" if d else "") for p, _, d in described)
    machines = sorted({m for _, m, _ in described})
    if len(machines) == 1:
        lines = [f"Machine: {machines[0]}. Data: {files}."]
    else:
        lines = ["Machines and data:", ""] + [
            f"- [`{p}`]({p})" + (f" ({d})" if d else "") + f": {m}" for p, m, d in described]
    return lines + round_trip_lines(res)


def round_trip_lines(res):
    """The cross-core round trip measured as each case began (perf/common/machine.h), where recorded."""
    trips = sorted(r["round_trip_ns"] for r in res.rec.values() if r.get("round_trip_ns"))
    if not trips:
        return []
    return ["", f"Cross-core round trip as each case began (`round_trip_ns`, perf/common/machine.h): "
                f"median {trips[len(trips) // 2]:.0f} ns, from {trips[0]:.0f} to {trips[-1]:.0f} "
                f"over {len(trips)} cases. On a virtual machine it moves with where the host runs "
                f"the virtual CPUs, and two-thread figures move with it."]


def rel(path, base_dir):
    return os.path.relpath(os.path.abspath(path), base_dir).replace(os.sep, "/")


def markdown(res, args, images, base_dir):
    h = "#" * args.heading_level
    command = this_command()
    out = machine_lines(res, base_dir)
    out += ["", f"Median ms per frame (lower is better); a frame is pushing all positions and one "
                f"`broadphase_step`; nT = n worker threads. \"pairs\" is the last frame's count. "
                f"Made by `{command}`."]
    if images:
        for path, alt in images:
            out += ["", f"![{alt}]({rel(path, base_dir)})"]
    engines, engines_note = engines_table(res)
    sections = [
        ("Against other libraries" if res.peers() else "Best tree per scene and size",
         engines_note, engines),
        ("Per method",
         "Each tree, update policy and thread count; a `kdtree/octree` row is the kd-tree's time "
         "over the octree's (above 1: the octree is faster).",
         methods_table(res, args.all_threads)),
        ("Where the time goes",
         "Per frame at each scene's largest N and the most threads: the tree update, the pair "
         "search, the output of pairs, and the rest (pushing positions, bookkeeping). Each column "
         "is its own median, so they need not add up exactly.",
         phases_table(res)),
        ("Thread scaling",
         "At each method's largest N that ran at two or more thread counts: ms per frame "
         "(speed-up over 1 thread); efficiency = speed-up / threads at the most threads.",
         threads_table(res)),
    ]
    for title, note, lines in sections:
        if lines:
            out += ["", f"{h} {title}", "", note, ""] + lines
    return "\n".join(out) + "\n"



def summary_table(res, scenes):
    """The README's table: for each scene at every N, each tree at its best update policy at the
    most threads, the fastest peer at 1 thread, and the speed-up over it of our faster tree, at
    the most threads and at 1 thread. -> (lines, the thread count shown, or None if mixed)."""
    def best_tree(scene, n, engine, threads):
        keys = [k for k in res.keys(scene, n, (engine,)) if k.threads == threads]
        return min((res.ms(k) for k in keys), default=None)

    rows, tops = [], set()
    for scene in scenes:
        for n in sorted({k.n for k in res.keys(scene, engines=TREES)}):
            top = res.max_threads(scene, n)
            tops.add(top)
            trees = [best_tree(scene, n, e, top) for e in TREES]
            ones = [v for v in (best_tree(scene, n, e, 1) for e in TREES) if v is not None]
            present = {p: v for p in res.peers() if (v := res.peer_ms(scene, n, p)) is not None}
            peer = min(present, key=present.get) if present else None
            ours = min((v for v in trees if v is not None), default=None)
            pairs = res.pairs(scene, n)
            rows.append([scene, f"{n:,}", f"{pairs:,}" if pairs is not None else ""] +
                        [fmt(v) for v in trees] +
                        [f"{fmt(present[peer])} ({peer})" if peer else "-",
                         fmt_x(present[peer] / ours) if peer and ours else "-",
                         fmt_x(present[peer] / min(ones)) if peer and ones else "-"])
    if not rows:
        return [], None
    shown = next(iter(tops)) if len(tops) == 1 else None
    most = f"{shown}T" if shown else "most threads"
    return table(["scene", "N", "pairs"] + [f"{e}, {most}" for e in TREES] +
                 ["fastest peer, 1T", f"speed-up, {most}", "speed-up, 1T"],
                 ["---", "---:", "---:"] + ["---:"] * (len(TREES) + 3), rows), shown


def summary_markdown(res, scenes, base_dir):
    command = this_command()
    lines, shown = summary_table(res, scenes)
    if not lines:
        sys.exit(f"report.py: no step/ figures of our trees for {', '.join(scenes)}")
    hosts = []
    for _, ctx in res.contexts:
        host = str(ctx.get("host_name", "?"))
        if "num_cpus" in ctx:
            mhz = f" at {ctx['mhz_per_cpu']} MHz" if ctx.get("mhz_per_cpu") else ""
            host += f", {ctx['num_cpus']} CPUs{mhz}"
        if ctx.get("broadphase_simd"):
            host += f", {ctx['broadphase_simd']} kernels"
        if host not in hosts:
            hosts.append(host)
    files = ", ".join(f"[`{os.path.basename(p)}`]({rel(p, base_dir)})" for p in res.paths)
    threads = f"{shown} worker threads" if shown else "the most worker threads that ran"
    most = f"{shown} threads" if shown else "the most threads"
    peers = ", ".join(f"`{p}`" for p in res.peers())
    out = ["Median ms per frame (lower is better): a frame is pushing every position and one "
           f"`broadphase_step`. Our trees at {threads}, each at its faster update policy; the "
           f"peer libraries ({peers or 'none ran'}; single-threaded) at 1 thread, the fastest "
           "of them named; speed-up = the fastest peer's ms over our faster tree's, ours at "
           f"{most} and at 1 thread. \"pairs\" is the last frame's count. Machine: "
           f"{'; '.join(hosts)}. Data: {files}. Made by `{command}`.", ""]
    return "\n".join(out + lines) + "\n"


# The speed targets the project set itself (the floors: ms per frame, speed over the peers, the
# second thread's gain), each checked at two threads against one file's medians: (what, scene, N,
# kind, bound). "ms": our fastest method at most <bound> ms; "peer": at least <bound> times faster
# than the fastest peer library; "scale": our fastest method at 2 threads at least <bound> times
# faster than the same method at 1.
FLOORS = (("moving", 10_000, "ms", 0.3), ("moving", 100_000, "ms", 2.5),
          ("moving", 1_000_000, "ms", 25.0), ("moving", 1_000_000, "peer", 20.0),
          ("moving2d", 100_000, "ms", 2.5), ("mixed", 100_000, "ms", 15.0),
          ("dense", 2_000, "ms", 4.0), ("moving", 1_000_000, "scale", 1.8))


def floors_table(res):
    """One row per target that the file has the cases for: the figure, the bound, met or not,
    which method, and the cross-core round trip as its case began."""
    rows = []
    for scene, n, kind, bound in FLOORS:
        best = res.best_ours(scene, n, 2)
        if best is None:
            continue
        key, ms = best
        trip = res.rec[key].get("round_trip_ns")
        what, figure, detail = f"{scene}, N = {n:,}", None, label(key.engine, key.update)
        if kind == "ms":
            what += ", ms per frame"
            figure, met, shown, limit = ms, ms <= bound, fmt(ms), f"<= {fmt(bound)}"
        elif kind == "peer":
            peers = [(res.peer_ms(scene, n, p), p) for p in res.peers()]
            peers = [(m, p) for m, p in peers if m is not None]
            if not peers:
                continue
            peer_ms, peer = min(peers)
            figure = peer_ms / ms
            what += f", speed-up over the fastest peer ({peer}, {fmt(peer_ms)} ms)"
            met, shown, limit = figure >= bound, fmt_x(figure), f">= {fmt_x(bound)}"
        else:
            one = res.ms(Key(scene, n, key.engine, key.update, 1))
            if one is None:
                continue
            figure = one / ms
            what += f", 2 threads over 1 ({fmt(one)} -> {fmt(ms)} ms)"
            met, shown, limit = figure >= bound, fmt_x(figure), f">= {fmt_x(bound)}"
        rows.append([what, shown, limit, "yes" if met else "**no**", detail,
                     f"{trip:.0f}" if trip else "-"])
    if not rows:
        return []
    return table(["target (2 threads)", "measured", "floor", "met", "method", "round trip, ns"],
                 ["---", "---:", "---:", "---", "---", "---:"], rows)


def floors_markdown(res, base_dir):
    command = this_command()
    out = machine_lines(res, base_dir)
    out += ["", f"The project's speed targets (the floors) against this file's medians, at 2 "
                f"threads; \"round trip\" is the machine's cross-core round trip as that case "
                f"began. Made by `{command}`.", ""]
    return "\n".join(out + floors_table(res)) + "\n"


STILL = ("static_world", "static_world_all_in_tree", "static_world_movers_only", "sleeping",
         "sleeping_no_rest")


def still_table(res):
    """Worlds that mostly stand still (statics flagged, sleepers): static_world with its statics flagged, with
    every object in the tree, and with its movers alone; sleeping against moving at the same N
    (every object moving), where the files have it."""
    rows = []
    methods = sorted({(k.engine, k.update, k.threads) for k in res.rec if k.scene in STILL},
                     key=lambda m: (m[2], rank(TREES, m[0]), m[1]))
    for engine, update, threads in methods:
        def ms(scene):
            ks = [k for k in res.keys(scene, engines=(engine,))
                  if k.update == update and k.threads == threads]
            return (res.ms(ks[0]), ks[0].n) if ks else (None, None)
        flagged, n = ms("static_world")
        whole, _ = ms("static_world_all_in_tree")
        alone, _ = ms("static_world_movers_only")
        sleeping, sn = ms("sleeping")
        no_rest, _ = ms("sleeping_no_rest")
        moving = None
        if sn:
            ks = [k for k in res.keys("moving", sn, (engine,))
                  if k.update == update and k.threads == threads]
            moving = res.ms(ks[0]) if ks else None

        def ratio(a, b):
            return fmt_x(a / b) if a and b else "-"
        rows.append([f"{label(engine, update)}", str(threads), fmt(flagged) if flagged else "-",
                     fmt(whole) if whole else "-", fmt(alone) if alone else "-",
                     ratio(flagged, alone), ratio(whole, flagged),
                     fmt(sleeping) if sleeping else "-", fmt(no_rest) if no_rest else "-",
                     fmt(moving) if moving else "-",
                     f"{100 * sleeping / moving:.0f}%" if sleeping and moving else "-"])
    if not rows:
        return []
    return table(["method", "threads", "static_world", "all in tree", "movers only",
                  "static_world / movers only", "all in tree / static_world", "sleeping",
                  "sleeping, rest off", "moving (all move)", "sleeping / moving"],
                 ["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:",
                  "---:"],
                 rows)


def still_markdown(res, args, base_dir):
    command = this_command()
    out = machine_lines(res, base_dir)
    out += ["", "Median ms per frame. `static_world`: 1,000,000 static boxes and 10,000 moving "
                "ones (N = 1,010,000), the statics flagged static; `all in tree`: the same world "
                "with no flags and only-moved updates off (every object in the tree); `movers "
                "only`: a world holding only the 10,000 movers. `sleeping`: 1,000,000 boxes of "
                "which every 100th moves (only-moved updates on, the default); `sleeping, rest "
                "off`: the same with `config.rest_share = 0`; "
                "`moving`: the same N with every object moving. Only the objects that move are "
                f"pushed each frame. Made by `{command}`.", ""]
    return "\n".join(out + still_table(res)) + "\n"


QUERY_KINDS = ("box", "sphere", "ray", "closest", "nearest16")
QUERY_LABELS = {"box": "box (about 10 hits)", "sphere": "ball r = 2", "ray": "ray L/10, all hits",
                "closest": "ray L/10, closest", "nearest16": "16 nearest"}
QUERY_LABELS_2D = {"box": "2D box (about 3 hits)", "ray": "2D ray L/10, all hits",
                   "closest": "2D ray L/10, closest"}


def parse_query_name(name):
    """query/<kind>/<engine>[/2d]/n:<N>/<mode>/threads:<T>[/flags] ->
    (space, kind, engine, n, mode, threads), space "3d" (uniform) or "2d" (plane2d); or None."""
    parts = [ENGINE_ALIASES.get(p, p) for p in name.split("/") if p and p not in NAME_FLAGS]
    if len(parts) < 6 or parts[0] != "query":
        return None
    kind, engine, rest = parts[1], parts[2], parts[3:]
    space = "3d"
    if rest[0] == "2d":
        space, rest = "2d", rest[1:]
    try:
        n = int(float(rest[0].split(":")[1]))
        mode, threads = rest[1], int(rest[2].split(":")[1])
    except (IndexError, ValueError):
        return None
    return space, kind, engine, n, mode, threads


def queries_markdown(paths, base_dir):
    """Spatial queries: queries per second from query/<kind>/<engine>[/2d]/n:<N>/<mode>/
    threads:<T> medians, single and batched, the speed-up over brute force where it ran, and
    the peer libraries' single queries with our speed-up over the fastest of them. Files are
    merged in order, a later file's figures replacing an earlier one's (a peers run over the
    main run, say)."""
    rec, contexts = {}, []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        contexts.append((path, data.get("context", {})))
        for b in data.get("benchmarks", []):
            name = b.get("run_name", b.get("name", ""))
            if not name.startswith("query/") or b.get("error_occurred"):
                continue
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            key = parse_query_name(name)
            if key is None or "items_per_second" not in b:
                warn(f"{path}: skipped (not query/<kind>/<engine>/...): {name}")
                continue
            rec[key] = float(b["items_per_second"])
    most = max((k[5] for k in rec), default=1)
    has_peers = any(key[2] not in OURS for key in rec)

    class Ctx:
        pass
    res = Ctx()
    res.contexts = contexts
    res.rec = {}  # no step/ records: machine_lines then names no round trips
    command = this_command()
    out = machine_lines(res, base_dir)
    out += ["", "Queries per second (thousands; higher is better), medians, on `uniform` (boxes "
                "of half-extent 0.5-1, density 0.075 per unit volume). Each frame is 10,000 "
                "queries at uniform random places: `single` calls the single query 10,000 times "
                "on one thread; `batched` makes one batched call on the world's worker threads. "
                f"`x brute` is the batched figure at {most} threads over brute force's. "
                + ("The 2D rows run on `plane2d` (density 0.12 per unit area), the same queries "
                   "in the plane. " if any(key[0] == "2d" for key in rec) else "")
                + ("Peer libraries answer with their own query on their broadphase after one "
                   "frame, with the exact test in the callback (Bullet `aabbTest` and `rayTest`, "
                   "bullet-sap through its ray-cast accelerator, a btDbvtBroadphase; FCL "
                   "`collide` with a box object; Box2D `Query` and `RayCast`), one query at a "
                   "time on one thread, the results sorted as ours; every case checks its first "
                   "200 answers against ours. `x best peer` is our single figure over the "
                   "fastest peer's. " if has_peers else "")
                + f"Made by `{command}`.", ""]

    def k(v):
        return "-" if not v else f"{v / 1000:,.0f}" if v >= 10000 else f"{v / 1000:.2g}"

    rows = []
    for n in sorted({key[3] for key in rec}):
        for space in ("3d", "2d"):
            labels = QUERY_LABELS if space == "3d" else QUERY_LABELS_2D
            for kind in QUERY_KINDS:
                here = {key[2]: v for key, v in rec.items()
                        if key[:2] == (space, kind) and key[3] == n}
                if not here:
                    continue
                peers = sorted({e for e in here if e not in OURS}, key=lambda e: rank(PEER_ORDER, e))
                best = max(peers, key=lambda e: rec.get((space, kind, e, n, "single", 1)) or 0,
                           default=None)
                best_v = rec.get((space, kind, best, n, "single", 1)) if best else None
                brute = rec.get((space, kind, "brute", n, "batched", most))
                for engine in [e for e in OURS if e in here] + peers:
                    single = rec.get((space, kind, engine, n, "single", 1))
                    b1 = rec.get((space, kind, engine, n, "batched", 1))
                    bm = rec.get((space, kind, engine, n, "batched", most))
                    if single is None and b1 is None and bm is None:
                        continue
                    ours = engine in OURS
                    x_brute = fmt_x(bm / brute) if ours and bm and brute and engine != "brute" \
                        else "-"
                    x_peer = f"{fmt_x(single / best_v)} ({best})" \
                        if engine in TREES and single and best_v else "-"
                    rows.append([f"{n:,}", labels.get(kind, kind), engine, k(single), k(b1), k(bm),
                                 x_brute] + ([x_peer] if has_peers else []))
    header = ["N", "query", "method", "single 1T", "batched 1T", f"batched {most}T", "x brute"]
    align = ["---:", "---", "---", "---:", "---:", "---:", "---:"]
    if has_peers:
        header, align = header + ["x best peer"], align + ["---:"]
    out += table(header, align, rows)
    return "\n".join(out) + "\n"


def read_readme(path, section=""):
    """-> (text, begin, end): the file and where its markers are; exits 2 without them."""
    first, last = markers(section)
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"report.py: {path}: {e}")
    begin, end = text.find(first), text.find(last)
    if begin < 0 or end < 0 or end < begin or text.count(first) != 1 or text.count(last) != 1:
        print(f"report.py: {path}: needs exactly one {first} followed by one {last}; "
              f"left unchanged", file=sys.stderr)
        sys.exit(2)
    return text, begin, end


def replace_readme(path, block, section=""):
    text, begin, end = read_readme(path, section)
    new = text[:begin + len(markers(section)[0])] + "\n" + block + text[end:]
    if new != text:
        with open(path, "w") as f:
            f.write(new)
    print(f"report.py: {path}: {'updated' if new != text else 'unchanged'} between the markers",
          file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# SVG

PALETTE = {"kdtree": "#1f77b4", "octree": "#ff7f0e", "brute": "#7f7f7f",
           "bullet-dbvt": "#2ca02c", "bullet-sap": "#d62728", "cgal": "#9467bd",
           "fcl": "#8c564b", "box2d": "#e377c2"}
SPARE_COLOURS = ["#17becf", "#bcbd22", "#393b79", "#637939", "#843c39", "#7b4173"]
SHADES = {  # per tree and update policy in the speed-up plot: one hue per tree
    ("kdtree", "auto"): "#1f77b4", ("kdtree", "rebuild"): "#6baed6",
    ("kdtree", "refit"): "#08306b", ("octree", "auto"): "#ff7f0e",
    ("octree", "rebuild"): "#fdae6b", ("octree", "refit"): "#a63603"}
MARKERS = {"kdtree": "circle", "octree": "square", "brute": "diamond", "bullet-dbvt": "triangle",
           "bullet-sap": "diamond", "cgal": "triangle-down", "fcl": "pentagon", "box2d": "plus"}
UPDATE_MARKERS = {"auto": "circle", "rebuild": "square", "refit": "triangle", "": "diamond"}
SPARE_MARKERS = ["circle", "square", "triangle", "diamond", "triangle-down", "pentagon", "plus"]
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
FONT = "Helvetica, Arial, 'DejaVu Sans', sans-serif"


def colour_of(engine, spare):
    if engine not in PALETTE:
        PALETTE[engine] = SPARE_COLOURS[len(spare) % len(SPARE_COLOURS)]
        spare.append(engine)
    return PALETTE[engine]


def marker(shape, x, y, colour, r=4.5):
    style = f'fill="{colour}" stroke="#fff" stroke-width="1"'
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" {style}/>'
    if shape == "square":
        s = r * 0.9
        return (f'<rect x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s:.1f}" '
                f'height="{2 * s:.1f}" {style}/>')
    if shape == "plus":
        a, b = r * 1.15, r * 0.42
        corners = [(-b, -a), (b, -a), (b, -b), (a, -b), (a, b), (b, b), (b, a), (-b, a), (-b, b),
                   (-a, b), (-a, -b), (-b, -b)]
        points = " ".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in corners)
        return f'<polygon points="{points}" {style}/>'
    sides, turn, scale = {"triangle": (3, -90, 1.25), "triangle-down": (3, 90, 1.25),
                          "diamond": (4, -90, 1.2), "pentagon": (5, -90, 1.1),
                          "hexagon": (6, 0, 1.05)}.get(shape, (4, -90, 1.2))
    points = " ".join(f"{x + r * scale * math.cos(math.radians(turn + 360 * i / sides)):.1f},"
                      f"{y + r * scale * math.sin(math.radians(turn + 360 * i / sides)):.1f}"
                      for i in range(sides))
    return f'<polygon points="{points}" {style}/>'


def log_range(values, pad=0.06, min_span=0.25):
    lo, hi = math.log10(min(values)), math.log10(max(values))
    if hi - lo < min_span:
        mid = (lo + hi) / 2
        lo, hi = mid - min_span / 2, mid + min_span / 2
    span = hi - lo
    return lo - pad * span, hi + pad * span


def decade_ticks(lo, hi):
    """(labelled, unlabelled) tick values within 10**lo..10**hi: decades, with 2 and 5 labelled
    too when fewer than three decades show."""
    inside = lambda v: lo - 1e-9 <= math.log10(v) <= hi + 1e-9
    decades = [10.0 ** k for k in range(math.floor(lo), math.ceil(hi) + 1) if inside(10.0 ** k)]
    minors = [m * 10.0 ** k for k in range(math.floor(lo), math.ceil(hi) + 1)
              for m in range(2, 10) if inside(m * 10.0 ** k)]
    labelled = decades
    if len(labelled) < 3:
        labelled = sorted(decades + [v for v in minors if round(v / 10 ** math.floor(
            math.log10(v) + 1e-9)) in (2, 5)])
    if len(labelled) < 2:
        labelled = sorted(decades + minors)
    return labelled, [v for v in minors if v not in labelled]


def pow2_ticks(lo, hi):
    inside = lambda v: lo - 1e-9 <= math.log10(v) <= hi + 1e-9
    k0, k1 = math.floor(lo / math.log10(2)) - 1, math.ceil(hi / math.log10(2)) + 1
    ticks = [2.0 ** k for k in range(k0, k1 + 1) if inside(2.0 ** k)]
    if len(ticks) < 3:
        ticks = sorted(ticks + [1.5 * 2.0 ** k for k in range(k0, k1 + 1)
                                if inside(1.5 * 2.0 ** k)])
    return ticks, []


def tick_text(v, power_of_ten):
    k = round(math.log10(v))
    if power_of_ten and abs(v - 10.0 ** k) < 1e-9 * v:
        return "10" + str(k).translate(SUPERSCRIPT)
    if power_of_ten:
        lead = v / 10.0 ** math.floor(math.log10(v) + 1e-9)
        return f"{lead:g}×10" + str(math.floor(math.log10(v) + 1e-9)).translate(SUPERSCRIPT)
    return f"{v:,.10g}" if v >= 1 else f"{v:.3g}"


def chart(title, subtitle, xlabel, ylabel, series, x_ticks, y_ticks, footer, ideal=None):
    """A log-log line chart. series: [(label, colour, marker, [(x, y)], dash)]; x_ticks, y_ticks:
    (function(lo, hi) -> (labelled, unlabelled), labels as powers of ten); ideal: (x0, x1, y0,
    y1) for a dashed reference line. Returns the SVG text."""
    xs = [x for *_, pts, _ in series for x, _ in pts]
    ys = [y for *_, pts, _ in series for _, y in pts]
    if ideal:
        xs += ideal[:2]
        ys += ideal[2:]
    xlo, xhi = log_range(xs, min_span=0.3)
    ylo, yhi = log_range(ys)
    char = 6.9  # px per character at 12.5 px, roughly
    legend_w = 44 + char * max(len(s[0]) for s in series + ([("linear (ideal)",)] if ideal else []))
    W, H = 800, 480
    left, top, right, bottom = 74, 64, W - legend_w - 18, H - 70
    X = lambda v: left + (math.log10(v) - xlo) / (xhi - xlo) * (right - left)
    Y = lambda v: bottom - (math.log10(v) - ylo) / (yhi - ylo) * (bottom - top)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         f'viewBox="0 0 {W} {H}" font-family="{FONT}" font-size="12.5">',
         f"<title>{escape(title)}</title>",
         f'<rect width="{W}" height="{H}" fill="#fff"/>',
         f'<text x="{left}" y="26" font-size="16" font-weight="bold" fill="#222">'
         f"{escape(title)}</text>",
         f'<text x="{left}" y="46" fill="#555">{escape(subtitle)}</text>']
    grid = []
    labelled, minor = x_ticks[0](xlo, xhi)
    vline = lambda v, c: (f'<line x1="{X(v):.1f}" y1="{top}" x2="{X(v):.1f}" y2="{bottom}" '
                          f'stroke="{c}"/>')
    hline = lambda v, c: (f'<line x1="{left}" y1="{Y(v):.1f}" x2="{right}" y2="{Y(v):.1f}" '
                          f'stroke="{c}"/>')
    for v in minor if xhi - xlo <= 3.2 else []:  # minor grid only where it is not a thicket
        grid.append(vline(v, "#f0f0f0"))
    for v in labelled:
        grid.append(vline(v, "#d9d9d9"))
        o.append(f'<text x="{X(v):.1f}" y="{bottom + 19}" text-anchor="middle" fill="#333">'
                 f"{escape(tick_text(v, x_ticks[1]))}</text>")
    labelled, minor = y_ticks[0](ylo, yhi)
    for v in minor if yhi - ylo <= 3.2 else []:
        grid.append(hline(v, "#f0f0f0"))
    for v in labelled:
        grid.append(hline(v, "#d9d9d9"))
        o.append(f'<text x="{left - 8}" y="{Y(v):.1f}" dy="0.35em" text-anchor="end" fill="#333">'
                 f"{escape(tick_text(v, y_ticks[1]))}</text>")
    o[5:5] = ['<g shape-rendering="crispEdges">'] + grid + [
        f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" '
        f'stroke="#444"/>', "</g>"]
    o.append(f'<text x="{(left + right) / 2:.1f}" y="{bottom + 42}" text-anchor="middle" '
             f'font-size="13.5" fill="#222">{escape(xlabel)}</text>')
    o.append(f'<text transform="translate(20 {(top + bottom) / 2:.1f}) rotate(-90)" '
             f'text-anchor="middle" font-size="13.5" fill="#222">{escape(ylabel)}</text>')
    o.append(f'<clipPath id="plot"><rect x="{left}" y="{top}" width="{right - left}" '
             f'height="{bottom - top}"/></clipPath><g clip-path="url(#plot)">')
    if ideal:
        o.append(f'<line x1="{X(ideal[0]):.1f}" y1="{Y(ideal[2]):.1f}" x2="{X(ideal[1]):.1f}" '
                 f'y2="{Y(ideal[3]):.1f}" stroke="#888" stroke-width="1.5" '
                 f'stroke-dasharray="6 4"/>')
    for name, colour, shape, pts, dash in series:
        pts = sorted(pts)
        if len(pts) > 1:
            path = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in pts)
            dashed = f' stroke-dasharray="{dash}"' if dash else ""
            o.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2.2" '
                     f'stroke-linejoin="round"{dashed}/>')
        o += [marker(shape, X(x), Y(y), colour) for x, y in pts]
    o.append("</g>")
    lx, ly = right + 18, top + 8
    entries = [(s[0], s[1], s[2], s[4]) for s in series]
    if ideal:
        entries.append(("linear (ideal)", "#888", None, "6 4"))
    for i, (name, colour, shape, dash) in enumerate(entries):
        y = ly + 22 * i
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        o.append(f'<line x1="{lx}" y1="{y}" x2="{lx + 28}" y2="{y}" stroke="{colour}" '
                 f'stroke-width="{1.5 if shape is None else 2.2}"{dashed}/>')
        if shape:
            o.append(marker(shape, lx + 14, y, colour))
        o.append(f'<text x="{lx + 36}" y="{y}" dy="0.35em" fill="#222">{escape(name)}</text>')
    o.append(f'<text x="10" y="{H - 8}" font-size="10.5" fill="#777">{escape(footer)}</text>')
    o.append("</svg>")
    return "\n".join(o) + "\n"


def footer_text(res):
    hosts = []
    for path, ctx in res.contexts:
        cpus = f", {ctx['num_cpus']} CPUs" if "num_cpus" in ctx else ""
        host = f"{ctx.get('host_name', '?')}{cpus}"
        if host not in hosts:
            hosts.append(host)
    files = ", ".join(os.path.basename(p) for p in res.paths)
    return f"{'; '.join(hosts)}; median of repetitions; data: {files}"


def ms_vs_n_plot(res, scene):
    if len({k.n for k in res.keys(scene, engines=TREES)}) < 2:
        return None  # one N (a thread sweep alone): no line to draw
    series, spare, thread_counts = [], [], set()
    for engine in TREES:
        keys = res.keys(scene, engines=(engine,))
        if not keys:
            continue
        ns_at = defaultdict(set)
        for k in keys:
            ns_at[k.threads].add(k.n)
        lines = [t for t, ns in ns_at.items() if len(ns) >= 2]
        t = max(lines or ns_at)  # the most threads that give a line, else the most threads
        best = {}
        for k in keys:
            if k.threads == t and (k.n not in best or res.ms(k) < best[k.n]):
                best[k.n] = res.ms(k)
        thread_counts.add(t)
        series.append((f"{engine} ({t}T)", colour_of(engine, spare),
                       MARKERS.get(engine, "circle"), sorted(best.items()), None))
    trees = len(series)
    for peer in res.peers():
        points = sorted((n, res.peer_ms(scene, n, peer))
                        for n in {k.n for k in res.keys(scene, peers=True)})
        points = [(n, ms) for n, ms in points if ms is not None]
        if points:
            engine = peer.split("/")[0]
            shape = MARKERS.get(engine) or SPARE_MARKERS[len(series) % len(SPARE_MARKERS)]
            series.append((f"{peer} (1T)", colour_of(peer, spare), shape, points, None))
    if not series:
        return None
    if len(thread_counts) == 1:
        t = next(iter(thread_counts))
        ours = f"our trees at {t} thread{'s' if t != 1 else ''}, best update policy per N"
    else:
        ours = ("our trees at the threads in the legend, best update policy per N"
                if thread_counts else "")
    peers = "peers at 1 thread" if len(series) > trees else ""
    subtitle = "; ".join(p for p in (ours, peers) if p)
    return chart(f"{scene}: ms per frame vs N (log-log, lower is better)", subtitle,
                 "N (objects)", "ms per frame (median)", series,
                 (decade_ticks, True), (decade_ticks, False), footer_text(res))


def speedup_plot(res, scene):
    methods = sorted({(k.engine, k.update) for k in res.keys(scene, engines=OURS)},
                     key=lambda m: method_rank(*m))
    found = [(e, u, res.thread_series(scene, e, u)) for e, u in methods]
    found = [(e, u, s) for e, u, s in found if s]
    if not found:
        return None
    n = max(s[0] for *_, s in found)
    series, spare, threads = [], [], set()
    for engine, update, (sn, by_t) in found:
        if sn != n:
            continue
        base = 1 if 1 in by_t else min(by_t)
        threads |= set(by_t)
        colour = SHADES.get((engine, update)) or colour_of(engine, spare)
        shape = UPDATE_MARKERS.get(update, "circle")
        series.append((label(engine, update), colour, shape,
                       [(t, by_t[base] / ms) for t, ms in by_t.items()], None))
    lo, hi = min(threads), max(threads)
    over = "1 thread" if lo == 1 else f"{lo} threads"
    thread_ticks = lambda a, b: (sorted(t for t in threads if a <= math.log10(t) <= b + 1e-9), [])
    return chart(f"{scene}, N = {n:,}: speed-up over {over} (log-log)",
                 f"median ms per frame at {over} / at T threads; dashed: linear scaling",
                 "worker threads", f"speed-up over {over}", series, (thread_ticks, False),
                 (pow2_ticks, False), footer_text(res), ideal=(lo, hi, 1, hi / lo))


def write_plots(res, out_dir, scenes):
    """-> [(path, alt text)] of the files written."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    known = set(res.scenes())
    for i, scene in enumerate(scenes):
        if scene not in known:
            warn(f"--plot-scene {scene}: no such scene in the data; no plots for it")
            continue
        suffix = "" if i == 0 else f"_{scene}"
        for stem, make, alt in (("ms_vs_n", ms_vs_n_plot, f"{scene}: ms per frame vs N"),
                                ("speedup_vs_threads", speedup_plot,
                                 f"{scene}: speed-up vs threads")):
            svg = make(res, scene)
            if svg is None:
                warn(f"{scene}: nothing to plot for {stem}")
                continue
            path = os.path.join(out_dir, f"{stem}{suffix}.svg")
            with open(path, "w") as f:
                f.write(svg)
            written.append((path, alt))
            print(f"report.py: wrote {path} ({len(svg.encode()):,} bytes)", file=sys.stderr)
    return written


# ---------------------------------------------------------------------------------------------


# What --regenerate runs, in order, from the repository root: every section of perf/RESULTS.md (the
# tables that README.md held before they moved there), then README.md's summary. A new committed
# run replaces its file here (or adds a line, with markers in perf/RESULTS.md to match).
RESULTS, README = "perf/RESULTS.md", "README.md"
STANDARD = ("perf/results/bench-standard.json", "perf/results/bench-threads.json")
REGENERATE = (
    ("--plots", "perf/results", "--into", RESULTS) + STANDARD,
    ("--floors", "--into", RESULTS, "--section", "floors", "perf/results/bench-floors.json"),
    ("--section", "16core", "--plots", "perf/results/16core", "--into", RESULTS,
     "perf/results/bench-threads-16core.json", "perf/results/bench-peers-16core.json"),
    ("--queries", "--into", RESULTS, "--section", "queries", "perf/results/bench-queries.json"),
    ("--still", "--into", RESULTS, "--section", "still", "perf/results/bench-still.json"),
    ("--still", "--into", RESULTS, "--section", "still16",
     "perf/results/bench-still-16core.json"),
    ("--into", RESULTS, "--section", "churn", "perf/results/bench-churn.json"),
    ("--summary", "--into", README, "--section", "summary") + STANDARD,
)


def regenerate():
    # The repository's root: this file is perf/results/report.py.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for args in REGENERATE:
        command = ["python3", "perf/results/report.py", *args]
        print(f"report.py: {shlex.join(command)}", file=sys.stderr)
        done = subprocess.run([sys.executable] + command[1:], cwd=root)
        if done.returncode != 0:
            sys.exit(done.returncode)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[2:]))
    ap.add_argument("files", nargs="*", metavar="results.json",
                    help="broadphase-bench JSON; later files override earlier ones")
    ap.add_argument("--regenerate", action="store_true",
                    help="no files: write every section of perf/RESULTS.md and README.md's "
                         "summary from the committed JSON (the commands in REGENERATE)")
    ap.add_argument("--markdown", metavar="FILE", help="write the markdown to FILE, not stdout")
    ap.add_argument("--into", "--readme", dest="into", metavar="FILE",
                    help=f"replace the text between {BEGIN} and {END} in FILE")
    ap.add_argument("--plots", metavar="DIR", help="write the SVG plots into DIR")
    ap.add_argument("--plot-scene", default="moving,moving2d", metavar="S[,S...]",
                    help="scenes to plot (default moving,moving2d); the first one's files have "
                         "no suffix")
    ap.add_argument("--all-threads", action="store_true",
                    help="per-method table: every thread count (default: lowest and highest)")
    ap.add_argument("--heading-level", type=int, default=3, choices=range(1, 7),
                    help="markdown heading level of the sections (default 3)")
    ap.add_argument("--still", action="store_true",
                    help="only the table of worlds that mostly stand still (static_world, "
                         "sleeping)")
    ap.add_argument("--section", default="", metavar="NAME",
                    help="with --into: the block between <!-- perf:NAME:begin --> and "
                         "<!-- perf:NAME:end --> instead (a second machine's figures, say)")
    ap.add_argument("--queries", action="store_true",
                    help="only the table of spatial query throughput (query/... cases)")
    ap.add_argument("--floors", action="store_true",
                    help="only the table of the project's speed targets at 2 threads, met or "
                         "not (perf/bench/run_sets.sh --floors makes the file)")
    ap.add_argument("--summary", action="store_true",
                    help="only the README's summary table (see --summary-scene)")
    ap.add_argument("--summary-scene", default="moving,moving2d", metavar="S[,S...]",
                    help="scenes of the summary table (default moving,moving2d)")
    args = ap.parse_args()
    if args.regenerate:
        if args.files:
            ap.error("--regenerate takes no files: it reads the committed ones (REGENERATE)")
        regenerate()
        return
    if not args.files:
        ap.error("no results.json given (or --regenerate)")

    def write_section(text):
        """A one-table report (--still, --queries, ...) into the --into file, a file or stdout."""
        if args.into:
            replace_readme(args.into, text, args.section)
        elif args.markdown:
            with open(args.markdown, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)

    if args.queries:
        if args.into:
            read_readme(args.into, args.section)
        base = os.path.dirname(os.path.abspath(args.into or args.markdown or "."))
        write_section(queries_markdown(args.files, base))
        return

    if args.into:
        read_readme(args.into, args.section)  # no markers: stop before writing anything
    res = Results(args.files)
    if not res.rec:
        sys.exit("report.py: no step/<scene>/<engine>/... benchmark figures in the input")
    if args.summary:
        base = os.path.dirname(os.path.abspath(args.into or args.markdown or "."))
        scenes = [s for s in args.summary_scene.split(",") if s]
        write_section(summary_markdown(res, scenes, base))
        return
    images = []
    if args.plots:
        scenes = [s for s in args.plot_scene.split(",") if s]
        images = write_plots(res, args.plots, scenes)

    if args.still or args.floors:
        base = os.path.dirname(os.path.abspath(args.into or args.markdown or "."))
        write_section(still_markdown(res, args, base) if args.still else floors_markdown(res, base))
        return
    if args.into:
        base = os.path.dirname(os.path.abspath(args.into))
        replace_readme(args.into, markdown(res, args, images, base), args.section)
    if args.markdown:
        base = os.path.dirname(os.path.abspath(args.markdown))
        with open(args.markdown, "w") as f:
            f.write(markdown(res, args, images, base))
    if not args.into and not args.markdown:
        sys.stdout.write(markdown(res, args, images, os.getcwd()))


if __name__ == "__main__":
    main()
