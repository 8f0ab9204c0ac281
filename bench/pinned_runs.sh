# bench/pinned_runs.sh: what bench/backend_bench.sh and bench/election_bench.sh share, sourced
# by them (not run on its own). Before sourcing: OUT (the results directory, made), BS (the
# bench_servers binary) and C0/C1 (the client and server CPU pinnings, e.g. "taskset -c 0").
#   log LINE...            appends to $OUT/commands.txt
#   servers zk|zk3|pg|etcd starts bench_servers on CPU 1: URL (and CONNECT for ZooKeeper) and
#                          SPID set; the pid joins `pids`, which cleanup() kills at exit
#   run ROW ROUND CMD...   one client process on CPU 0 (bounded by RUN_TIMEOUT, default 120 s),
#                          with the load average before it in commands.txt; its last line, a
#                          JSON object, appended to $OUT/results.jsonl
#   curator_classes        compiles bench/curator_bench.java against Debian's Curator jars into
#                          $OUT/classes: CURATOR=(java -cp ... CuratorBench), or empty when the
#                          jars or javac are missing

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

log() { echo "$*" >> "$OUT/commands.txt"; }

servers() {
  local f="$OUT/servers-$1.txt"
  : > "$f"
  $C1 "$BS" "$1" > "$f" 2>>"$OUT/stderr.log" &
  pids+=($!)
  SPID=$!
  for _ in $(seq 1 600); do
    [ -n "$(sed -n 1p "$f")" ] && break
    kill -0 $SPID 2>/dev/null || { echo "bench_servers $1 failed: see $OUT/stderr.log" >&2; exit 1; }
    sleep 0.1
  done
  URL=$(sed -n 1p "$f")
  CONNECT=$(sed -n 's/^connect: //p' "$f")
  log "servers $1 (pid $SPID, CPU 1): $URL"
}

run() {
  local row=$1 round=$2; shift 2
  log "[$row] (load $(cut -d' ' -f1 /proc/loadavg)) $C0 $*"
  local j
  if ! j=$(timeout "${RUN_TIMEOUT:-120}" $C0 "$@" 2>>"$OUT/stderr.log" | tail -1) ||
    [ "${j:0:1}" != "{" ]; then
    echo "failed: $row (round $round); see $OUT/stderr.log" >&2
    return 0
  fi
  printf '{"row":"%s","round":%d,"result":%s}\n' "$row" "$round" "$j" >> "$OUT/results.jsonl"
}

curator_classes() {
  local jars=(curator-recipes curator-framework curator-client guava slf4j-api slf4j-nop zookeeper
    zookeeper-jute jackson-databind jackson-core jackson-annotations)
  local cp= j
  CURATOR=()
  for j in "${jars[@]}"; do
    [ -r "/usr/share/java/$j.jar" ] || return 0
    cp+="${cp:+:}/usr/share/java/$j.jar"
  done
  command -v javac >/dev/null || return 0
  # Compiled once (not the single-file launcher: its in-process javac would count in the RSS).
  javac -cp "$cp" -d "$OUT/classes" bench/curator_bench.java 2>>"$OUT/stderr.log" || return 0
  CURATOR=(java -cp "$OUT/classes:$cp" CuratorBench)
}
