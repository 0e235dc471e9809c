#!/bin/bash
# The frames users feel on the 16-core device: other work taking cores (K spinning
# processes, --load K) with the team that adapts (the default) and with every step on all the
# threads (--fixed-threads, the behaviour before), then the frame statistics of the smooth-frame
# scenes at all 16 threads. Run from the repository root with the static runner carried along:
#   bash perf/results/smooth-frames/load-and-frames-16core.sh build/static/broadphase-run OUT_DIR \
#       [all | load2 | load3]
# Writes OUT_DIR/load-16core.txt (all) or load-16core-PART.txt, and smooth-cases-16core.txt (all).
# The committed runs of 2026-11-27, in perf/results/smooth-frames/: load-first-team-16core-*.txt
# and smooth-cases-16core-*.txt (an "all" run, the first adapting team),
# load-team-by-quarters-16core-*.txt (a load2 run, the team shrinking a quarter at a time) and
# load-final-team-16core-*.txt (a load3 run, the final code).
B=$1
O=${2:-.}
PART=${3:-all} # all; load2: the load runs alone; load3: those without --fixed-threads
SUFFIX=""
[ "$PART" = all ] || SUFFIX="-$PART"
run() { echo "== $*"; "$B" "$@" --quiet --gauge 2>&1 | grep -E "^  (step|frame|gauge)|^first frame|^threads:|^structure|^frames by|^host gauge"; }
{
    nproc
    for n in 10000 100000; do
        for m in kdtree octree; do
            for L in 0 8 15; do
                run --scene moving --n $n --frames 300 --method $m --threads 0 --load $L
                [ "$PART" = load3 ] ||
                    run --scene moving --n $n --frames 300 --method $m --threads 0 --load $L --fixed-threads
                run --scene moving --n $n --frames 300 --method $m --threads 1 --load $L
            done
        done
    done
} >"$O/load-16core$SUFFIX.txt" # all: load-16core.txt; else load-16core-<PART>.txt
[ "$PART" = all ] || exit 0
{
    for m in kdtree octree; do
        run --scene moving --n 100000 --frames 300 --method $m
        run --scene moving2d --n 100000 --frames 300 --method $m
        run --scene moving --n 1000000 --frames 120 --method $m
        run --scene clustered --n 1000000 --frames 120 --method $m
        run --scene uniform --n 1000000 --frames 120 --method $m
    done
} >"$O/smooth-cases-16core.txt"
