#!/bin/bash
F='^step/moving/(kdtree|octree)/auto/n:(10000|100000|1000000)/threads:2/|^step/mixed/(kdtree|octree)/auto/n:100000/threads:2/|^step/static_world/(kdtree|octree)/auto/|^query/(sphere|nearest16)/(kdtree|octree)/n:100000/batched/threads:2/'
for r in 1 2 3 4; do
  for b in base new; do
    ./$b-bench --benchmark_filter="$F" --benchmark_min_time=0.5 --benchmark_out=$b-$r.json --benchmark_out_format=json > $b-$r.txt 2>&1
  done
done
echo done > finished
