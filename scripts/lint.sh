#!/usr/bin/env bash
# CI step 2 (scripts/test.sh): fails on any formatting difference or clang-tidy finding.
#   1. clang-format --dry-run --Werror over every tracked *.cpp and *.hpp (.clang-format);
#   2. clang-tidy with the checks of .clang-tidy (warnings are errors) over the project's own
#      translation units under src/ and tools/, as compiled by BUILD_DIR/compile_commands.json.
# Usage: scripts/lint.sh [BUILD_DIR]   (default build/ci; configure it first, e.g. step 1 of
# scripts/test.sh; no build is needed, but the generated header must exist: build it or run
# `cmake --build BUILD_DIR --target dlock_objects`).
# DLOCK_LINT_JOBS (default nproc) runs that many clang-tidy processes at once; DLOCK_LINT_TIMEOUT
# (default 900 s) bounds the clang-tidy part: 5 to 30 s of CPU per translation unit (each parses
# Asio and the standard library; kinds.cpp 5 s, client.cpp 15 s, net/connection.cpp 29 s on
# 2026-11-26), over 90 units. scripts/test.sh runs it in the background at idle priority and
# raises the bound to 2700 s.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${1:-build/ci}
jobs=${DLOCK_LINT_JOBS:-$(nproc)}

# 1. clang-format. Only tracked files: generated sources live in the build directory, and
# ':!:*/generated/*' keeps any generated file out should one ever be committed.
mapfile -t cxx < <(git ls-files -- '*.cpp' '*.hpp' ':!:*/generated/*')
[ ${#cxx[@]} -gt 0 ] || { echo "lint: no tracked C++ files (not a git checkout?)" >&2; exit 1; }
echo "lint: clang-format over ${#cxx[@]} files"
clang-format --dry-run --Werror --style=file "${cxx[@]}"

# 2. clang-tidy. The translation units come from the compile database, so files added or moved
# under src/ (any depth) are picked up without editing this script. Only src/ and tools/ for now:
# tests/, bench/ and examples/ would add 20 translation units (about twice the run time on 2 cores)
# and tests/ is being split up; add them once src/ is clean. Their headers are not reported.
db=$build/compile_commands.json
[ -f "$db" ] || { echo "lint: no $db; configure first: cmake -S . -B $build" >&2; exit 1; }
mapfile -t units < <(python3 - "$db" "$root" <<'EOF'
import json, os, re, sys
db, root = sys.argv[1], sys.argv[2]
files = set()
for e in json.load(open(db)):
    f = os.path.normpath(os.path.join(e["directory"], e["file"]))
    if re.match(re.escape(root) + r"/(src|tools)/.*\.cpp$", f):
        files.add(f)
# run-clang-tidy takes regular expressions; one exact, anchored pattern per file.
for f in sorted(files):
    print("^" + re.escape(f) + "$")
EOF
)
[ ${#units[@]} -gt 0 ] || { echo "lint: $db lists nothing under $root/src or tools" >&2; exit 1; }
echo "lint: clang-tidy over ${#units[@]} translation units ($jobs jobs)"
start=$SECONDS
# shellcheck disable=SC2016 # the $ in the sed expression is literal
root_re=$(printf '%s' "$root" | sed 's/[].*^$()+?{}|[\\]/\\&/g') # for -header-filter
# -header-filter: .clang-tidy's filter anchored at this checkout (our headers, never the build
#   directory's generated ones).
# -Wno-unknown-warning-option: the database holds g++'s flags; a gcc-only -W option (say -Wno-tsan
#   or -Wduplicated-cond) would otherwise be an error under -Werror. All other flags the project
#   sets are accepted by clang; a gcc-only -f option would stop clang-tidy with "unknown argument".
# run-clang-tidy always colours its output and echoes each command line: strip the colours, shorten
# the command line to the file name, and drop clang's "N warnings generated." (warnings in headers
# outside the filter and in disabled checks, never shown).
status=0
timeout "${DLOCK_LINT_TIMEOUT:-900}" run-clang-tidy -p "$build" -j "$jobs" -quiet \
  -header-filter="^$root_re/(include/dlock|src|tools)/" \
  -extra-arg=-Wno-unknown-warning-option \
  "${units[@]}" 2>&1 |
  sed -u -E -e 's/\x1b\[[0-9;]*m//g' \
    -e 's|^clang-tidy[-0-9]* --use-color .* ([^ ]+)$|clang-tidy \1|' \
    -e '/^[0-9]+ warnings? generated\.$/d' || status=$?
echo "lint: clang-tidy took $((SECONDS - start)) s"
if [ "$status" -ne 0 ]; then
  [ "$status" -eq 124 ] && echo "lint: clang-tidy timed out (DLOCK_LINT_TIMEOUT)" >&2
  echo "lint: clang-tidy findings above (fix them, or NOLINT(check) with a reason)" >&2
  exit 1
fi
echo "lint: clean"
