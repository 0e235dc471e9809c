#!/bin/bash
# alternated base/new runs of the runner; prints median/p99/worst of frame and first frame
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
