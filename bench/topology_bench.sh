#!/usr/bin/env bash
# Issue 10's rows in one run: A and B through Sentinel against the same master directly, the
# cost of `WAIT 1` (?wait=1 on the Sentinel URL), B on a 3-master Cluster against one
# standalone server, and the time from a killed master to the first acquisition on its
# successor (Sentinel and Cluster, lock-delay off).
#
#   bench/topology_bench.sh [--rounds N] [--failovers N] [--seconds S] LOCK_BENCH
#
#   --rounds N     interleaved rounds of the throughput rows (default 3); in each round the
#                  order of the rows that are compared flips (direct first on odd rounds,
#                  through Sentinel first on even ones).
#   --failovers N  fresh Sentinel and Cluster groups to fail over once each (default 3).
#   --seconds S    length of every A and B run (default 3).
#   SKIP_FAILOVER=1  only the throughput rows.
#   OUT=dir        results (default /tmp/dlock-topology-<time>): commands.txt, results.jsonl
#                  (one line per run: row, round and lock_bench's JSON), summary.md.
#
# Placement as in ../shared/bench/peers/README.md: every server process of a group (masters,
# replicas, sentinels, cluster nodes) is pinned to CPU 1 (`taskset -c 1` on
# scripts/redis-topology.sh, whose children inherit it), every lock_bench run to CPU 0.
# Groups come from scripts/redis-topology.sh (Sentinel: 1 master, 2 replicas, 3 sentinels,
# down-after-milliseconds 1000; Cluster: 3 masters + 3 replicas, cluster-node-timeout 2000).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=3 FAILOVERS=3 SECS=3
while [ $# -gt 1 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --failovers) FAILOVERS=$2; shift 2 ;;
    --seconds) SECS=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
done
LB=${1:?usage: bench/topology_bench.sh [--rounds N] [--failovers N] [--seconds S] LOCK_BENCH}
OUT=${OUT:-/tmp/dlock-topology-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
: > "$OUT/results.jsonl"
: > "$OUT/commands.txt"
topo=scripts/redis-topology.sh
dirs=()
cleanup() { for d in "${dirs[@]}"; do bash $topo stop "$d" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT

start() { # start KIND -> sets URL and DIR
  local out
  out=$(taskset -c 1 bash $topo start "$1")
  URL=$(echo "$out" | grep -E '^redis(-sentinel|-cluster)?://' | head -1)
  DIR=$(echo "$out" | sed -n 's/^dir: \([^ ]*\) .*/\1/p')
  dirs+=("$DIR")
}
stop() { bash $topo stop "$1" >/dev/null 2>&1 || true; }

run() { # run ROW ROUND URL ARGS...: one lock_bench run, appended to results.jsonl
  local row=$1 round=$2 url=$3; shift 3
  echo "taskset -c 0 $LB $url $*" >> "$OUT/commands.txt"
  local j
  if ! j=$(taskset -c 0 "$LB" "$url" "$@" 2>>"$OUT/stderr.log"); then
    echo "failed: $row (round $round); see $OUT/stderr.log" >&2
    return 0
  fi
  printf '{"row":"%s","round":%d,"result":%s}\n' "$row" "$round" "$j" >> "$OUT/results.jsonl"
}

# ---- Sentinel: direct vs through the sentinels, and WAIT 1 --------------------------------
start sentinel
SURL=$URL
sport=${SURL#redis-sentinel://}; sport=${sport%%,*}; sport=${sport##*:}
maddr=$(redis-cli -p "$sport" SENTINEL get-master-addr-by-name mymaster | paste -sd: -)
DURL="redis://$maddr"
echo "sentinel group: $SURL (master $DURL)" | tee -a "$OUT/commands.txt"
for r in $(seq 1 "$ROUNDS"); do
  for kind in lock simple; do
    pair=("direct" "$DURL" "sentinel" "$SURL")
    [ $((r % 2)) -eq 0 ] && pair=("sentinel" "$SURL" "direct" "$DURL")
    for sc in A B; do
      args=("$sc" --kind "$kind" --seconds "$SECS")
      [ "$sc" = B ] && args+=(--workers 50 --keys 50)
      run "$sc $kind ${pair[0]}" "$r" "${pair[1]}" "${args[@]}"
      run "$sc $kind ${pair[2]}" "$r" "${pair[3]}" "${args[@]}"
      run "$sc $kind sentinel wait=1" "$r" "$SURL?wait=1" "${args[@]}"
    done
  done
done
stop "$DIR"

# ---- Cluster: B over names across slots, against one standalone server ----------------------
start cluster
CURL=$URL; CDIR=$DIR
start standalone
SAURL=$URL; SADIR=$DIR
echo "cluster: $CURL; standalone: $SAURL" | tee -a "$OUT/commands.txt"
for r in $(seq 1 "$ROUNDS"); do
  for kind in lock simple; do
    pair=("standalone" "$SAURL" "cluster" "$CURL")
    [ $((r % 2)) -eq 0 ] && pair=("cluster" "$CURL" "standalone" "$SAURL")
    run "B $kind ${pair[0]}" "$r" "${pair[1]}" B --kind "$kind" --seconds "$SECS" --workers 50 --keys 50
    run "B $kind ${pair[2]}" "$r" "${pair[3]}" B --kind "$kind" --seconds "$SECS" --workers 50 --keys 50
  done
done
stop "$CDIR"
stop "$SADIR"

# ---- Failover: killed master to the first acquisition on its successor ----------------------
[ "${SKIP_FAILOVER:-0}" = 1 ] && FAILOVERS=0
for f in $(seq 1 "$FAILOVERS"); do
  start sentinel
  run "failover sentinel" "$f" "$URL?lock_delay=0" failover --rounds 1
  stop "$DIR"
  start cluster
  run "failover cluster" "$f" "$URL?lock_delay=0" failover --rounds 1
  stop "$DIR"
done

# ---- Summary: median over rounds per row ------------------------------------------------------
python3 - "$OUT/results.jsonl" > "$OUT/summary.md" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    r = e["result"]
    if e["row"].startswith("failover"):
        v = r["median_ms"]; unit = "ms to the first acquisition"
    elif e["row"].startswith("A"):
        v = r.get("pair_p50_us"); unit = "pair p50 us"
    else:
        v = r.get("ops_per_s"); unit = "pairs/s"
    rows.setdefault(e["row"], (unit, []))[1].append(v)
print("| row | metric | median | runs |")
print("|---|---|---|---|")
for row, (unit, vs) in rows.items():
    print(f"| {row} | {unit} | {statistics.median(vs):,.1f} | {' / '.join(f'{x:,.0f}' for x in vs)} |")
PY
cat "$OUT/summary.md"
echo "results in $OUT"
