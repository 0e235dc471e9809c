#!/usr/bin/env bash
# Runs the standard benchmark set of broadphase-bench into one JSON file: every scene (moving,
# moving2d, mixed, dense, uniform, clustered, spheres, plane2d) at N = 1e3 .. 1e6 (dense at its
# own 1000 / 2000 / 4000), every engine (our kd-tree and octree with update auto and refit, brute
# force where the table has it, every peer library built in), at 1 thread and at all of them,
# and the scenes that stand still once more with only-moved updates on (<scene>_rest, both trees,
# update auto); 3 repetitions, aggregates only. With --threads-sweep: moving and moving2d at N = 1e6, kd-tree
# and octree, refit and auto, at every thread count of the table (1, 2, 4, ... and the hardware
# count). With --still: the worlds that mostly stand still (static_world with its statics
# flagged, with every object in the tree and with its movers alone; sleeping) and moving at
# N = 1e6 for comparison, both trees, update auto, 1 thread and all of them (about a minute).
# With --queries: query throughput (box, ball, ray, closest ray, 16 nearest) on uniform at
# N = 1e5 and 1e6, both trees (and brute force at 1e5), single queries and batches at 1 thread
# and all of them; then the peer libraries' own queries, single on one thread (bullet-dbvt and
# bullet-sap box, ray and closest ray, fcl box, on uniform; box2d box, ray and closest ray on
# plane2d, next to our trees' single 2D queries), bullet-sap at 1e5 only. About three minutes for
# ours, plus the peers' set-up, paid once per peer and N: bullet-sap about two minutes at 1e5,
# box2d about 30 s at 1e6, the others seconds. With --floors: the cases the project's speed targets
# (the floors) name (moving at 1e4, 1e5 and 1e6 with fcl beside it, moving2d at 1e5 with box2d,
# mixed at 1e5, dense at 2000), both trees, 1 thread and all of them, in about 2 minutes: short
# enough to run again when the machine's cross-core round trip (recorded per case) has changed.
# With --churn: moving at N = 1e5 and 1e6 with one object in 1000 removed and added again every
# frame (moving_churn), and without, both trees, update auto, 1 thread and all of them. With
# --smooth: the frames users feel, each case's frame median, 99th percentile and worst: moving,
# moving2d, clustered, moving_churn, uniform pushed unchanged (with and without only-moved updates)
# at N = 1e4, 1e5 and 1e6, both trees, update auto, 1 thread and all of them, one long run each
# (--benchmark_min_time=10: at least 300 frames at 1e5 and 120 at 1e6 here), with the frames'
# median, 99th percentile and worst as counters; about 15 minutes. BROADPHASE_BENCH_LOAD=K in the
# environment runs K spinning processes beside every case (other work taking cores). With --crowd:
# a crowd's neighbourhoods (each agent's 10 nearest within 15) at 1e4 and 1e5 agents by every route
# (rows, balls, nearest, and the seed's array kd-tree), 1 thread and all of them; 3 repetitions;
# about 2 minutes.
#
# Usage: perf/bench/run_sets.sh [--threads-sweep | --still | --queries | --floors | --churn |
#                              --smooth | --crowd]
#                             [--bench PATH]
#                             [OUT.json] [-- OPTIONS...]
#   OUT.json   default perf/results/bench-standard.json (bench-threads.json with --threads-sweep,
#              bench-still.json with --still, bench-queries.json with --queries,
#              bench-floors.json with --floors, bench-churn.json with --churn,
#              bench-smooth.json with --smooth, bench-crowd.json with --crowd)
#   --bench    the broadphase-bench binary (default build/broadphase-bench, or $BROADPHASE_BENCH)
#   after --   passed on to broadphase-bench (e.g. --benchmark_min_time=0.2)
# Time on the 2-core development machine, estimated from timed subsets of the standard set
# (378 cases there): about 2.4 s per case up to N = 1e5 and 4 s at 1e6 (peers at 1e6 up to
# 12 s), plus the set-up of bullet-sap at 1e5 (O(N^2), 2 minutes for each of its two cases):
# about 25 minutes in all. The sweep: 8 cases per thread count, about 4 s each.
set -euo pipefail
cd "$(dirname "$0")/../.." # the repository's root: the default paths are relative to it

mode=standard
bench=${BROADPHASE_BENCH:-build/broadphase-bench}
out=""
extra=()
while [ $# -gt 0 ]; do
    case $1 in
    --threads-sweep) mode=sweep ;;
    --still) mode=still ;;
    --queries) mode=queries ;;
    --floors) mode=floors ;;
    --churn) mode=churn ;;
    --smooth) mode=smooth ;;
    --crowd) mode=crowd ;;
    --bench)
        bench=$2
        shift
        ;;
    --)
        shift
        extra=("$@")
        break
        ;;
    -h | --help)
        awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
        exit 0
        ;;
    -*)
        echo "unknown option $1 (see --help)" >&2
        exit 2
        ;;
    *) out=$1 ;;
    esac
    shift
done

if [ ! -x "$bench" ]; then
    echo "$bench not found: build it first (cmake --build build) or pass --bench PATH" >&2
    exit 2
fi

# Our methods, from the one list (BROADPHASE_METHOD_LIST): a method with a tree has cases per
# update policy (<name>/auto/...), one without (brute force) none (<name>/n:...).
ours=$(sed -n 's/^[[:space:]]*X(BROADPHASE_METHOD_[A-Z0-9_]*, \([a-z0-9_]*\)).*/\1/p' \
    engine/include/broadphase.h | paste -sd '|')
ours="($ours)"
peers='(bullet-dbvt|bullet-sap|cgal|fcl|box2d)'

# The thread counts the table was built with (the highest is the hardware count it saw).
all_threads=$("$bench" --benchmark_list_tests | sed -n 's|.*/threads:\([0-9]*\).*|\1|p' | sort -un)
most=$(printf '%s\n' "$all_threads" | tail -n 1)

if [ "$mode" = standard ]; then
    out=${out:-perf/results/bench-standard.json}
    engines="($ours/((auto|refit)/)?|$peers/)"
    scenes='(uniform|clustered|mixed|moving|spheres|plane2d|moving2d|dense)'
    filter="^step/$scenes(_rest)?/${engines}n:[0-9]+/threads:(1|$most)/"
elif [ "$mode" = still ]; then
    out=${out:-perf/results/bench-still.json}
    filter="^step/((static_world|sleeping)[a-z_]*/$ours/auto/|moving/$ours/auto/n:1000000/threads:(1|$most)/)"
elif [ "$mode" = queries ]; then
    out=${out:-perf/results/bench-queries.json}
    filter="^query/[a-z0-9]+/($ours|$peers)/(2d/)?n:(100000|1000000)/"
elif [ "$mode" = floors ]; then
    out=${out:-perf/results/bench-floors.json}
    trees="$ours/auto"
    filter="^step/(moving/($trees|fcl)/n:(10000|100000|1000000)|moving2d/($trees|$ours/refit|box2d)/n:100000|mixed/$trees/n:100000|dense/$ours/(auto/)?n:2000)/threads:(1|$most)/"
elif [ "$mode" = churn ]; then
    out=${out:-perf/results/bench-churn.json}
    filter="^step/moving(_churn)?/$ours/auto/n:(100000|1000000)/threads:(1|$most)/"
elif [ "$mode" = crowd ]; then
    out=${out:-perf/results/bench-crowd.json}
    filter="^crowd/"
elif [ "$mode" = smooth ]; then
    out=${out:-perf/results/bench-smooth.json}
    filter="^step/(moving|moving2d|clustered|moving_churn|uniform|uniform_rest)/$ours/auto/n:(10000|100000|1000000)/threads:(1|$most)/"
else
    out=${out:-perf/results/bench-threads.json}
    filter="^step/(moving|moving2d)/$ours/(auto|refit)/n:1000000/"
fi

mkdir -p "$(dirname "$out")"
echo "broadphase-bench: $mode set, threads $(echo $all_threads | tr ' ' ','), into $out" >&2
if [ "$mode" = smooth ]; then
    exec "$bench" --benchmark_filter="$filter" --benchmark_min_time=10 --benchmark_out="$out" \
        --benchmark_out_format=json "${extra[@]}"
fi
exec "$bench" --benchmark_filter="$filter" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_out="$out" \
    --benchmark_out_format=json "${extra[@]}"
