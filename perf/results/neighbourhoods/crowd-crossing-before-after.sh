#!/bin/bash
# The crowd's whole crossing: 700 frames of 1e4 agents (the disc's agents converge on its middle
# and walk out again), base and new builds alternated (ROUNDS rounds, THREADS threads):
#   BASE=/path/to/base/broadphase-run NEW=build/release/broadphase-run ROUNDS=2 \
#   perf/results/neighbourhoods/crowd-crossing-before-after.sh
# Each line: build, then each route's median, p99 and worst frame (ms) over frames 1-699 and its
# median's ratio to the seed's in the same run.
BASE=${BASE:?the path of the base build broadphase-run}
NEW=${NEW:-build/release/broadphase-run}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-1}
PICK='$1 ~ /^(rows|balls|nearest|neighbourhoods|seed)$/ && NF >= 5 {printf "%s %s %s %s %s  ", $1, $2, $3, $4, $5}'
for r in $(seq "$ROUNDS"); do
    for b in base new; do
        bin=$BASE
        [ "$b" = new ] && bin=$NEW
        routes="--crowd-route nearest --crowd-route seed"
        [ "$b" = new ] && routes="$routes --crowd-route neighbourhoods"
        out=$("$bin" --crowd --n 10000 --frames 700 --threads "$THREADS" $routes --quiet 2>&1)
        echo "round $r $b threads $THREADS: $(echo "$out" | awk "$PICK")"
    done
done
