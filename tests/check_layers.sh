#!/usr/bin/env bash
# Holds the engine to its declared layers (engine/LAYERS): every #include of an engine file, and
# (given the engine's object files) every call or data reference from one engine file into
# another, must go to a lower layer, or stay within the file's own module in its own layer.
# Also fails on an engine file the table does not place.
#   check_layers.sh ENGINE_DIR [OBJECT_FILE...]
set -euo pipefail
engine=${1:?usage: check_layers.sh ENGINE_DIR [OBJECT_FILE...]}
shift

declare -A layer_of
files=()
for f in "$engine"/*.c "$engine"/*.h; do files+=("$(basename "$f")"); done

# <methods> in LAYERS: the files of every method of the one list (BROADPHASE_METHOD_LIST in the
# public header), name.h name.c name_*.h name_*.c for each X(BROADPHASE_METHOD_..., name).
method_patterns=""
while read -r name; do
    method_patterns+=" $name.h $name.c ${name}_*.h ${name}_*.c"
done < <(sed -n 's/^[[:space:]]*X(BROADPHASE_METHOD_[A-Z0-9_]*, \([a-z0-9_]*\)).*/\1/p' \
    "$engine/include/broadphase.h")
[[ -n "$method_patterns" ]] || { echo "layers: no methods in $engine/include/broadphase.h" >&2; exit 1; }

# The first pattern that matches a file gives its layer.
while read -r n patterns; do
    [[ -z "$n" || "$n" == \#* ]] && continue
    patterns=${patterns//<methods>/$method_patterns}
    for p in $patterns; do
        for f in "${files[@]}"; do
            # shellcheck disable=SC2053
            [[ -z "${layer_of[$f]:-}" && "$f" == $p ]] && layer_of[$f]=$n
        done
    done
done < "$engine/LAYERS"

module() { local b=${1%%.*}; echo "${b%%_*}"; }

failures=0
complain() { echo "layers: $*" >&2; failures=$((failures + 1)); }

for f in "${files[@]}"; do
    [[ -n "${layer_of[$f]:-}" ]] || complain "$f is in no layer of engine/LAYERS"
done

# to from: may file `from` reach file `to`?
allowed() {
    local to=$1 from=$2
    local lt=${layer_of[$to]:-} lf=${layer_of[$from]:-}
    [[ -z "$lt" || -z "$lf" ]] && return 0 # reported above
    ((lt < lf)) && return 0
    ((lt == lf)) && [[ "$(module "$to")" == "$(module "$from")" ]] && return 0
    return 1
}

includes=0
for f in "${files[@]}"; do
    while read -r inc; do
        [[ -e "$engine/$inc" ]] || continue # simd/, threads/, the public header, the C library
        includes=$((includes + 1))
        allowed "$inc" "$f" ||
            complain "$f (layer ${layer_of[$f]}) includes $inc (layer ${layer_of[$inc]})"
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$engine/$f")
done

calls=0
if (($# > 0)); then
    declare -A defined_in
    # name.c.o (CMake) or name.o -> name.c
    source_of() { local b; b=$(basename "$1"); b=${b%.o}; [[ "$b" == *.c ]] || b=$b.c; echo "$b"; }
    for o in "$@"; do
        src=$(source_of "$o")
        while read -r _ type sym; do
            [[ "$type" =~ ^[TDRB]$ ]] && defined_in[$sym]=$src
        done < <(nm --defined-only "$o")
    done
    for o in "$@"; do
        src=$(source_of "$o")
        while read -r _ sym; do
            to=${defined_in[$sym]:-}
            [[ -z "$to" || "$to" == "$src" ]] && continue
            calls=$((calls + 1))
            allowed "$to" "$src" ||
                complain "$src (layer ${layer_of[$src]}) uses $sym from $to (layer ${layer_of[$to]})"
        done < <(nm --undefined-only "$o" | awk '{print $1, $2}')
    done
fi

echo "layers: ${#files[@]} files, $includes engine includes, $calls references between files checked"
((failures == 0)) || { echo "layers: $failures violations" >&2; exit 1; }
