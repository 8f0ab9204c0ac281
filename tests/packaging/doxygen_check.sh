#!/usr/bin/env bash
# The Doxygen check of the public headers (docs/Doxyfile: warnings are errors).
#   doxygen_check.sh SOURCE_DIR OUT_DIR headers     every public declaration is documented
#   doxygen_check.sh SOURCE_DIR OUT_DIR self-test   the same Doxyfile fails on a header with an
#                                                   undocumented member and free function
set -euo pipefail
src=$1 out=$2 mode=$3
mkdir -p "$out"
cd "$src"
log=$out/doxygen-$mode.log
case $mode in
headers)
    if DLOCK_DOXYGEN_OUT=$out DLOCK_VERSION=check doxygen docs/Doxyfile 2>"$log"; then
        echo "every public declaration in include/dlock is documented"
        exit 0
    fi
    echo "doxygen warnings (document these in include/dlock, /// style):" >&2
    cat "$log" >&2
    exit 1
    ;;
self-test)
    # docs/Doxyfile with INPUT replaced by the fixture header.
    if { cat docs/Doxyfile; echo "INPUT = tests/packaging/undocumented"; echo "EXCLUDE ="; } |
        DLOCK_DOXYGEN_OUT=$out DLOCK_VERSION=check doxygen - 2>"$log"; then
        echo "doxygen accepted a header with undocumented declarations" >&2
        exit 1
    fi
    status=0
    for what in "undocumented_member" "undocumented_function"; do
        grep -q "$what.*is not documented" "$log" || {
            echo "no warning names $what:" >&2
            status=1
        }
    done
    [ $status = 0 ] || cat "$log" >&2
    exit $status
    ;;
*)
    echo "usage: $0 SOURCE_DIR OUT_DIR headers|self-test" >&2
    exit 64
    ;;
esac
