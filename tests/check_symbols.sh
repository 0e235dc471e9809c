#!/usr/bin/env bash
# The libraries' symbol tables against the header (a ctest test, in every configuration):
# - every global symbol that libbroadphase.a defines starts with broadphase_ (the public API) or
#   bp_ (internal), so that no name of ours clashes with one of the program linking it;
# - libbroadphase.so exports exactly the functions the header declares with BROADPHASE_API;
# - the static library defines each of them too.
# Usage: check_symbols.sh NM HEADER STATIC_LIB SHARED_LIB
set -euo pipefail
nm=$1 header=$2 static=$3 shared=$4
fail=0
public=$(grep -E '^BROADPHASE_API' "$header" | grep -oE 'broadphase_[a-z0-9_]+\(' | tr -d '(' |
    sort -u)
[ -n "$public" ] || { echo "no BROADPHASE_API function found in $header"; exit 1; }
echo "$(echo "$public" | wc -l) public functions in $(basename "$header")"

stray=$("$nm" -g --defined-only "$static" | awk 'NF == 3 {print $3}' |
    grep -vE '^(broadphase_|bp_)' | sort -u || true)
if [ -n "$stray" ]; then
    echo "$(basename "$static") defines global symbols outside broadphase_/bp_:"
    echo "$stray" | head -n 40
    fail=1
fi
defined=$("$nm" -g --defined-only "$static" | awk 'NF == 3 && $2 == "T" {print $3}' | sort -u)
missing=$(comm -23 <(echo "$public") <(echo "$defined"))
if [ -n "$missing" ]; then
    echo "$(basename "$static") lacks public functions:"
    echo "$missing"
    fail=1
fi

exported=$("$nm" -D --defined-only "$shared" | awk 'NF == 3 {print $3}' | sort -u)
missing=$(comm -23 <(echo "$public") <(echo "$exported"))
extra=$(comm -13 <(echo "$public") <(echo "$exported"))
if [ -n "$missing" ]; then
    echo "$(basename "$shared") does not export:"
    echo "$missing"
    fail=1
fi
if [ -n "$extra" ]; then
    echo "$(basename "$shared") exports symbols the header does not declare:"
    echo "$extra" | head -n 40
    fail=1
fi
[ "$fail" -eq 0 ] && echo "symbols: ok"
exit "$fail"
