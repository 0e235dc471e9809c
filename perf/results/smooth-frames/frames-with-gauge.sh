#!/bin/bash
# The smooth-frame cases, each frame's line with what the step did to the tree and the host gauge
# beside it (broadphase-run --gauge, perf/common/machine.h), one run after another:
#   bash perf/results/smooth-frames/frames-with-gauge.sh build/release/broadphase-run OUT_FILE [ROUNDS]
# The summary lines of every run go to OUT_FILE; each run's frame lines to OUT_FILE.d/.
B=$1
OUT=$2
ROUNDS=${3:-2}
mkdir -p "$OUT.d"
echo "# $(date -u +%F) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs" >"$OUT"
run() {
    local name=$1
    shift
    "$B" "$@" --gauge --verbose >"$OUT.d/$name.txt" 2>&1
    {
        echo "== $name: broadphase-run $* --gauge --verbose"
        grep -E "^  (frame|gauge|move) |^host gauge|^frames by|^first frame|^load" "$OUT.d/$name.txt"
    } >>"$OUT"
}
for r in $(seq 1 "$ROUNDS"); do
    for s in moving moving2d; do
        for m in octree kdtree; do
            run "$s-1e5-$m-$r" --scene $s --n 100000 --frames 300 --method $m --threads 2
        done
    done
    for m in octree kdtree; do
        run "moving-1e6-$m-$r" --scene moving --n 1000000 --frames 120 --method $m --threads 2
    done
    run "clustered-1e6-octree-$r" --scene clustered --n 1000000 --frames 120 --method octree --threads 2
    run "uniform-1e6-octree-$r" --scene uniform --n 1000000 --frames 120 --method octree --threads 2
    for n in 10000 100000; do
        run "load-$n-default-$r" --scene moving --n $n --frames 300 --method octree --load 1
        run "load-$n-one-$r" --scene moving --n $n --frames 300 --method octree --threads 1 --load 1
    done
done
