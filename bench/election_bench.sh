#!/usr/bin/env bash
# Issue 23's election rows in one run: the hand-off (E: the leader resigns while one participant
# waits; resign -> the new leader acting) on ZooKeeper, dlock next to Apache Curator 5.4.0's
# LeaderLatch (bench/curator_bench.java E), and on etcd (no peer in Debian 12 offers an etcd
# election: python3-etcd3 has none), Redis and PostgreSQL (no incumbent has an election there); and the
# failover (F: the leader's process is SIGKILLed while one participant waits; kill -> the new
# leader acting), dlock on every backend, with the session timeout or lease TTL given below on
# ZooKeeper and etcd and the watchdog lease on Redis (it bounds F from below; PostgreSQL sees the
# killed client's socket close).
#
#   bench/election_bench.sh [--rounds N] [--samples N] BUILD_DIR
#
#   BUILD_DIR    a configured build with election_bench, bench_servers and the dlock CLI built
#                (cmake --build BUILD --target election_bench bench_servers dlock_cli_main).
#   --rounds N   interleaved rounds of E (default 3; the order of dlock and Curator flips each
#                round); the summary gives each round's p50 and p99.
#   --samples N  hand-offs per E run (default 200).
#   OUT=dir      results (default /tmp/dlock-election-<time>): commands.txt, results.jsonl,
#                stderr.log, summary.md.
#
# Placement as in ../shared/bench/peers/README.md: servers on CPU 1, clients on CPU 0.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=3 SAMPLES=200
while [ $# -gt 1 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --samples) SAMPLES=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
done
BUILD=${1:?usage: bench/election_bench.sh [--rounds N] [--samples N] BUILD_DIR}
EB=$BUILD/bench/election_bench BS=$BUILD/bench/bench_servers DL=$BUILD/tools/dlock/dlock
for b in "$EB" "$BS" "$DL"; do
  [ -x "$b" ] || { echo "$b not built" >&2; exit 66; }
done
DLOCK_DEPS_EXTRA="openjdk-17-jdk-headless" bash scripts/deps.sh || true
OUT=${OUT:-/tmp/dlock-election-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
: > "$OUT/results.jsonl"
: > "$OUT/commands.txt"
C0="taskset -c 0" C1="taskset -c 1"

source bench/pinned_runs.sh # log, servers, run, curator_classes, cleanup of the servers
RUN_TIMEOUT=600
with_query() { # with_query URL K=V -> URL with the parameter appended
  if [[ $1 == *\?* ]]; then echo "$1&$2"; else echo "$1?$2"; fi
}

curator_classes
[ ${#CURATOR[@]} -gt 0 ] || echo "Curator jars or javac missing: no Curator row" >&2
curator_e() { # curator_e ROUND: Curator's E, when Curator is at hand
  if [ ${#CURATOR[@]} -gt 0 ]; then
    run "zk E curator" "$1" "${CURATOR[@]}" "$ZKCONNECT" E --ops "$SAMPLES"
  fi
}

# ---- ZooKeeper (tickTime 2000 ms: the shortest session timeout is 4 s) ---------------------------
servers zk
ZKURL=$URL ZKCONNECT=$CONNECT ZKPID=$SPID
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then
    run "zk E dlock" "$r" "$EB" "$ZKURL" E --samples "$SAMPLES"
    curator_e "$r"
  else
    curator_e "$r"
    run "zk E dlock" "$r" "$EB" "$ZKURL" E --samples "$SAMPLES"
  fi
done
run "zk F dlock (session_timeout=4000)" 1 "$EB" "$(with_query "$ZKURL" session_timeout=4000)" F --cli "$DL"
kill "$ZKPID" 2>/dev/null || true

# ---- etcd (one member) ------------------------------------------------------------------------
servers etcd
ETCDURL=$URL
for r in $(seq 1 "$ROUNDS"); do
  run "etcd E dlock" "$r" "$EB" "$ETCDURL" E --samples "$SAMPLES"
done
run "etcd F dlock (ttl=2)" 1 "$EB" "$(with_query "$ETCDURL" ttl=2)" F --cli "$DL"

# ---- Redis (no incumbent election on Redis: Redisson declined one; dlock's layout only) ---------
# F waits out the killed leader's lease: the watchdog lease given to its `dlock elect`.
servers redis
REDISURL=$URL
for r in $(seq 1 "$ROUNDS"); do
  run "redis E dlock" "$r" "$EB" "$REDISURL" E --samples "$SAMPLES"
done
run "redis F dlock (--watchdog 2s)" 1 "$EB" "$REDISURL" F --cli "$DL" --watchdog 2s

# ---- PostgreSQL (no incumbent election on PostgreSQL: dlock's layout only) -------------------------
# A killed client's session ends with its socket, so F has no timeout to wait for.
servers pg
PGURL=$URL
for r in $(seq 1 "$ROUNDS"); do
  run "pg E dlock" "$r" "$EB" "$PGURL" E --samples "$SAMPLES"
done
run "pg F dlock" 1 "$EB" "$PGURL" F --cli "$DL"

{
  echo "machine: $(nproc) CPUs, $(uptime | sed 's/.*load average/load average/'), $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (+ local changes)')"
  echo
  echo "| row | round | samples | p50 | p99 / max | client CPU per hand-off |"
  echo "|---|---|---|---|---|---|"
  python3 - "$OUT/results.jsonl" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    r = d["result"]
    if "handoff_p50_us" in r:
        print(f'| {d["row"]} | {d["round"]} | {r.get("samples", r.get("handoff_samples"))} | '
              f'{r["handoff_p50_us"]:.0f} us | {r["handoff_p99_us"]:.0f} us | '
              f'{r.get("client_cpu_us_per_op", 0):.0f} us |')
    else:
        print(f'| {d["row"]} | {d["round"]} | {r["samples"]} | {r["failover_p50_ms"]:.0f} ms | '
              f'{r["failover_max_ms"]:.0f} ms | - |')
EOF
} > "$OUT/summary.md"
cat "$OUT/summary.md"
echo "results: $OUT"
