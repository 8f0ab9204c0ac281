#!/usr/bin/env bash
# Issues 13 and 14's benchmark rows in one run: scenarios A-D on ZooKeeper (a standalone server
# and a 3-node ensemble), dlock against Apache Curator 5.4.0's InterProcessMutex
# (bench/curator_bench.java), with each client process's peak RSS; A-D on PostgreSQL (advisory
# locks, `lease` rows, `shedlock` rows) next to Redis; A-D on etcd (one member), dlock against
# python3-etcd3 0.12's Lock (bench/etcd3_bench.py); the keepalive's cost per held lock; and a
# one-shot process (`dlock exec` as a cron singleton) on each backend.
#
#   bench/backend_bench.sh [--rounds N] [--seconds S] [--keepalive-seconds S] [--only zk|pg|etcd] BUILD_DIR
#
#   BUILD_DIR    a configured build with lock_bench, bench_servers and the dlock CLI built
#                (e.g. build/ci: cmake --build build/ci --target lock_bench bench_servers
#                dlock_cli_main); its ZooKeeper/PostgreSQL backends must be compiled in.
#   --rounds N   interleaved rounds (default 3); in each round every pair of compared rows runs
#                back to back, and the order flips between rounds (dlock first on odd rounds,
#                the peer first on even ones). The summary takes the median over the rounds.
#   --seconds S  length of A and B runs (default 3). C: 2,000 critical sections or 10 s;
#                D: 300 samples or 8 s.
#   --keepalive-seconds S  length of the keepalive runs (default 11: one renewal of a 30 s
#                watchdog lease, which renews every 10 s, falls inside).
#   --only zk|pg|etcd|sem  only the ZooKeeper, the PostgreSQL/Redis, the etcd or the semaphore
#                part (semaphores: A-D on every backend, next to Redisson's scripts on Redis and
#                Curator's InterProcessSemaphoreV2 on ZooKeeper).
#   OUT=dir      results (default /tmp/dlock-backends-<time>): commands.txt, results.jsonl (one
#                line per run: row, round, the client's JSON), oneshot.json (hyperfine),
#                summary.md (the tables), stderr.log.
#
# Placement as in ../shared/bench/peers/README.md: every server (ZooKeeper JVMs, postgres,
# redis-server) on CPU 1, every client process (lock_bench, the Curator JVM, dlock exec) on
# CPU 0 (taskset). Servers come from bench_servers (the tests' RAII fixtures: ZooKeeper from
# Debian's jars with tickTime 2000, PostgreSQL by initdb + postgres with fsync off) and a
# private redis-server; all stop when the script exits.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=3 SECS=3 KSECS=11 ONLY=
while [ $# -gt 1 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    --keepalive-seconds) KSECS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
done
BUILD=${1:?usage: bench/backend_bench.sh [--rounds N] [--seconds S] [--only zk|pg|etcd|sem] BUILD_DIR}
want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }
LB=$BUILD/bench/lock_bench BS=$BUILD/bench/bench_servers DL=$BUILD/tools/dlock/dlock
for b in "$LB" "$BS" "$DL"; do
  [ -x "$b" ] || { echo "$b not built" >&2; exit 66; }
done
# What only this benchmark needs (not CI): javac for the Curator program, hyperfine,
# python3-etcd3 for etcd's peer.
DLOCK_DEPS_EXTRA="openjdk-17-jdk-headless hyperfine python3-etcd3" bash scripts/deps.sh || true
OUT=${OUT:-/tmp/dlock-backends-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
: > "$OUT/results.jsonl"
: > "$OUT/commands.txt"
C0="taskset -c 0" C1="taskset -c 1"

source bench/pinned_runs.sh # log, servers, run, curator_classes, cleanup of the servers
dirs=()
trap 'cleanup; for d in "${dirs[@]}"; do rm -rf "$d"; done' EXIT
stop_servers() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

pair() { # pair ROUND ROW_A CMD_A -- ROW_B CMD_B: the two runs, order flipped on even rounds
  local round=$1 ra=$2; shift 2
  local a=() b=()
  while [ "$1" != -- ]; do a+=("$1"); shift; done
  shift
  local rb=$1; shift
  b=("$@")
  if [ $((round % 2)) -eq 1 ]; then
    run "$ra" "$round" "${a[@]}"; run "$rb" "$round" "${b[@]}"
  else
    run "$rb" "$round" "${b[@]}"; run "$ra" "$round" "${a[@]}"
  fi
}

# The same shapes for every client (BENCHMARKS.md, ../shared/bench/peers/README.md).
A=(A --seconds "$SECS")
B=(B --workers 50 --keys 50 --seconds "$SECS")
C=(C --workers 8 --ops 2000 --client-per-worker --local-counter)
D=(D --ops 300 --client-per-worker)
args_of() { # args_of A|B|C|D -> ARGS
  case $1 in A) ARGS=("${A[@]}") ;; B) ARGS=("${B[@]}") ;; C) ARGS=("${C[@]}") ;; D) ARGS=("${D[@]}") ;; esac
}

# kind_of A|B|C|D -> KIND: the kind options of every client in the rows being run (none: each
# client's default lock). The semaphore rows (SEM=1) take one of 5 permits per pair in A and B,
# and a semaphore of 1 permit in C and D, so that C's counter checks exclusion and D's waiter
# waits.
SEM=
kind_of() {
  KIND=()
  [ -n "$SEM" ] || return 0
  case $1 in A | B) KIND=(--kind semaphore --permits 5) ;; *) KIND=(--kind semaphore --permits 1) ;; esac
}

# ---- Redis: a private server on CPU 1 ---------------------------------------------------------
rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
rdir=$(mktemp -d)
dirs+=("$rdir")
$C1 redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$rdir" \
  --logfile "$rdir/redis.log" </dev/null >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 1 500); do redis-cli -p "$rport" PING 2>/dev/null | grep -q PONG && break; sleep 0.01; done
RURL=redis://127.0.0.1:$rport
log "redis-server $(redis-server --version | awk '{print $3}') on CPU 1: $RURL"

# ---- ZooKeeper: dlock vs Curator 5.4.0 ---------------------------------------------------------
curator_classes
[ ${#CURATOR[@]} -gt 0 ] || echo "Curator jars or javac missing: ZooKeeper rows without Curator" >&2

# peer_scenarios ROUND PREFIX URL PEER_ROW PEER_TARGET [PEER_CMD...]: A-D of one round, rows
# "PREFIX SC dlock" against "PREFIX SC PEER_ROW" (PEER_CMD PEER_TARGET ARGS; only dlock's rows
# without PEER_CMD). The peer takes the same options, but its C and D always use their own
# clients.
peer_scenarios() {
  local r=$1 prefix=$2 url=$3 prow=$4 ptarget=$5 sc
  shift 5
  local peer=("$@")
  for sc in A B C D; do
    args_of $sc
    local args=("${ARGS[@]}") pargs=("${ARGS[@]}")
    [ "$sc" = C ] && pargs=(C --workers 8 --ops 2000)
    [ "$sc" = D ] && pargs=(D --ops 300)
    kind_of $sc
    args+=("${KIND[@]}") pargs+=("${KIND[@]}")
    if [ ${#peer[@]} -gt 0 ]; then
      pair "$r" "$prefix $sc dlock" "$LB" "$url" "${args[@]}" -- \
        "$prefix $sc $prow" "${peer[@]}" "$ptarget" "${pargs[@]}"
    else
      run "$prefix $sc dlock" "$r" "$LB" "$url" "${args[@]}"
    fi
  done
}

zk_rounds() { # zk_rounds LABEL
  local t=$1 r
  for r in $(seq 1 "$ROUNDS"); do
    peer_scenarios "$r" "zk-$t" "$URL" curator "$CONNECT" "${CURATOR[@]}"
    # C with one shared client: releases hand over to local waiters (no Curator equivalent).
    run "zk-$t C dlock (one client)" "$r" "$LB" "$URL" C --workers 8 --ops 2000
    # The server's floor for A and B: a pair's three requests on a raw C-client handle.
    run "zk-$t-floor W A" "$r" "$LB" "$URL" W --workers 1 --seconds "$SECS"
    run "zk-$t-floor W B" "$r" "$LB" "$URL" W --workers 50 --seconds "$SECS"
  done
}

if want zk; then
  for t in standalone ensemble; do
    servers "$([ $t = standalone ] && echo zk || echo zk3)"
    zk_rounds $t
    for r in $(seq 1 "$ROUNDS"); do
      [ $t = standalone ] && run "keepalive zk 100 locks" "$r" "$LB" "$URL" K --locks 100 --seconds "$KSECS"
    done
    if [ $t = standalone ]; then ZKPID=$SPID ZKURL=$URL; else stop_servers "$SPID"; fi
  done
fi

# ---- PostgreSQL next to Redis -----------------------------------------------------------------
if want pg; then
  servers pg
  PGURL=$URL
  PGPOOL="$PGURL$([[ $PGURL == *\?* ]] && echo '&' || echo '?')dlock_pool=64"
  for r in $(seq 1 "$ROUNDS"); do
    for sc in A B C D; do
      args_of $sc
      args=("${ARGS[@]}")
      pair "$r" "pg $sc advisory" "$LB" "$PGURL" "${args[@]}" -- \
        "redis $sc lock" "$LB" "$RURL" "${args[@]}"
      pair "$r" "pg $sc lease" "$LB" "$PGURL" "${args[@]}" --kind lease -- \
        "pg $sc shedlock" "$LB" "$PGURL" "${args[@]}" --kind shedlock
      [ "$sc" = B ] && run "pg B advisory dlock_pool=64" "$r" "$LB" "$PGPOOL" "${args[@]}"
    done
    # The keepalive: 100 locks held for S seconds (advisory: a check of the session; lease
    # rows and Redis: the watchdog's renewals).
    pair "$r" "keepalive pg advisory 100 locks" "$LB" "$PGURL" K --locks 100 --seconds "$KSECS" -- \
      "keepalive redis lock 100 locks" "$LB" "$RURL" K --locks 100 --seconds "$KSECS"
    run "keepalive pg lease 100 locks" "$r" "$LB" "$PGURL" K --locks 100 --seconds "$KSECS" --kind lease
    # Many locks per session (issue 25): 1,000 advisory locks on a server of 100 connections.
    run "keepalive pg advisory 1000 locks" "$r" "$LB" "$PGURL" K --locks 1000 --seconds "$KSECS"
  done
fi

# ---- etcd (one member): dlock vs python3-etcd3 0.12 --------------------------------------------
if want etcd; then
  servers etcd
  ETCDURL=$URL
  ETCD3=()
  /usr/bin/python3 -c 'import etcd3' 2>/dev/null && ETCD3=(/usr/bin/python3 bench/etcd3_bench.py)
  [ ${#ETCD3[@]} -gt 0 ] || echo "python3-etcd3 missing: etcd rows without the peer" >&2
  endpoint=${ETCDURL#*://}
  endpoint=${endpoint%%[/?]*}
  for r in $(seq 1 "$ROUNDS"); do
    peer_scenarios "$r" etcd "$ETCDURL" python3-etcd3 "$endpoint" "${ETCD3[@]}"
    # The server's floor for A and B: put + delete pairs, one worker or 50 with a key each over
    # one client, no lock logic (lock_bench W).
    run "etcd-floor W put+delete" "$r" "$LB" "$ETCDURL" W --seconds "$SECS"
    run "etcd-floor W B put+delete" "$r" "$LB" "$ETCDURL" W --workers 50 --seconds "$SECS"
    # The server's floor for D: a deletion's watch event at another client and its one read
    # (lock_bench WD: issue 22's "one watch event + one answer", no lock logic).
    run "etcd-floor WD handoff" "$r" "$LB" "$ETCDURL" WD --ops 300 --seconds 60
    # 100 locks on the client's one lease: the keep-alive stream's cost per held lock.
    run "keepalive etcd 100 locks" "$r" "$LB" "$ETCDURL" K --locks 100 --seconds "$KSECS"
    run "keepalive etcd 1000 locks" "$r" "$LB" "$ETCDURL" K --locks 1000 --seconds "$KSECS"
    # The memory floor of a bare gRPC etcd client holding one leased key (no dlock code).
    if [ -x "$BUILD/bench/etcd_memory_floor" ]; then
      run "etcd-floor memory" "$r" "$BUILD/bench/etcd_memory_floor" "$endpoint" 3
    fi
  done
fi

# ---- Semaphores (issue 23): A-D on every backend, next to Redisson's scripts and Curator -----
# Redis: dlock's RPermitExpirableSemaphore against Redisson's own acquire and release scripts
# run by lock_bench (--redisson-scripts: Redisson's server cost; its waiting is Java code, so A
# and B only). ZooKeeper (standalone): against Curator 5.4.0's InterProcessSemaphoreV2, the same
# layout. PostgreSQL and etcd: dlock's own layouts, no incumbent semaphore to compare.
if want sem; then
  SEM=1
  for r in $(seq 1 "$ROUNDS"); do
    for sc in A B; do
      args_of $sc
      kind_of $sc
      pair "$r" "sem-redis $sc dlock" "$LB" "$RURL" "${ARGS[@]}" "${KIND[@]}" -- \
        "sem-redis $sc redisson-scripts" "$LB" "$RURL" "${ARGS[@]}" "${KIND[@]}" --redisson-scripts
    done
    for sc in C D; do
      args_of $sc
      kind_of $sc
      run "sem-redis $sc dlock" "$r" "$LB" "$RURL" "${ARGS[@]}" "${KIND[@]}"
    done
  done
  servers zk
  for r in $(seq 1 "$ROUNDS"); do
    peer_scenarios "$r" sem-zk "$URL" curator "$CONNECT" "${CURATOR[@]}"
  done
  stop_servers "$SPID"
  for b in pg etcd; do
    servers $b
    for r in $(seq 1 "$ROUNDS"); do
      peer_scenarios "$r" sem-$b "$URL" - -
    done
    stop_servers "$SPID"
  done
  SEM=
fi

# ---- One-shot process: connect, acquire, run `true`, release, exit --------------------------
if command -v hyperfine >/dev/null; then
  cmds=()
  [ -n "${PGURL:-}" ] && cmds+=("$DL --url $PGURL exec bench-oneshot -- true")
  [ -n "${ZKURL:-}" ] && cmds+=("$DL --url $ZKURL exec bench-oneshot -- true")
  [ -n "${ETCDURL:-}" ] && cmds+=("$DL --url $ETCDURL exec bench-oneshot -- true")
  cmds+=("$DL --url $RURL exec bench-oneshot -- true" "redis-cli -p $rport PING")
  log "$C0 hyperfine -N --warmup 3 --runs 40 ${cmds[*]}"
  $C0 hyperfine -N --warmup 3 --runs 40 --export-json "$OUT/oneshot.json" "${cmds[@]}" \
    > "$OUT/oneshot.txt" 2>>"$OUT/stderr.log" || echo "one-shot failed: see $OUT/stderr.log" >&2
else
  echo "hyperfine missing: no one-shot row" >&2
fi

# The fixture's throwaway PostgreSQL password stays out of the results all the same.
sed -i 's#://\([^:/@]*\):[^@]*@#://\1:***@#g' "$OUT/commands.txt" "$OUT"/oneshot.* "$OUT"/servers-*.txt 2>/dev/null || true
{
  echo "machine: $(nproc) CPUs, $(uptime | sed 's/.*load average/load average/'), $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ local changes)')"
  echo
  python3 bench/summarize_backends.py "$OUT"
} > "$OUT/summary.md"
cat "$OUT/summary.md"
echo "results: $OUT"
