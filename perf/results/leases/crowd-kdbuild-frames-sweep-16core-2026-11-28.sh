#!/bin/bash
# One lease of the 16-core device (2026-11-28): the crowd's routes on 1-16 threads, the kd-tree's
# rebuild, the frame and load cases on two pinned cores, the thread sweep. Run from the
# repository root:
#   bash perf/results/leases/crowd-kdbuild-frames-sweep-16core-2026-11-28.sh DEV_DIR OUT_DIR
# DEV_DIR holds the static runners (run_new, run_base: the build before the kd-tree's branchless
# build, d4e5942) and the bench with its own loader and libraries (bench, lib/). Every part has
# its own time limit, so that the lease ends with what was measured. Parts (OUT_DIR's names, then
# where the lease's output is committed, under perf/results/):
#   info.txt         the machine (CPUs, the two cores used as "a 2-core machine");
#                    leases/crowd-kdbuild-frames-sweep-16core-2026-11-28-machine.txt
#   crowd.txt        the crowd's routes at 1e4 and 1e5 agents, 1-16 threads, and on
#                    two pinned cores at 1 and 2 threads;
#                    neighbourhoods/crowd-routes-1-to-16-threads-16core-2026-11-28.txt
#   kdbuild.txt      the kd-tree's rebuild at 1e6, base and new alternated, 2 and 16 threads;
#                    kdtree-build/rebuild-1e6-before-after-branchless-16core-2026-11-28.txt
#   smooth2.txt      the smooth-frame cases on two pinned cores (2 threads); smooth-frames/
#                    smooth-cases-before-after-branchless-kdtree-build-pinned-16core-2026-11-28.txt
#   load2.txt        the load cases on two pinned cores, one spinning process;
#                    smooth-frames/load-cases-pinned-16core-2026-11-28-run1.txt
#   bench-threads-16core.json  the thread sweep (perf/bench/run_sets.sh --threads-sweep);
#                    thread-scaling/bench-threads-1e6-16core-2026-11-28.json
D=${1:?the folder with run_new, run_base, bench, lib}
O=${2:?the output folder}
T0=$(date +%s)
left() { echo $((${BUDGET:-530} - ($(date +%s) - T0))); }
# part LIMIT_S: no more than LIMIT_S seconds, nor past the whole budget
cap() {
    local l
    l=$(left)
    [ "$1" -lt "$l" ] && l=$1
    [ "$l" -lt 1 ] && l=1 # timeout 0 would mean no limit
    echo "$l"
}
PICK='/^  (step|update|search|output|frame) |^first frame|^threads:|^structure:|^crowd:|^  (rows|balls|nearest|neighbourhoods|seed) |^neighbours:/'

# Two CPUs that are not hyper-thread siblings: cpu 0 and the first one outside its core.
sib=$(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null)
second=1
for c in $(seq 1 $(($(nproc) - 1))); do
    if ! echo ",$sib," | tr '-' ',' | grep -q ",$c,"; then
        second=$c
        break
    fi
done
PAIR="0,$second"
{
    date -u
    nproc
    lscpu
    echo "cpu0 siblings: $sib; the pair: $PAIR"
    grep -m1 'model name' /proc/cpuinfo
    uptime
} >"$O/info.txt" 2>&1

R="$D/run_new"
B="$D/run_base"
one() { # label, then the command: the summary lines of one runner call
    local label=$1
    shift
    echo "== $label: $*"
    "$@" --quiet 2>&1 | awk "$PICK"
}
export -f one
export PICK R B PAIR

# the crowd's routes on 1..16 threads, then on the pinned pair at 1 and 2 threads
timeout "$(cap 75)" bash -c '
    for n in 10000 100000; do
        for t in 1 2 4 8 16; do one "all cores" $R --crowd --n $n --frames 11 --threads $t; done
        for t in 1 2 1 2; do one "pinned $PAIR" taskset -c $PAIR $R --crowd --n $n --frames 11 --threads $t; done
    done' >"$O/crowd.txt" 2>&1

# the kd-tree's rebuild at 1e6, base and new alternated
timeout "$(cap 50)" bash -c '
    for r in 1 2; do
        for t in 16 2; do
            for b in base new; do
                bin=$R
                [ $b = base ] && bin=$B
                one "$b r$r" $bin --scene moving --n 1000000 --frames 12 --method kdtree --update rebuild --threads $t
            done
        done
    done' >"$O/kdbuild.txt" 2>&1

# the smooth-frame cases on the pinned pair: the frames (new and base alternated), then one
# spinning process
timeout "$(cap 130)" bash -c '
    while read -r line; do
        [ -z "$line" ] && continue
        one "pinned new" taskset -c $PAIR $R $line
        one "pinned base" taskset -c $PAIR $B $line
    done < perf/results/smooth-frames/cases_smooth.txt' >"$O/smooth2.txt" 2>&1
timeout "$(cap 60)" bash -c '
    while read -r line; do
        [ -z "$line" ] && continue
        one "pinned new" taskset -c $PAIR $R $line
    done < perf/results/smooth-frames/cases_load.txt' >"$O/load2.txt" 2>&1

# the thread sweep (Google Benchmark), with the bench's own loader and libraries
l=$(left)
if [ "$l" -gt 40 ]; then
    timeout "$((l - 5))" "$D/lib/ld-linux-x86-64.so.2" --library-path "$D/lib" "$D/bench" \
        --benchmark_filter='^step/(moving|moving2d)/(kdtree|octree)/(auto|refit)/n:1000000/' \
        --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
        --benchmark_out="$O/bench-threads-16core.json" --benchmark_out_format=json \
        >"$O/bench.log" 2>&1
fi
echo "done after $(($(date +%s) - T0)) s" >>"$O/info.txt"
