#!/bin/bash
# The crowd's routes, base and new builds alternated case by case (ROUNDS rounds):
#   BASE=/path/to/base/broadphase-run NEW=build/release/broadphase-run ROUNDS=3 \
#   perf/results/neighbourhoods/crowd-routes-before-after.sh
# Each line: build, agents, threads, then each route's median ms over frames 1-10, its ratio
# to the seed kd-tree in the same run, and (new builds) the ratio of its library calls alone.
BASE=${BASE:?the path of the base build broadphase-run}
NEW=${NEW:-build/release/broadphase-run}
ROUNDS=${ROUNDS:-3}
PICK='$1 ~ /^(rows|balls|nearest|neighbourhoods|seed)$/ && NF >= 5 {printf "%s %s %s%s  ", $1, $2, $5, (NF >= 7 ? " calls " $7 : "")}'
for r in $(seq "$ROUNDS"); do
    for n in 100000 10000; do
        for t in 1 2; do
            for b in base new; do
                bin=$BASE
                [ "$b" = new ] && bin=$NEW
                out=$("$bin" --crowd --n "$n" --frames 11 --threads "$t" --quiet 2>&1)
                line=$(echo "$out" | awk "$PICK")
                echo "round $r $b n $n threads $t: $line"
            done
        done
    done
done
