#!/usr/bin/env bash
# Builds and runs the consumer program (tests/consumer/) the ways a user's project takes the
# library, each against the pairs it expects:
#   install  - `cmake --install` of BUILD into a fresh prefix, then find_package (shared and
#              static) and pkg-config (shared, and --static for a fully static program);
#   system   - the same against what is installed on the system (the .deb), no prefix given;
#   subdir   - add_subdirectory of the source tree (shared and static).
# Usage: tests/consumer/run.sh install BUILD WORK | system WORK | subdir WORK
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mode=$1
shift

absolute() { # a directory, made if need be, as an absolute path
    mkdir -p "$1"
    (cd "$1" && pwd)
}

run() { # name, program...
    local name=$1
    shift
    echo "-- $name: $*"
    "$@"
}

package() { # work, prefix ('' for the system)
    local work=$1 prefix=$2
    local args=()
    [ -n "$prefix" ] && args=(-DCMAKE_PREFIX_PATH="$prefix")
    cmake -S "$here" -B "$work/package" "${args[@]}" >/dev/null
    cmake --build "$work/package" >/dev/null
    run "find_package, shared" "$work/package/consumer_shared"
    run "find_package, static" "$work/package/consumer_static"
    # The static consumer holds no reference to the shared library.
    local deps
    deps=$(ldd "$work/package/consumer_static" 2>&1 || true)
    if grep -q libbroadphase <<<"$deps"; then
        echo "consumer_static depends on libbroadphase.so"
        exit 1
    fi
}

pkgconfig() { # work, PKG_CONFIG_PATH ('' for the system), libdir for the run
    local work=$1 path=$2 libdir=$3
    local out=$work/pkg-config
    mkdir -p "$out"
    export PKG_CONFIG_PATH=$path
    local cflags libs static_libs
    cflags=$(pkg-config --cflags broadphase)
    libs=$(pkg-config --libs broadphase)
    static_libs=$(pkg-config --static --libs broadphase)
    echo "pkg-config: --cflags '$cflags' --libs '$libs' --static --libs '$static_libs'"
    cc -std=c17 -Wall -Werror $cflags -c "$here/consumer.c" -o "$out/consumer.o"
    c++ -std=c++17 -Wall -Werror $cflags -c "$here/consumer.cpp" -o "$out/consumer_cpp.o"
    c++ "$out/consumer.o" "$out/consumer_cpp.o" $libs -o "$out/consumer_shared"
    run "pkg-config, shared" env LD_LIBRARY_PATH="$libdir" "$out/consumer_shared"
    c++ -static "$out/consumer.o" "$out/consumer_cpp.o" $static_libs -o "$out/consumer_static"
    local deps
    deps=$(ldd "$out/consumer_static" 2>&1 || true)
    if grep -q '=>' <<<"$deps"; then
        echo "the --static program is not static"
        exit 1
    fi
    run "pkg-config --static, a static program" "$out/consumer_static"
}

case $mode in
install)
    build=$(absolute "$1")
    rm -rf "$2"
    work=$(absolute "$2")
    cmake --install "$build" --prefix "$work/prefix" >/dev/null
    libdir=$(dirname "$(find "$work/prefix" -name 'libbroadphase.so' | head -n 1)")
    package "$work" "$work/prefix"
    pkgconfig "$work" "$libdir/pkgconfig" "$libdir"
    ;;
system)
    rm -rf "$1"
    work=$(absolute "$1")
    package "$work" ""
    pkgconfig "$work" "" ""
    ;;
subdir)
    rm -rf "$1"
    work=$(absolute "$1")
    cmake -S "$here" -B "$work/subdir" -DBROADPHASE_CONSUMER_MODE=subdirectory \
        -DBROADPHASE_SOURCE_DIR="$repo" >/dev/null
    cmake --build "$work/subdir" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null
    run "add_subdirectory, shared" "$work/subdir/consumer_shared"
    run "add_subdirectory, static" "$work/subdir/consumer_static"
    # no tests, benchmarks or peers of ours in a subproject
    if [ -e "$work/subdir/broadphase/test_world" ] || [ -e "$work/subdir/broadphase/broadphase-bench" ]; then
        echo "the subproject built its tests or benchmarks"
        exit 1
    fi
    ;;
*)
    echo "usage: $0 install BUILD WORK | system WORK | subdir WORK" >&2
    exit 2
    ;;
esac
echo "consumer ($mode): ok"
