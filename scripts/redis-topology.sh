#!/usr/bin/env bash
# Start the test topologies by hand (the same choices as tests/support/redis_fixture.cpp):
#
#   scripts/redis-topology.sh start standalone|password|tls|masters N|sentinel|cluster [--dir D]
#   scripts/redis-topology.sh stop D
#
# `start` prints the URL(s) and the directory holding configs, logs and pids; everything binds
# 127.0.0.1 on free ports. `stop D` stops every process started under D and removes D.
set -euo pipefail

free_port() { # free_port [BUS]: a free port (and port+10000 when BUS is set)
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
    if [ -n "${1:-}" ]; then (exec 3<>"/dev/tcp/127.0.0.1/$((p + 10000))") 2>/dev/null && continue; fi
    echo "$p"; return 0
  done
  echo "no free port" >&2; return 1
}

wait_ping() { # wait_ping PORT [redis-cli args...]
  local port=$1; shift
  for _ in $(seq 1 500); do
    redis-cli -p "$port" "$@" PING 2>/dev/null | grep -Eq 'PONG|NOAUTH' && return 0
    sleep 0.02
  done
  echo "server on $port did not answer" >&2; return 1
}

start_server() { # start_server DIR NAME [extra redis-server args...] -> prints port
  local dir=$1 name=$2; shift 2
  local port; port=$(free_port bus)
  mkdir -p "$dir/$name"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir/$name" \
    --logfile "$dir/$name/redis.log" --enable-debug-command local "$@" \
    </dev/null >"$dir/$name/stdout.log" 2>&1 &
  echo $! >> "$dir/pids"
  echo "$port"
}

cmd=${1:-}; shift || true
case $cmd in
start)
  kind=${1:?kind}; shift
  n=3
  if [ "$kind" = masters ]; then n=${1:?count}; shift; fi
  dir=
  [ "${1:-}" = --dir ] && dir=$2
  [ -n "$dir" ] || dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock-topology-XXXXXX")
  mkdir -p "$dir"
  case $kind in
  standalone)
    p=$(start_server "$dir" s0); wait_ping "$p"; echo "redis://127.0.0.1:$p" ;;
  password)
    p=$(start_server "$dir" s0 --requirepass dlock-test); wait_ping "$p"
    echo "redis://127.0.0.1:$p (password: dlock-test; pass it via DLOCK_PASSWORD)" ;;
  tls)
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/ca.key" \
      -out "$dir/ca.crt" -days 1 -subj "/CN=dlock test CA" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/server.key" \
      -out "$dir/server.csr" -subj "/CN=localhost" 2>/dev/null
    echo "subjectAltName=IP:127.0.0.1,DNS:localhost" > "$dir/ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
      -CAcreateserial -out "$dir/server.crt" -days 1 -extfile "$dir/ext" 2>/dev/null
    port=$(free_port)
    mkdir -p "$dir/s0"
    redis-server --port 0 --tls-port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$dir/s0" --logfile "$dir/s0/redis.log" --tls-cert-file "$dir/server.crt" \
      --tls-key-file "$dir/server.key" --tls-ca-cert-file "$dir/ca.crt" --tls-auth-clients no \
      </dev/null >"$dir/s0/stdout.log" 2>&1 &
    echo $! >> "$dir/pids"
    wait_ping "$port" --tls --cacert "$dir/ca.crt"
    echo "rediss://127.0.0.1:$port (CA: $dir/ca.crt)" ;;
  masters)
    for i in $(seq 1 "$n"); do
      p=$(start_server "$dir" "m$i"); wait_ping "$p"; echo "redis://127.0.0.1:$p"
    done ;;
  sentinel)
    m=$(start_server "$dir" master); wait_ping "$m"
    for i in 1 2; do
      r=$(start_server "$dir" "replica$i" --replicaof 127.0.0.1 "$m"); wait_ping "$r"
    done
    hosts=
    for i in 1 2 3; do
      s=$(free_port); mkdir -p "$dir/sentinel$i"
      cat > "$dir/sentinel$i/sentinel.conf" <<CONF
port $s
bind 127.0.0.1
dir $dir/sentinel$i
logfile $dir/sentinel$i/sentinel.log
sentinel monitor mymaster 127.0.0.1 $m 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 3000
sentinel parallel-syncs mymaster 1
CONF
      redis-sentinel "$dir/sentinel$i/sentinel.conf" </dev/null >"$dir/sentinel$i/stdout.log" 2>&1 &
      echo $! >> "$dir/pids"
      wait_ping "$s"
      hosts="$hosts${hosts:+,}127.0.0.1:$s"
    done
    echo "redis-sentinel://$hosts/mymaster" ;;
  cluster)
    nodes=()
    for i in 1 2 3 4 5 6; do
      p=$(start_server "$dir" "node$i" --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-node-timeout 2000); wait_ping "$p"; nodes+=("127.0.0.1:$p")
    done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >/dev/null
    first=${nodes[0]##*:}
    for _ in $(seq 1 1500); do
      redis-cli -p "$first" CLUSTER INFO | grep -q cluster_state:ok && break; sleep 0.02
    done
    echo "redis-cluster://${nodes[0]},${nodes[1]},${nodes[2]}" ;;
  *) echo "unknown topology '$kind'" >&2; exit 64 ;;
  esac
  echo "dir: $dir (stop with: $0 stop $dir)"
  ;;
stop)
  dir=${1:?dir}
  [ -f "$dir/pids" ] && while read -r pid; do kill "$pid" 2>/dev/null || true; done < "$dir/pids"
  for _ in $(seq 1 250); do
    alive=0
    [ -f "$dir/pids" ] && while read -r pid; do kill -0 "$pid" 2>/dev/null && alive=1; done < "$dir/pids"
    [ $alive -eq 0 ] && break; sleep 0.02
  done
  rm -rf "$dir"
  ;;
*) sed -n '2,8p' "$0"; exit 64 ;;
esac
