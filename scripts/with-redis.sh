#!/usr/bin/env bash
# with-redis.sh CMD [ARGS...]: runs CMD with the URL of a private, throw-away redis-server as its
# last argument (free loopback port, temp dir, no persistence), then stops the server.
set -euo pipefail
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock-with-redis-XXXXXX")
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
for _ in $(seq 1 50); do
  port=$((20000 + RANDOM % 20000))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    --logfile "$dir/redis.log" &
  pid=$!
  for _ in $(seq 1 500); do
    redis-cli -p "$port" PING 2>/dev/null | grep -q PONG && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  if redis-cli -p "$port" PING 2>/dev/null | grep -q PONG; then
    "$@" "redis://127.0.0.1:$port"
    exit $?
  fi
  wait "$pid" 2>/dev/null || true
  pid=
done
echo "with-redis: could not start redis-server" >&2
exit 1
