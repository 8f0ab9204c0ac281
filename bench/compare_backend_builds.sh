#!/usr/bin/env bash
# Compare two builds of lock_bench, interleaved, on one pinned ZooKeeper, PostgreSQL or etcd
# server (bench/compare_builds.sh does the same on Redis): is NEW no slower than OLD?
#
#   bench/compare_backend_builds.sh [--rounds N] [--seconds S] pg|zk|etcd BUILD OLD_LOCK_BENCH \
#       NEW_LOCK_BENCH ROW...
#
#   BUILD    a build with bench_servers (it starts the server, as bench/backend_bench.sh does)
#   ROW      lock_bench arguments after the URL, one quoted string per row, e.g.
#            "B --workers 50 --keys 50 --seconds 3 --kind lease"
#   --rounds N  rounds (default 3): OLD then NEW on odd rounds, NEW then OLD on even ones.
#   OUT=dir     results (default /tmp/dlock-compare-<backend>-<time>): commands.txt,
#               results.jsonl (row, build, round, load average at its start, lock_bench's JSON),
#               summary.md (per row: median ops/s and p99 of OLD and NEW, NEW/OLD of the medians;
#               K rows: CPU and memory per held lock, and how many runs succeeded).
# Placement: the server on CPU 1, the clients on CPU 0 (../shared/bench/peers/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=3
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -ge 5 ] || { sed -n 5,7p "$0" >&2; exit 64; }
BACKEND=$1 BUILD=$2 OLD=$3 NEW=$4
shift 4
BS=$BUILD/bench/bench_servers LB=
OUT=${OUT:-/tmp/dlock-compare-$BACKEND-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
: > "$OUT/results.jsonl"
: > "$OUT/commands.txt"
C0="taskset -c 0" C1="taskset -c 1"
pids=()
source bench/pinned_runs.sh # log, servers, run
trap cleanup EXIT
servers "$([ "$BACKEND" = zk ] && echo zk || echo "$BACKEND")"
one() { # one ROW_INDEX BUILD_NAME BINARY ROUND ARGS
  local i=$1 name=$2 bin=$3 round=$4 args
  read -r -a args <<< "$5"
  run "$i $name" "$round" "$bin" "$URL" "${args[@]}"
}
for r in $(seq 1 "$ROUNDS"); do
  i=0
  for row in "$@"; do
    i=$((i + 1))
    if [ $((r % 2)) -eq 1 ]; then
      one "$i" old "$OLD" "$r" "$row"; one "$i" new "$NEW" "$r" "$row"
    else
      one "$i" new "$NEW" "$r" "$row"; one "$i" old "$OLD" "$r" "$row"
    fi
  done
done
# The fixture's throwaway PostgreSQL password stays out of the results all the same.
sed -i 's#://\([^:/@]*\):[^@]*@#://\1:***@#g' "$OUT/commands.txt" "$OUT"/servers-*.txt 2>/dev/null || true
python3 - "$OUT" "$@" > "$OUT/summary.md" <<'PY'
import json, statistics, sys
out, rows = sys.argv[1], sys.argv[2:]
res = {}
for line in open(out + "/results.jsonl"):
    j = json.loads(line)
    res.setdefault(j["row"], []).append(j["result"])
def m(row, key):
    v = [r.get(key) or 0 for r in res.get(row, [])]
    return statistics.median(v) if v else 0
print("| row | OLD ops/s | NEW ops/s | NEW/OLD | OLD p99 us | NEW p99 us |")
print("|---|---|---|---|---|---|")
keep = []
for i, row in enumerate(rows, 1):
    if row.split()[0] == "K":
        keep.append((i, row))
        continue
    o, n = m(f"{i} old", "ops_per_s"), m(f"{i} new", "ops_per_s")
    k = "pair_p99_us" if row.split()[0] in "AB" else "handoff_p99_us"
    print(f"| `{row}` | {o:,.0f} | {n:,.0f} | {n / o if o else 0:.2f} | {m(f'{i} old', k):,.0f} "
          f"| {m(f'{i} new', k):,.0f} |")
if keep:
    print("\n| keep-alive row | OLD CPU us per lock per s | NEW | OLD bytes per lock | NEW | runs OLD / NEW |")
    print("|---|---|---|---|---|---|")
    for i, row in keep:
        print(f"| `{row}` | {m(f'{i} old', 'client_cpu_us_per_lock_per_s'):,.1f} "
              f"| {m(f'{i} new', 'client_cpu_us_per_lock_per_s'):,.1f} "
              f"| {m(f'{i} old', 'client_rss_bytes_per_lock'):,.0f} "
              f"| {m(f'{i} new', 'client_rss_bytes_per_lock'):,.0f} "
              f"| {len(res.get(f'{i} old', []))} / {len(res.get(f'{i} new', []))} |")
PY
cat "$OUT/summary.md"
echo "results: $OUT"
