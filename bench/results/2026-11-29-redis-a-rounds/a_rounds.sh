#!/usr/bin/env bash
# A rounds: each kind's own acquire+release on a plain blocking socket (blocking_pair), two PINGs
# on the same socket, and dlock's A, alternated ROUNDS times.
set -euo pipefail
cd /work/main
OUT=${OUT:?}; ROUNDS=${ROUNDS:-5}; mkdir -p "$OUT"
B=build/bench-all; LB=$B/bench/lock_bench BP=$B/bench/blocking_pair DL=$B/tools/dlock/dlock
port=7395; C0="taskset -c 0"
dir=$(mktemp -d)
taskset -c 1 redis-server --port $port --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" --logfile "$dir/redis.log" </dev/null >/dev/null 2>&1 &
srv=$!; trap 'kill $srv; wait $srv 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 500); do redis-cli -p $port PING 2>/dev/null | grep -q PONG && break; sleep 0.01; done
URL=redis://127.0.0.1:$port
run() { local name=$1; shift; echo "$name: (load $(cut -d' ' -f1 /proc/loadavg)) $*" >> "$OUT/commands.txt"; "$@" > "$OUT/$name.txt" 2>&1; }
field() { "$DL" keys --kind "$1" "$2" | awk -v f="$3" '$1 == f { print $2 }'; }
ACQ=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/reentrant/acquire.lua)")
REL=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/reentrant/release.lua)")
SREL=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/simple/release.lua)")
FACQ=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/fair/acquire.lua)")
FREL=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/fair/release.lua)")
WACQ=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/rwlock/write_acquire.lua)")
WREL=$(redis-cli -p $port SCRIPT LOAD "$(cat src/redis/locks/rwlock/write_release.lua)")
S_FIXED=S:blocking-pair L_FIXED=L:blocking-pair F_FIXED=F:blocking-pair W_FIXED=W:blocking-pair
for r in $(seq 1 "$ROUNDS"); do
  run "bp_ping_$r" $C0 $BP $port 3 PING -- PING
  run "bp_simple_$r" $C0 $BP $port 3 SET $S_FIXED tok NX PX 30000 -- EVALSHA "$SREL" 2 $S_FIXED "$(field simple $S_FIXED channel)" tok PUBLISH
  run "A_simple_$r" $C0 $LB $URL A --kind simple --seconds 3
  run "bp_lock_$r" $C0 $BP $port 3 EVALSHA "$ACQ" 2 $L_FIXED "$(field lock $L_FIXED fencing)" 30000 owner:1 -- EVALSHA "$REL" 2 $L_FIXED "$(field lock $L_FIXED channel)" 0 30000 owner:1 PUBLISH 0
  run "A_lock_$r" $C0 $LB $URL A --kind lock --seconds 3
  run "bp_fair_$r" $C0 $BP $port 3 EVALSHA "$FACQ" 4 $F_FIXED "$(field fair $F_FIXED queue)" "$(field fair $F_FIXED timeouts)" "$(field fair $F_FIXED fencing)" 30000 owner:1 5000 1 -- EVALSHA "$FREL" 4 $F_FIXED "$(field fair $F_FIXED queue)" "$(field fair $F_FIXED timeouts)" "$(field fair $F_FIXED channel)" 0 30000 owner:1 PUBLISH
  run "A_fair_$r" $C0 $LB $URL A --kind fair --seconds 3
  run "bp_write_$r" $C0 $BP $port 3 EVALSHA "$WACQ" 3 $W_FIXED "$(field write $W_FIXED fencing)" "$(field write $W_FIXED intent)" 30000 owner:1 2000 -- EVALSHA "$WREL" 2 $W_FIXED "$(field write $W_FIXED channel)" 1 30000 owner:1 PUBLISH
  run "A_write_$r" $C0 $LB $URL A --kind write --seconds 3
  redis-cli -p $port FLUSHALL >/dev/null
done
