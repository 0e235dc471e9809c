#!/bin/bash
# The first frame of moving 1e6 (add + first step), base and new builds alternated:
#   BASE=/path/to/base/broadphase-run NEW=build/release/broadphase-run \
#   perf/results/smooth-frames/first-frame-before-after.sh METHOD ROUNDS [N]
# Each line: the build, the runner's "first frame" line, then frame 0's update, search and
# output phases in ms.
BASE=${BASE:?the path of the base build broadphase-run}
NEW=${NEW:-build/release/broadphase-run}
m=${1:-octree}
r=${2:-3}
n=${3:-1000000}
PHASES='$1 == "0" {print "upd", $4, "search", $5, "out", $6}'
for i in $(seq "$r"); do
    for b in base new; do
        bin=$BASE
        [ "$b" = new ] && bin=$NEW
        out=$("$bin" --scene moving --n "$n" --method "$m" --frames 2 --threads 2 2>&1)
        first=$(echo "$out" | grep 'first frame' | sed 's/first frame: //')
        echo "$b $m $first | $(echo "$out" | awk "$PHASES")"
    done
done
