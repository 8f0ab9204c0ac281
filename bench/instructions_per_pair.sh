#!/usr/bin/env bash
# Client instructions per acquire+release pair of two lock_bench builds, counted by
# `valgrind --tool=callgrind` (instructions, not seconds: the count repeats for the same binary
# and inputs whatever else the machine runs, so a 2% difference is visible where wall-clock
# runs on this VM spread 5-25%).
#
#   bench/instructions_per_pair.sh [--short S] [--long S] OLD_LOCK_BENCH NEW_LOCK_BENCH
#
# For each build and row (A lock, A simple: one thread; B lock, B simple: 50 threads on 50 keys
# of one client; B lock async, B simple async: 50 asynchronous chains on its I/O thread)
# lock_bench runs twice under callgrind, for --short and --long seconds (default
# 2 and 6), against its own redis-server (no persistence, free loopback port). Per pair =
# (Ir(long) - Ir(short)) / (pairs(long) - pairs(short)): start-up, connection set-up and exit
# cancel out. Ir counts every thread of the process (callers and the I/O thread).
# OUT=dir (default /tmp/dlock-instructions-<time>): callgrind outputs, JSON, summary.md.
# Needs: valgrind, redis-server, redis-cli, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
SHORT=2 LONG=6
while [ $# -gt 2 ]; do
  case $1 in
    --short) SHORT=$2; shift 2 ;;
    --long) LONG=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 64 ;;
  esac
done
[ $# -eq 2 ] || { sed -n '7,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 64; }
OLD=$(realpath "$1") NEW=$(realpath "$2")
OUT=${OUT:-/tmp/dlock-instructions-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
: > "$OUT/runs.jsonl"

dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
  --logfile "$dir/redis.log" </dev/null >/dev/null 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null || true; wait $srv 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 500); do redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && break; sleep 0.01; done
URL=redis://127.0.0.1:$port
{
  echo "old: $OLD $(sha256sum < "$OLD" | cut -c1-16)"
  echo "new: $NEW $(sha256sum < "$NEW" | cut -c1-16)"
  echo "short: $SHORT s, long: $LONG s, $(valgrind --version), redis $(redis-server --version | awk '{print $3}')"
} | tee "$OUT/meta.txt"

one() { # one BUILD ROW SECONDS ARGS...
  local build=$1 row=$2 secs=$3; shift 3
  local bin=$OLD; [ "$build" = new ] && bin=$NEW
  local base="$OUT/${row}_${build}_${secs}"
  redis-cli -p "$port" FLUSHALL >/dev/null
  valgrind --tool=callgrind --callgrind-out-file="$base.cg" "$bin" "$URL" "$@" --seconds "$secs" \
    > "$base.json" 2> "$base.err"
  local ir
  ir=$(grep -m1 '^summary:' "$base.cg" | awk '{print $2}')
  printf '{"build":"%s","row":"%s","seconds":%s,"ir":%s,"result":%s}\n' \
    "$build" "$row" "$secs" "$ir" "$(grep -m1 '^{' "$base.json")" >> "$OUT/runs.jsonl"
}

for row in "A lock" "A simple" "B lock" "B simple" "B lock async" "B simple async"; do
  set -- $row
  extra=(); [ "$1" = B ] && extra=(--workers 50 --keys 50)
  [ "${3:-}" = async ] && extra+=(--async)
  for build in old new; do
    for secs in "$SHORT" "$LONG"; do
      one "$build" "$1_$2${3:+_$3}" "$secs" "$1" --kind "$2" "${extra[@]}"
    done
  done
done

python3 - "$OUT/runs.jsonl" <<'EOF' | tee "$OUT/summary.md"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
per = {}
for row in dict.fromkeys(r["row"] for r in runs):
    for b in ("old", "new"):
        rs = sorted((r for r in runs if r["row"] == row and r["build"] == b), key=lambda r: r["seconds"])
        s, l = rs[0], rs[-1]
        pairs = l["result"]["ops"] - s["result"]["ops"]
        per[(row, b)] = ((l["ir"] - s["ir"]) / pairs if pairs > 0 else float("nan"),
                         s["result"]["ops"], l["result"]["ops"])
print("| row | OLD instr/pair | NEW instr/pair | NEW/OLD | pairs counted (OLD short/long, NEW short/long) |")
print("|---|---|---|---|---|")
for row in dict.fromkeys(r["row"] for r in runs):
    o, n = per[(row, "old")], per[(row, "new")]
    print(f"| {row.replace('_', ' ')} | {o[0]:,.0f} | {n[0]:,.0f} | {n[0] / o[0]:.4f} | {o[1]}/{o[2]}, {n[1]}/{n[2]} |")
EOF
echo "results in $OUT"
