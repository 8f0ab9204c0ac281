#!/usr/bin/env bash
# Every backend's benchmark table in one run (issue 25): Redis next to its peers
# (bench/run_side_by_side.sh), then ZooKeeper next to Curator, PostgreSQL next to Redis, etcd
# next to python3-etcd3, the semaphores and the one-shot process (bench/backend_bench.sh), all
# from one build, servers on CPU 1 and clients on CPU 0. BENCHMARKS.md opens with its summary.
#
#   bench/run_all.sh [--rounds N] [--quick] [BUILD_DIR]   results in $OUT (default /tmp/dlock-all-<time>)
#
#   BUILD_DIR   a configured tree to build the benchmarks in (default build/bench-all: Release,
#               tests on, since bench_servers starts the servers through the tests' fixtures)
#   --rounds N  backend_bench.sh's interleaved rounds (default 3)
#   --quick     a check of the procedure, not a measurement: short runs, one round
#   QUIET=L     before each part, wait (at most 10 minutes) until the 1-minute load average is
#               under L (default 0.5): a part must not start on the tail of a build
#
# $OUT/summary.md: the machine, the commit, and for each part its tables against the targets
# (bench/summarize_redis.py, bench/summarize_backends.py); $OUT/redis and $OUT/backends hold
# every command (with the load average before it) and every result. About 30 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3 QUICK=() BB=()
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --quick) QUICK=(--quick) BB=(--seconds 1 --keepalive-seconds 3) ROUNDS=1; shift ;;
    -*) echo "unknown option $1" >&2; exit 64 ;;
    *) break ;;
  esac
done
BUILD=${1:-build/bench-all}
OUT=${OUT:-/tmp/dlock-all-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DDLOCK_BUILD_TESTS=ON -DDLOCK_BUILD_EXAMPLES=OFF \
    -DDLOCK_BUILD_BENCH=ON -DDLOCK_BUILD_TOOLS=ON >/dev/null
fi
cmake --build "$BUILD" -j"$(nproc)" --target lock_bench pipeline_bench blocking_pair bench_servers dlock_cli_main >/dev/null
# etcd's memory floor exists only in a build with the etcd backend.
cmake --build "$BUILD" -j"$(nproc)" --target etcd_memory_floor >/dev/null 2>&1 || true

quiet() { # waits for the load average to settle after a build or the previous part
  local limit=${QUIET:-0.5} t
  for t in $(seq 1 120); do
    awk -v l="$limit" '{ exit !($1 < l) }' /proc/loadavg && break
    sleep 5
  done
  echo "$1: load average $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)" | tee -a "$OUT/loads.txt"
}

start=$(date -u '+%Y-%m-%d %H:%M UTC')
quiet redis
# A quick run is no measurement: its charts stay in $OUT, the committed ones in bench/charts.
[ ${#QUICK[@]} -eq 0 ] || export CHARTS="$OUT/charts"
OUT="$OUT/redis" BUILD="$BUILD" bash bench/run_side_by_side.sh "${QUICK[@]}" > "$OUT/redis.log" 2>&1 ||
  echo "run_side_by_side.sh failed: see $OUT/redis.log" >&2
quiet backends
OUT="$OUT/backends" bash bench/backend_bench.sh --rounds "$ROUNDS" "${BB[@]}" "$BUILD" > "$OUT/backends.log" 2>&1 ||
  echo "backend_bench.sh failed: see $OUT/backends.log" >&2

{
  echo "Run: $start to $(date -u '+%H:%M UTC'), commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ local changes)'),"
  echo "$(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), build $BUILD"
  echo "($(grep -m1 CMAKE_BUILD_TYPE: "$BUILD/CMakeCache.txt" | cut -d= -f2)); load averages before each part: $(paste -sd';' "$OUT/loads.txt")."
  echo
  echo "## Redis (bench/run_side_by_side.sh)"
  echo
  python3 bench/summarize_redis.py "$OUT/redis"
  echo "## ZooKeeper, PostgreSQL, etcd, semaphores (bench/backend_bench.sh --rounds $ROUNDS)"
  echo
  sed -n '/^$/,$p' "$OUT/backends/summary.md" 2>/dev/null || echo "(no backends summary)"
} > "$OUT/summary.md"
cat "$OUT/summary.md"
echo "results: $OUT"
