#!/bin/bash
# The engine's restructuring checked for speed (NOTES rows 134-143): the benchmark binary of the
# code before (./base-bench, 71f1998) and after (./new-bench) alternated, four rounds, every case
# at --benchmark_min_time=0.5. Run in a folder holding both binaries; each round writes
# suite-before-run<R>.json and suite-after-run<R>.json there (committed in
# perf/results/restructuring/ as suite-{before,after}-vm-2026-11-27-run<R>.json; the batched
# nearest queries' extra rounds at one thread as nearest-1thread-*.json).
F='^step/moving/(kdtree|octree)/auto/n:(10000|100000|1000000)/threads:2/|^step/mixed/(kdtree|octree)/auto/n:100000/threads:2/|^step/static_world/(kdtree|octree)/auto/|^query/(sphere|nearest16)/(kdtree|octree)/n:100000/batched/threads:2/'
for r in 1 2 3 4; do
  for b in base new; do
    w=before
    [ "$b" = new ] && w=after
    ./$b-bench --benchmark_filter="$F" --benchmark_min_time=0.5 --benchmark_out=suite-$w-run$r.json --benchmark_out_format=json > suite-$w-run$r.txt 2>&1
  done
done
echo done > finished
