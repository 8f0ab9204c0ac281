#!/usr/bin/env bash
# The lock family's benchmark rows of BENCHMARKS.md ("Issue 9"), in one run: scenarios A-D for
# every kind next to the reentrant lock, C with 8 workers per kind (one shared client, and one
# client per worker), read-mostly traffic (R) on the read-write and the exclusive lock, and
# Redlock over 1, 3 and 5 masters next to node-redlock's (bench/redlock_peer.js; its modules
# from the peer harness's npm install in $PEERS_NODE_DIR, default /tmp/peers/node). Every
# redis-server pinned to CPU 1, every client to CPU 0 (../shared/bench/peers/README.md).
#
#   bench/run_family.sh [ROUNDS]      results in $OUT (default /tmp/dlock-family-<time>)
# ROUNDS (default 3) repeats each row, interleaving the kinds, so drift hits all of them alike.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
OUT=${OUT:-/tmp/dlock-family-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DDLOCK_BUILD_TESTS=OFF \
  -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_BENCH=ON -DDLOCK_BUILD_TOOLS=ON >/dev/null
cmake --build build/bench -j"$(nproc)" --target lock_bench >/dev/null
LB=build/bench/bench/lock_bench
C0="taskset -c 0"

servers=() dirs=()
start_server() { # start_server PORT
  local d; d=$(mktemp -d)
  taskset -c 1 redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no --dir "$d" \
    --logfile "$d/redis.log" </dev/null >/dev/null 2>&1 &
  servers+=($!) dirs+=("$d")
  for _ in $(seq 1 500); do redis-cli -p "$1" PING 2>/dev/null | grep -q PONG && return; sleep 0.01; done
  echo "redis-server on $1 did not start" >&2; exit 1
}
cleanup() { kill "${servers[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "${dirs[@]}"; }
trap cleanup EXIT
for p in 7396 7397 7398 7399 7400; do start_server $p; done
URL=redis://127.0.0.1:7396

log() { echo "$*" >> "$OUT/commands.txt"; }
run() { # run NAME CMD...: records the command and appends its JSON line to NAME.jsonl
  local name=$1; shift
  log "$name: $*"
  "$@" >> "$OUT/$name.jsonl" 2>> "$OUT/$name.err" || echo "$name failed" >&2
}

KINDS=${KINDS:-"lock fair read write"}
M1=redis://127.0.0.1:7396
M3=$M1,redis://127.0.0.1:7397,redis://127.0.0.1:7398
M5=$M3,redis://127.0.0.1:7399,redis://127.0.0.1:7400
PEERS_NODE_DIR=${PEERS_NODE_DIR:-/tmp/peers/node}
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r of $ROUNDS =="
  for kind in $KINDS; do
    run "A_$kind" $C0 $LB $URL A --kind $kind --seconds 3
    run "B_$kind" $C0 $LB $URL B --kind $kind --workers 50 --keys 50 --seconds 3
    run "C_$kind" $C0 $LB $URL C --kind $kind --workers 8 --ops 2000
    run "C_${kind}_own_clients" $C0 $LB $URL C --kind $kind --workers 8 --ops 2000 --client-per-worker
    run "D_$kind" $C0 $LB $URL D --kind $kind --ops 300
    run "D_${kind}_own_clients" $C0 $LB $URL D --kind $kind --ops 300 --client-per-worker
  done
  run C_simple_own_clients $C0 $LB $URL C --kind simple --workers 8 --ops 2000 --client-per-worker
  # Read-mostly: 9 reader threads and 1 writer on one read-write lock, then the same traffic on
  # the exclusive lock.
  run R_shared $C0 $LB $URL R --kind read --seconds 3
  run R_exclusive $C0 $LB $URL R --kind lock --seconds 3
  # Redlock acquire+release pairs over 1, 3 and 5 masters, and node-redlock's over the same.
  for m in 1 3 5; do
    urls=$(eval echo "\$M$m")
    run "redlock_$m" $C0 $LB "$urls" redlock --seconds 3
    if [ -d "$PEERS_NODE_DIR/node_modules/redlock" ]; then
      ports=$(tr ',' '\n' <<<"$urls" | sed 's/.*://' | paste -sd,)
      run "node_redlock_$m" $C0 node bench/redlock_peer.js "$ports" 3
    fi
  done
done
echo "results in $OUT"
