#!/bin/bash
# Alternated base/new runs of the runner over a file of cases (one runner command line each);
# prints median/p99/worst of frame and first frame. The builds are /tmp/run_base and /tmp/run_new:
#   ROUNDS=2 bash perf/results/smooth-frames/cases-before-after.sh \
#       < perf/results/smooth-frames/cases_smooth.txt (or cases_load.txt, cases_windows.txt)
run() { # label binary args...
  local label=$1 b=$2; shift 2
  local out; out=$($b "$@" --quiet 2>&1)
  local fr; fr=$(echo "$out" | awk '/^  frame /{print $2, $3, $4}')
  local ff; ff=$(echo "$out" | awk '/^first frame/{print $9}')
  local th; th=$(echo "$out" | awk "/^threads:/{print \$6\"/\"\$8}")
  echo "$label | $* | frame med/p99/worst $fr | first $ff | last step threads $th"
}
while read -r line; do
  [ -z "$line" ] && continue
  for r in $(seq ${ROUNDS:-2}); do
    run base /tmp/run_base $line
    run new /tmp/run_new $line
  done
done
