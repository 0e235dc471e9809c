#!/bin/bash
# The second lease of 2026-11-28 (16-core device), on two pinned cores (cpu 0 and 1: that machine
# reports one thread per core). Run from the repository root:
#   bash perf/results/leases/crowd-kdrefit-load-pinned-16core-2026-11-28.sh DEV_DIR OUT_DIR
# DEV_DIR holds static runners: run_start (the session's start, ed22199), run_new (this
# session's neighbourhoods), run_base (d4e5942, before the kd-tree's branchless build). Parts
# (OUT_DIR's names, then where the lease's output is committed, under perf/results/):
#   crowd2.txt   the neighbourhoods route and the seed, start and new alternated, 1 and
#                2 threads, 1e4 (100 frames) and 1e5 (11 frames) agents; neighbourhoods/
#                crowd-routes-before-after-grid-between-calls-pinned-16core-2026-11-28.txt
#   kdrefit.txt  moving 1e6 and 1e5 on the kd-tree (update auto: refits), base and new
#                alternated three times (was the kd-tree's search slower after the new build?);
#                kdtree-build/refit-search-before-after-branchless-pinned-16core-2026-11-28.txt
#   load2b.txt   the load cases (one spinning process on the pair);
#                smooth-frames/load-cases-pinned-16core-2026-11-28-run2.txt
#   info2.txt    the machine; leases/crowd-kdrefit-load-pinned-16core-2026-11-28-machine.txt
D=${1:?the folder with the runners}
O=${2:?the output folder}
T0=$(date +%s)
left() { echo $((${BUDGET:-200} - ($(date +%s) - T0))); }
cap() {
    local l
    l=$(left)
    [ "$1" -lt "$l" ] && l=$1
    [ "$l" -lt 1 ] && l=1 # timeout 0 would mean no limit
    echo "$l"
}
PICK='/^  (step|update|search|output|frame|neighbourhoods|seed) |^first frame|^threads:|^structure:/'
one() { # label, then the command: the summary lines of one runner call
    local label=$1
    shift
    echo "== $label: $*"
    "$@" --quiet 2>&1 | awk "$PICK"
}
export -f one
export PICK D
{
    date -u
    grep -m1 'model name' /proc/cpuinfo
    nproc
    uptime
} >"$O/info2.txt"

timeout "$(cap 60)" bash -c '
    for r in 1 2; do
        for t in 1 2; do
            for b in start new; do
                one "$b r$r" taskset -c 0,1 $D/run_$b --crowd --n 100000 --frames 11 --threads $t \
                    --crowd-route neighbourhoods --crowd-route seed
                one "$b r$r" taskset -c 0,1 $D/run_$b --crowd --n 10000 --frames 100 --threads $t \
                    --crowd-route neighbourhoods --crowd-route seed
            done
        done
    done' >"$O/crowd2.txt" 2>&1

timeout "$(cap 80)" bash -c '
    for r in 1 2 3; do
        for b in base new; do
            one "$b r$r" taskset -c 0,1 $D/run_$b --scene moving --n 1000000 --frames 50 --method kdtree --threads 2
            one "$b r$r" taskset -c 0,1 $D/run_$b --scene moving --n 100000 --frames 300 --method kdtree --threads 2
        done
    done' >"$O/kdrefit.txt" 2>&1

timeout "$(cap 60)" bash -c '
    while read -r line; do
        [ -z "$line" ] && continue
        one "pinned new" taskset -c 0,1 $D/run_new $line
    done < perf/results/smooth-frames/cases_load.txt' >"$O/load2b.txt" 2>&1
echo "done after $(($(date +%s) - T0)) s" >>"$O/info2.txt"
