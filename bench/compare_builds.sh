#!/usr/bin/env bash
# Compare two builds of lock_bench, interleaved, on one pinned redis-server: is NEW no slower
# than OLD? Run it once with OLD = NEW (the same binary twice) to measure the run-to-run noise of
# every row; a NEW/OLD ratio inside that noise is "no difference".
#
#   bench/compare_builds.sh [--rounds N] [--quick] OLD_LOCK_BENCH NEW_LOCK_BENCH
#
#   --rounds N  rounds (default 3). Each round runs every row once with each build, OLD then NEW
#               on rounds 1, 3, 5, ... and NEW then OLD on rounds 2, 4, ... (neither always first).
#   --quick     shorter runs: A/B 1 s instead of 3 s, C 500 ops instead of 2000, D 100 hand-offs
#               instead of 300 (hold is unchanged).
#   OUT=dir     where results go (default /tmp/dlock-compare-<time>).
#   ROWS=regex  only the rows whose name matches (default: all), e.g. ROWS='^(A|B)_'.
#   KINDS=list  the lock kinds of the A-D rows (default "lock simple"; also fair, write, read).
#
# Procedure (the pinning of ../shared/bench/peers/README.md and bench/run_side_by_side.sh):
# its own redis-server (no persistence, temp dir, free loopback port) pinned with `taskset -c 1`,
# every client pinned with `taskset -c 0`. Per round, for kind in lock simple: A, A --io-thread,
# B (50 workers, 50 keys), B --async, C (8 workers, 2000 ops), C --client-per-worker, D (300
# ops), D --client-per-worker; then `hold --locks 10000 --watchdog-ms 3000`. Before each A pair,
# `redis-benchmark -c 1 -P 1 -n 30000 PING` (A's unit). FLUSHALL before every run.
#
# Output in $OUT: commands.txt (every command run), results.jsonl (one line per lock_bench run:
# row, build, round, position, 1-min load average at its start (it counts our own threads too:
# B runs 50), wall time and the JSON lock_bench printed), ping.jsonl (the PING p50s), raw/
# (stdout and stderr of every run), loadavg.txt, meta.txt, summary.md (the table, also printed).
# Table: per row the metric that matters, median over rounds of OLD and of NEW, NEW/OLD, the
# range of the per-round (paired) NEW/OLD ratios and the spread (max-min)/median of all runs;
# then runs whose numbers are suspect (C/D stopped by the time cap, wrong counter, lost locks).
# Needs: bash, taskset, redis-server/-cli/-benchmark, timeout, awk, python3 (standard library).
set -euo pipefail

usage() { sed -n '6,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 64; }
ROUNDS=3 QUICK=
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) [ $# -ge 2 ] || usage; ROUNDS=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    -h | --help) usage ;;
    -*) echo "unknown option $1" >&2; usage ;;
    *) args+=("$1"); shift ;;
  esac
done
[ ${#args[@]} -eq 2 ] || usage
[[ $ROUNDS =~ ^[0-9]+$ ]] && [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 100 ] || {
  echo "--rounds must be 1-100" >&2; exit 64; }
OLD=$(realpath "${args[0]}") NEW=$(realpath "${args[1]}")
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 64; }; done
for t in taskset redis-server redis-cli redis-benchmark python3 timeout; do
  command -v $t >/dev/null || { echo "missing: $t" >&2; exit 69; }
done

if [ -n "$QUICK" ]; then SECS=1 C_OPS=500 D_OPS=100; else SECS=3 C_OPS=2000 D_OPS=300; fi
OUT=${OUT:-/tmp/dlock-compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/raw"
: > "$OUT/commands.txt"; : > "$OUT/results.jsonl"; : > "$OUT/ping.jsonl"
C0="taskset -c 0"
RUN_TIMEOUT=120 # seconds; a normal run takes < 15 s, one whose waiter sleeps out the 30 s lease ~40 s

log() { echo "$*" >> "$OUT/commands.txt"; }
loadavg() { echo "$1 $(date -u +%FT%TZ) $(cat /proc/loadavg)" | tee -a "$OUT/loadavg.txt"; }

# Our own pinned server on a free loopback port (the kernel picks one; retried if taken meanwhile).
dir=$(mktemp -d)
srv=
trap 'if [ -n "$srv" ]; then kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; fi; rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM
for attempt in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  log "server: taskset -c 1 redis-server --port $port --bind 127.0.0.1 --save '' --appendonly no --dir $dir"
  taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --logfile "$dir/redis.log" </dev/null >/dev/null 2>&1 &
  srv=$!
  for _ in $(seq 1 500); do
    kill -0 "$srv" 2>/dev/null || break
    redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && break
    sleep 0.01
  done
  # The server that answers must be ours (same pid), not one that already held the port.
  if redis-cli -p "$port" INFO server 2>/dev/null | grep -q "^process_id:$srv"; then break; fi
  kill "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; srv=
  [ "$attempt" -lt 5 ] || { echo "could not start redis-server" >&2; exit 1; }
done
URL=redis://127.0.0.1:$port
rcli() { redis-cli -p "$port" "$@"; }

{
  echo "old: $OLD $(sha256sum < "$OLD" | cut -c1-16)"
  echo "new: $NEW $(sha256sum < "$NEW" | cut -c1-16)"
  echo "rounds: $ROUNDS quick: ${QUICK:-0} redis: $(redis-server --version | awk '{print $3}') port: $port"
} | tee "$OUT/meta.txt"
[ "$(sha256sum < "$OLD")" != "$(sha256sum < "$NEW")" ] || echo "(OLD and NEW are the same file: this run measures noise)"

# lb ROW BUILD ROUND POS ARGS...: one lock_bench run; appends its JSON to results.jsonl.
lb() {
  local row=$1 build=$2 round=$3 pos=$4; shift 4
  local bin=$OLD; [ "$build" = new ] && bin=$NEW
  local base="$OUT/raw/r${round}_${row}_$build"
  rcli FLUSHALL >/dev/null
  log "r$round $row $build: $C0 $bin $URL $*"
  local load1 t0 t1
  load1=$(cut -d' ' -f1 /proc/loadavg) t0=$(date +%s.%N)
  if ! timeout $RUN_TIMEOUT $C0 "$bin" "$URL" "$@" > "$base.json" 2> "$base.err"; then
    echo "  $row $build (round $round) failed or timed out: see $base.err" >&2
  fi
  t1=$(date +%s.%N)
  local line
  line=$(grep -m1 '^{' "$base.json" || true)
  if [ -n "$line" ]; then
    printf '{"row":"%s","build":"%s","round":%d,"position":%d,"load1":%s,"wall_s":%s,"result":%s}\n' \
      "$row" "$build" "$round" "$pos" "$load1" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" "$line" >> "$OUT/results.jsonl"
  fi
}

ROWS=${ROWS:-.}
wanted() { [[ $1 =~ $ROWS ]]; }

# pair ROW ROUND ARGS...: the row with both builds, order by round.
pair() {
  local row=$1 round=$2; shift 2
  wanted "$row" || return 0
  if [ $((round % 2)) -eq 1 ]; then
    lb "$row" old "$round" 1 "$@"; lb "$row" new "$round" 2 "$@"
  else
    lb "$row" new "$round" 1 "$@"; lb "$row" old "$round" 2 "$@"
  fi
}

# ping ROW ROUND: A's unit right before the A pair.
ping_unit() {
  local row=$1 round=$2 csv p50
  wanted "$row" || return 0
  rcli FLUSHALL >/dev/null
  log "r$round ping_before_$row: $C0 redis-benchmark -p $port -c 1 -P 1 -n 30000 --csv PING"
  csv=$(timeout $RUN_TIMEOUT $C0 redis-benchmark -p "$port" -c 1 -P 1 -n 30000 --csv PING || true)
  echo "$csv" > "$OUT/raw/r${round}_ping_before_$row.csv"
  p50=$(echo "$csv" | awk -F'","' '/^"PING"/ { print $5 * 1000 }')
  [ -n "$p50" ] && printf '{"row":"%s","round":%d,"ping_p50_us":%s}\n' "$row" "$round" "$p50" >> "$OUT/ping.jsonl"
  return 0
}

loadavg start
t_start=$(date +%s)
# Warm-up (not recorded): page cache, first connection, script cache.
for b in "$OLD" "$NEW"; do
  rcli FLUSHALL >/dev/null
  log "warm-up: $C0 $b $URL A --kind lock --seconds 0.3"
  timeout $RUN_TIMEOUT $C0 "$b" "$URL" A --kind lock --seconds 0.3 >/dev/null 2>&1 || true
  log "warm-up: $C0 $b $URL A --kind simple --seconds 0.3"
  timeout $RUN_TIMEOUT $C0 "$b" "$URL" A --kind simple --seconds 0.3 >/dev/null 2>&1 || true
done

for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round/$ROUNDS ($([ $((round % 2)) -eq 1 ] && echo 'OLD first' || echo 'NEW first'), $(( $(date +%s) - t_start )) s in) =="
  for kind in ${KINDS:-lock simple}; do
    ping_unit "A_$kind" "$round"
    pair "A_$kind" "$round" A --kind $kind --seconds $SECS
    ping_unit "A_${kind}_io_thread" "$round"
    pair "A_${kind}_io_thread" "$round" A --kind $kind --seconds $SECS --io-thread
    pair "B_$kind" "$round" B --kind $kind --workers 50 --keys 50 --seconds $SECS
    pair "B_${kind}_async" "$round" B --kind $kind --workers 50 --keys 50 --seconds $SECS --async
    pair "C_$kind" "$round" C --kind $kind --workers 8 --ops $C_OPS
    pair "C_${kind}_own_clients" "$round" C --kind $kind --workers 8 --ops $C_OPS --client-per-worker
    pair "D_$kind" "$round" D --kind $kind --ops $D_OPS
    pair "D_${kind}_own_clients" "$round" D --kind $kind --ops $D_OPS --client-per-worker
  done
  pair hold_10000 "$round" hold --locks 10000 --watchdog-ms 3000
done
rcli FLUSHALL >/dev/null
elapsed=$(( $(date +%s) - t_start ))
loadavg end
echo "elapsed: $elapsed s" | tee -a "$OUT/meta.txt"

python3 - "$OUT" "$ROUNDS" "$C_OPS" "$D_OPS" <<'EOF' | tee "$OUT/summary.md"
import json, statistics, sys
out, rounds, c_ops, d_ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
runs = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.strip()]
pings = [json.loads(l) for l in open(f"{out}/ping.jsonl") if l.strip()]

# (label, json field, better, only if) per scenario; the metric that matters for it.
def metrics(row):
    s = row.split("_")[0]
    if s == "A": return [("pair p50 us", "pair_p50_us", "lower", None)]
    if s == "B": return [("pairs/s", "ops_per_s", "higher", None)]
    if s == "C": return [("ops/s", "ops_per_s", "higher", None),
                         ("hand-off p50 us", "handoff_p50_us", "lower", "handoff_samples")]
    if s == "D": return [("hand-off p50 us", "handoff_p50_us", "lower", None)]
    if s == "hold": return [("renewal batches/period", "batches_per_period", "lower", None),
                            ("client bytes/lock", "client_rss_bytes_per_lock", "lower", None)]
    return []

rows = []
for r in runs:
    if r["row"] not in rows: rows.append(r["row"])

def fmt(v):
    if v is None: return "-"
    return f"{v:,.0f}" if abs(v) >= 1000 else (f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}")

for f in ("meta.txt", "loadavg.txt"):
    for l in open(f"{out}/{f}"):
        print(f"    {l.rstrip()}")
print(f"\n{rounds} rounds; medians over rounds; runs listed in round order. ratio = NEW/OLD of the medians; paired = range of "
      "the per-round NEW/OLD ratios; spread = (max-min)/median over all runs of the row.\n")
print("| row | metric | better | OLD median | NEW median | NEW/OLD | paired NEW/OLD | OLD runs | NEW runs | spread |")
print("|---|---|---|---|---|---|---|---|---|---|")
for row in rows:
    for label, field, better, need in metrics(row):
        by = {"old": {}, "new": {}}
        for r in runs:
            if r["row"] != row or field not in r["result"]: continue
            if need and not r["result"].get(need): continue
            by[r["build"]][r["round"]] = float(r["result"][field])
        if not by["old"] and not by["new"]: continue
        o = [by["old"][k] for k in sorted(by["old"])]; n = [by["new"][k] for k in sorted(by["new"])]
        mo = statistics.median(o) if o else None
        mn = statistics.median(n) if n else None
        ratio = f"{mn / mo:.3f}" if mo and mn is not None else "-"
        paired = [by["new"][k] / by["old"][k] for k in by["old"] if k in by["new"] and by["old"][k]]
        pr = f"{min(paired):.3f}-{max(paired):.3f}" if paired else "-"
        allv = o + n
        med = statistics.median(allv)
        spread = f"{(max(allv) - min(allv)) / med * 100:.1f}%" if med else "-"
        print(f"| {row} | {label} | {better} | {fmt(mo)} | {fmt(mn)} | {ratio} | {pr} | "
              f"{' '.join(fmt(v) for v in o)} | {' '.join(fmt(v) for v in n)} | {spread} |")

if pings:
    print("\nA's unit, redis-benchmark -c 1 -P 1 PING p50 (us) before each A pair, by round:\n")
    for row in dict.fromkeys(p["row"] for p in pings):
        vs = [p["ping_p50_us"] for p in pings if p["row"] == row]
        print(f"- before {row}: {' '.join(f'{v:g}' for v in vs)} (median {statistics.median(vs):g})")
missing = [(r, b) for r in rows for b in ("old", "new")
           if sum(1 for x in runs if x["row"] == r and x["build"] == b) < rounds]
# Runs whose numbers do not mean what the row says: C/D stopped by their time cap (10 s / 8 s,
# checked between samples) instead of their op count, a hand-off that took far longer than the
# others (a waiter asleep until the 30 s lease ran out shows as seconds ~30 and few ops, and is
# invisible in p50/p99), a wrong counter, lost locks in hold.
odd = []
for r in runs:
    x, row = r["result"], r["row"]
    why = []
    if row.startswith("C") and x.get("ops", 0) < c_ops: why.append(f"{x['ops']} of {c_ops} ops")
    if row.startswith("D") and x.get("ops", 0) < d_ops: why.append(f"{x['ops']} of {d_ops} hand-offs")
    if row.startswith(("C", "D")) and x.get("seconds", 0) > 10.5: why.append(f"{x['seconds']:.1f} s")
    if x.get("counter_exact") is False: why.append("counter not exact")
    if x.get("lost"): why.append(f"{x['lost']} locks lost")
    if why: odd.append(f"- {row} {r['build']} round {r['round']}: {', '.join(why)} (load1 {r.get('load1', '?')})")
if odd:
    print("\nanomalous runs (their row's median includes them):\n")
    print("\n".join(odd))
loads = [r["load1"] for r in runs if "load1" in r]
if loads:
    print(f"\n1-min load average at the start of the runs: min {min(loads):.2f}, "
          f"median {statistics.median(loads):.2f}, max {max(loads):.2f}")
if missing:
    print("\nrows with failed runs (fewer results than rounds): " +
          ", ".join(f"{r} {b}" for r, b in missing))
EOF
echo "results in $OUT"
