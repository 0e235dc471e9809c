#!/bin/bash
# The third lease of 2026-11-28 (16-core device): the crowd's Google Benchmark cases and the
# runner's neighbourhoods route on two pinned cores (cpu 0 and 1), the code at this session's
# end. Run from the repository root:
#   bash perf/results/leases/crowd-bench-pinned-16core-2026-11-28.sh DEV_DIR OUT_DIR
# Committed, under perf/results/: info3.txt as leases/crowd-bench-pinned-16core-2026-11-28-machine.txt,
# crowd3.txt as neighbourhoods/crowd-routes-final-pinned-16core-2026-11-28.txt, bench-crowd-pinned.json
# as neighbourhoods/bench-crowd-final-pinned-16core-2026-11-28.json.
D=${1:?the folder with run_new, bench and lib}
O=${2:?the output folder}
{
    date -u
    grep -m1 'model name' /proc/cpuinfo
    uptime
} >"$O/info3.txt"
timeout 70 taskset -c 0,1 "$D/lib/ld-linux-x86-64.so.2" --library-path "$D/lib" "$D/bench" \
    --benchmark_filter='^crowd/(neighbourhoods|seed)/' --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_enable_random_interleaving=true \
    --benchmark_out="$O/bench-crowd-pinned.json" --benchmark_out_format=json >"$O/bench3.log" 2>&1
timeout 45 bash -c '
    for r in 1 2; do
        for n in 100000 10000; do
            for t in 1 2; do
                echo "== r$r n $n threads $t"
                taskset -c 0,1 '"$D"'/run_new --crowd --n $n --frames 11 --threads $t \
                    --crowd-route neighbourhoods --crowd-route seed --quiet </dev/null 2>&1 |
                    grep -E "^  (neighbourhoods|seed) "
            done
        done
    done' >"$O/crowd3.txt" 2>&1
echo "done after $SECONDS s" >>"$O/info3.txt"
