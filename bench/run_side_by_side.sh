#!/usr/bin/env bash
# The benchmark procedure of BENCHMARKS.md, in one run: the peers' harness
# (../shared/bench/peers/run_all.sh), redis-benchmark for the same commands and scripts, and
# dlock's own scenarios, all with redis-server pinned to CPU 1 and every client to CPU 0.
#
#   bench/run_side_by_side.sh [--quick] [--no-peers]     results in $OUT (default /tmp/dlock-bench-<time>)
#
# It builds its own Release tree (build/bench); BUILD=dir uses that configured and built tree
# instead (lock_bench, pipeline_bench and the dlock CLI: bench/run_all.sh passes its own).
# Every row's command goes to $OUT/commands.txt with the 1-minute load average before it;
# bench/summarize_redis.py $OUT prints the rows against the standing targets.
#
# D's targets are judged on D rounds at the end: the peers' BLPOP floor and dlock's D rows
# alternated DROUNDS times (needs the peers; $OUT/D_rounds).
# D keeps every hand-off sample ($OUT/D_<kind>*.samples) and, at the end, bench/charts.py draws
# the SVG charts of BENCHMARKS.md from $OUT into bench/charts/ (CHARTS=dir to put them elsewhere;
# `python3 bench/charts.py $OUT` redraws them from the last results without re-running).
set -euo pipefail
cd "$(dirname "$0")/.."
QUICK= PEERS=1
for a in "$@"; do
  case $a in --quick) QUICK=--quick ;; --no-peers) PEERS= ;; esac
done
PEERS_DIR=${PEERS_DIR:-$(cd .. && pwd)/shared/bench/peers}
OUT=${OUT:-/tmp/dlock-bench-$(date +%Y%m%d-%H%M%S)}
SECS=$([ -n "$QUICK" ] && echo 2 || echo 4)
mkdir -p "$OUT"
DLOCK_DEPS_EXTRA="python3-redis hyperfine gnuplot-nox" bash scripts/deps.sh || true

if [ -z "${BUILD:-}" ]; then
  BUILD=build/bench
  cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DDLOCK_BUILD_TESTS=OFF \
    -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_BENCH=ON -DDLOCK_BUILD_TOOLS=ON >/dev/null
  cmake --build build/bench -j"$(nproc)" --target lock_bench pipeline_bench blocking_pair dlock_cli_main >/dev/null
fi
LB=$BUILD/bench/lock_bench PB=$BUILD/bench/pipeline_bench DL=$BUILD/tools/dlock/dlock
BP=$BUILD/bench/blocking_pair
for b in "$LB" "$PB" "$DL" "$BP"; do
  [ -x "$b" ] || { echo "$b not built" >&2; exit 66; }
done
{
  echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ local changes)'), build: $BUILD"
} > "$OUT/machine.txt"

if [ -n "$PEERS" ]; then
  echo "== peers (run_all.sh) =="
  echo "peers: (load $(cut -d' ' -f1 /proc/loadavg)) OUT=$OUT/peers bash $PEERS_DIR/run_all.sh 7390 $QUICK" >> "$OUT/commands.txt"
  OUT="$OUT/peers" bash "$PEERS_DIR/run_all.sh" 7390 $QUICK > "$OUT/peers.log" 2>&1 || echo "peers failed: see $OUT/peers.log"
fi

# Our own pinned server.
port=7395
dir=$(mktemp -d)
taskset -c 1 redis-server --port $port --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --logfile "$dir/redis.log" </dev/null >/dev/null 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 500); do redis-cli -p $port PING 2>/dev/null | grep -q PONG && break; sleep 0.01; done
URL=redis://127.0.0.1:$port
C0="taskset -c 0"
log() { echo "$*" | tee -a "$OUT/commands.txt" >/dev/null; }
run() { # run NAME CMD...: records the command, the load average before it, and its output
  local name=$1; shift
  log "$name: (load $(cut -d' ' -f1 /proc/loadavg)) $*"
  "$@" > "$OUT/$name.txt" 2>&1 || echo "$name failed" >&2
  cat "$OUT/$name.txt"
}

echo "== redis-benchmark (same server, same pinning) =="
# Key layouts from the library (`dlock keys`), scripts from their kind's folder.
field() { "$DL" keys --kind "$1" "$2" | awk -v f="$3" '$1 == f { print $2 }'; }
L_TOKEN=$(field lock 'L:__rand_int__' fencing) L_CHANNEL=$(field lock 'L:__rand_int__' channel)
S_CHANNEL=$(field simple 'S:__rand_int__' channel)
ACQ=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/reentrant/acquire.lua)")
REL=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/reentrant/release.lua)")
CAD=$(redis-cli -p $port SCRIPT LOAD "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end")
SREL=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/simple/release.lua)")
rb() { local name=$1 n=$2; shift 2; run "rb_$name" $C0 redis-benchmark -p $port -n "$n" -r 100000000 --csv "$@"; }
rb ping_c1_p1 30000 -c 1 -P 1 PING
rb ping_c1_p16 2000000 -c 1 -P 16 PING
rb ping_c1_p50 2000000 -c 1 -P 50 PING
rb cad_c1_p16 1000000 -c 1 -P 16 EVALSHA "$CAD" 1 'k:__rand_int__' tok
rb cad_c1_p50 1000000 -c 1 -P 50 EVALSHA "$CAD" 1 'k:__rand_int__' tok
rb ping_c8_p16 3000000 -c 8 -P 16 PING
rb ping_c50_p16 4000000 -c 50 -P 16 PING
rb cad_c1_p1 30000 -c 1 -P 1 EVALSHA "$CAD" 1 'k:__rand_int__' tok
# Scenario A's floor: dlock's own commands one at a time on one connection (the server cost of
# a SET NX PX or a script is above a PING's; the sum of two p50s is what no client can beat).
rb setnx_c1_p1 30000 -c 1 -P 1 SET 'S:__rand_int__' tok NX PX 30000
rb srelease_c1_p1 30000 -c 1 -P 1 EVALSHA "$SREL" 2 'S:__rand_int__' "$S_CHANNEL" tok PUBLISH
rb acquire_c1_p1 30000 -c 1 -P 1 EVALSHA "$ACQ" 2 'L:__rand_int__' "$L_TOKEN" 30000 'owner:1'
rb release_c1_p1 30000 -c 1 -P 1 EVALSHA "$REL" 2 'L:__rand_int__' "$L_CHANNEL" 0 30000 'owner:1' PUBLISH 0
rb cad_c50_p16 1000000 -c 50 -P 16 EVALSHA "$CAD" 1 'k:__rand_int__' tok
rb acquire_c50 400000 -c 50 -P 1 EVALSHA "$ACQ" 2 'L:__rand_int__' "$L_TOKEN" 30000 'owner:1'
rb release_c50 400000 -c 50 -P 1 EVALSHA "$REL" 2 'L:__rand_int__' "$L_CHANNEL" 0 30000 'owner:1' PUBLISH 0
rb setnx_c50 400000 -c 50 -P 1 SET 'S:__rand_int__' tok NX PX 30000
rb srelease_c50 400000 -c 50 -P 1 EVALSHA "$SREL" 2 'S:__rand_int__' "$S_CHANNEL" tok PUBLISH
# The same floors as the plainest client sees them (bench/blocking_pair: one blocking socket,
# no library): the kinds' own acquire and release on one key and token (the owner's path), and
# two PINGs with and without epoll_ctl calls around each wait (BENCHMARKS.md: on this VM they
# alone make a round trip faster, and redis-benchmark makes them).
S_FIXED=S:blocking-pair L_FIXED=L:blocking-pair F_FIXED=F:blocking-pair W_FIXED=W:blocking-pair
FACQ=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/fair/acquire.lua)")
FREL=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/fair/release.lua)")
WACQ=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/rwlock/write_acquire.lua)")
WREL=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/rwlock/write_release.lua)")
bp_kind() { # bp_kind ROW KIND: the kind's own acquire and release on a plain blocking socket
  local name=$1
  case $2 in
    simple) run "$name" $C0 $BP $port 3 SET $S_FIXED tok NX PX 30000 -- EVALSHA "$SREL" 2 \
      $S_FIXED "$(field simple $S_FIXED channel)" tok PUBLISH ;;
    lock) run "$name" $C0 $BP $port 3 EVALSHA "$ACQ" 2 $L_FIXED "$(field lock $L_FIXED fencing)" \
      30000 owner:1 -- EVALSHA "$REL" 2 $L_FIXED "$(field lock $L_FIXED channel)" 0 30000 owner:1 \
      PUBLISH 0 ;;
    fair) run "$name" $C0 $BP $port 3 EVALSHA "$FACQ" 4 $F_FIXED "$(field fair $F_FIXED queue)" \
      "$(field fair $F_FIXED timeouts)" "$(field fair $F_FIXED fencing)" 30000 owner:1 5000 1 -- \
      EVALSHA "$FREL" 4 $F_FIXED "$(field fair $F_FIXED queue)" "$(field fair $F_FIXED timeouts)" \
      "$(field fair $F_FIXED channel)" 0 30000 owner:1 PUBLISH ;;
    write) run "$name" $C0 $BP $port 3 EVALSHA "$WACQ" 3 $W_FIXED "$(field write $W_FIXED fencing)" \
      "$(field write $W_FIXED intent)" 30000 owner:1 2000 -- \
      EVALSHA "$WREL" 2 $W_FIXED "$(field write $W_FIXED channel)" 1 30000 owner:1 PUBLISH ;;
  esac
}
for kind in simple lock fair write; do bp_kind "bp_$kind" $kind; done
# Scenario C's floor with one client: a critical section's own requests on a plain blocking socket
# (bench/blocking_pair), what lock_bench C sends per section with the local hand-over: GET and SET
# of the counter, then the kind's hand-over script from the holder to the waiter; the fair lock's
# waiter also queues again, pipelined with the hand-over (dlock sends it while the next holder
# works). Two sections per pass, the lock going from owner 1 to owner 2 and back; the hand-overs
# skip the NUMSUB check (dlock sends it on some), so the floor is a little cheaper than dlock's.
SH=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/simple/handover.lua)")
LH=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/reentrant/handover.lua)")
FH=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/fair/handover.lua)")
WH=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/rwlock/write_handover.lua)")
bp_section() { # bp_section ROW KIND
  local name=$1 n=C:section-$2 c=C:section-counter from to; local -a keys step
  redis-cli -p $port DEL $n "$(field $2 $n fencing)" >/dev/null
  case $2 in
    simple) keys=("$n" "$(field simple $n channel)"); redis-cli -p $port SET $n owner:1 >/dev/null ;;
    lock) keys=("$n" "$(field lock $n channel)" "$(field lock $n fencing)")
      redis-cli -p $port HSET $n owner:1 1 >/dev/null ;;
    fair) keys=("$n" "$(field fair $n queue)" "$(field fair $n timeouts)" "$(field fair $n channel)"
        "$(field fair $n fencing)")
      redis-cli -p $port DEL "${keys[1]}" "${keys[2]}" >/dev/null
      redis-cli -p $port HSET $n owner:1 1 >/dev/null
      redis-cli -p $port EVALSHA "$FACQ" 4 "$n" "${keys[1]}" "${keys[2]}" "${keys[4]}" 30000 owner:2 \
        5000 1 >/dev/null ;;
    write) keys=("$n" "$(field write $n channel)" "$(field write $n fencing)" "$(field write $n intent)")
      redis-cli -p $port HSET $n mode write owner:1:write 1 >/dev/null ;;
  esac
  local -a args=()
  for from in 1 2; do
    to=$((3 - from))
    case $2 in
      simple) step=(EVALSHA "$SH" 2 "${keys[@]}" "owner:$from" "owner:$to" 30000 PUBLISH "") ;;
      lock) step=(EVALSHA "$LH" 3 "${keys[@]}" 0 "owner:$from" PUBLISH "" "owner:$to" 30000) ;;
      fair) step=(EVALSHA "$FH" 5 "${keys[@]}" "owner:$from" PUBLISH "owner:$to" 30000 ++
        EVALSHA "$FACQ" 4 "$n" "${keys[1]}" "${keys[2]}" "${keys[4]}" 30000 "owner:$from" 5000 1) ;;
      write) step=(EVALSHA "$WH" 4 "${keys[@]}" 1 "owner:$from" PUBLISH "" "owner:$to" 30000) ;;
    esac
    args+=(GET "$c" -- SET "$c" "$from" -- "${step[@]}")
    [ $from = 2 ] || args+=(--)
  done
  run "$name" $C0 $BP $port 2 "${args[@]}"
}
run bp_ping_churn $C0 $BP $port 3 --churn PING -- PING
redis-cli -p $port FLUSHALL >/dev/null

echo "== dlock pipeline_bench (one connection) =="
for m in sync; do for c in 1 8 50; do
  run "pb_ping_${m}_$c" $C0 $PB $URL PING $m $c $SECS
  run "pb_evalsha_${m}_$c" $C0 $PB $URL EVALSHA $m $c $SECS
done; done
run pb_ping_async_50 $C0 $PB $URL PING async 50 $SECS
run pb_evalsha_async_50 $C0 $PB $URL EVALSHA async 50 $SECS

echo "== dlock lock_bench A-D =="
for kind in lock simple fair write; do
  # A's unit (two PING round trips) measured right next to A, and the server's own time per
  # command during A (INFO commandstats: a script costs the server more than a PING).
  rb "ping_c1_p1_before_A_$kind" 30000 -c 1 -P 1 PING
  run "bp_ping_before_A_$kind" $C0 $BP $port 3 PING -- PING
  redis-cli -p $port CONFIG RESETSTAT >/dev/null
  run "A_$kind" $C0 $LB $URL A --kind $kind --seconds 3
  redis-cli -p $port INFO commandstats > "$OUT/A_${kind}_commandstats.txt"
  run "A_${kind}_io_thread" $C0 $LB $URL A --kind $kind --seconds 3 --io-thread
  run "B_$kind" $C0 $LB $URL B --kind $kind --workers 50 --keys 50 --seconds 3
  redis-cli -p $port CONFIG RESETSTAT >/dev/null
  run "B_${kind}_async" $C0 $LB $URL B --kind $kind --workers 50 --keys 50 --seconds 3 --async
  redis-cli -p $port INFO commandstats > "$OUT/B_${kind}_async_commandstats.txt"
  run "C_$kind" $C0 $LB $URL C --kind $kind --workers 8 --ops 2000
  run "C_${kind}_no_handover" $C0 $LB $URL C --kind $kind --workers 8 --ops 2000 --no-handover
  run "C_${kind}_own_clients" $C0 $LB $URL C --kind $kind --workers 8 --ops 2000 --client-per-worker
  run "D_$kind" $C0 $LB $URL D --kind $kind --ops 300 --samples "$OUT/D_$kind.samples"
  run "D_${kind}_no_handover" $C0 $LB $URL D --kind $kind --ops 300 --no-handover \
    --samples "$OUT/D_${kind}_no_handover.samples"
  run "D_${kind}_own_clients" $C0 $LB $URL D --kind $kind --ops 300 --client-per-worker \
    --samples "$OUT/D_${kind}_own_clients.samples"
done
run hold_10000 $C0 $LB $URL hold --locks 10000 --watchdog-ms 3000

# A's verdict against its floor: the kind's own pair on a plain blocking socket and dlock's A,
# alternated AROUNDS times (default 5, 1 with --quick); the summary judges the median of the
# per-round ratios (2026-11-29: one row of either moves by 10-20 % between rounds).
echo "== A rounds: each kind's own pair on a plain socket and dlock's A, alternated =="
AROUNDS=${AROUNDS:-$([ -n "$QUICK" ] && echo 1 || echo 5)}
mkdir -p "$OUT/A_rounds"
for r in $(seq 1 "$AROUNDS"); do
  run "A_rounds/bp_ping_$r" $C0 $BP $port 3 PING -- PING
  for kind in simple lock fair write; do
    bp_kind "A_rounds/bp_${kind}_$r" $kind
    run "A_rounds/A_${kind}_$r" $C0 $LB $URL A --kind $kind --seconds 3
  done
  redis-cli -p $port FLUSHALL >/dev/null
done

# C's verdict with one client against its floor: each kind's critical section on a plain socket
# (bp_section, two sections per pass) and dlock's C, alternated CROUNDS times (default 5, 1 with
# --quick); the summary judges the median of the per-round ratios ($OUT/C_rounds).
echo "== C rounds: each kind's critical section on a plain socket and dlock's C, alternated =="
CROUNDS=${CROUNDS:-$([ -n "$QUICK" ] && echo 1 || echo 5)}
mkdir -p "$OUT/C_rounds"
for r in $(seq 1 "$CROUNDS"); do
  for kind in simple lock fair write; do
    bp_section "C_rounds/bp_section_${kind}_$r" $kind
    run "C_rounds/C_${kind}_$r" $C0 $LB $URL C --kind $kind --workers 8 --ops 2000
  done
  redis-cli -p $port FLUSHALL >/dev/null
done

# D's verdict: one row of 300 hand-offs moves by 0.6-1.5 x between runs of the same code, and
# so does the BLPOP floor's (234-427 us in ten rounds of 2026-11-29). So the floor and every
# kind's D (a client per worker) alternate DROUNDS times (default 5, 1 with --quick), each round
# next to its own floor; the summary judges the median of the per-round ratios.
if [ -n "$PEERS" ]; then
  echo "== D rounds: the BLPOP floor and D, alternated =="
  DROUNDS=${DROUNDS:-$([ -n "$QUICK" ] && echo 1 || echo 5)}
  mkdir -p "$OUT/D_rounds"
  for r in $(seq 1 "$DROUNDS"); do
    log "D_rounds/floor-blpop-$r: (load $(cut -d' ' -f1 /proc/loadavg)) node $PEERS_DIR/node/bench.js --port 7391 --libs floor-blpop"
    PEERS_NODE_DIR=${PEERS_NODE_DIR:-/tmp/peers/node} timeout 120 $C0 node "$PEERS_DIR/node/bench.js" \
      --port 7391 --libs floor-blpop --json "$OUT/D_rounds/floor-blpop-$r.json" \
      > "$OUT/D_rounds/floor-blpop-$r.txt" 2>&1 || echo "D_rounds floor $r failed" >&2
    for kind in lock simple fair write; do
      run "D_rounds/D_${kind}_$r" $C0 $LB $URL D --kind $kind --ops 300 --client-per-worker
    done
  done
fi
python3 bench/charts.py "$OUT" "${CHARTS:-bench/charts}" || echo "charts failed" >&2
echo "results in $OUT"
