#!/usr/bin/env bash
# Installs what dlock needs to build and test, from Debian 12 packages, when it is missing.
# As root it runs apt-get itself; otherwise it uses sudo if present, or prints the command.
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config
  libasio-dev libssl-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  prometheus-cpp-dev
  redis-server redis-tools redis-sentinel openssl
  libpq-dev postgresql libpostgresql-jdbc-java default-jre-headless iproute2 nftables pgbouncer
  zookeeper libzookeeper-st-dev libcurator-recipes-java python3-kazoo
  etcd-server etcd-client libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  doxygen file dpkg-dev
  tmux groff-base
  python3
)
[ "${DLOCK_DEPS_EXTRA:-}" ] && read -r -a extra <<<"$DLOCK_DEPS_EXTRA" && packages+=("${extra[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
  apt_get=(apt-get)
elif command -v sudo >/dev/null 2>&1; then
  apt_get=(sudo apt-get)
else
  echo "deps: missing packages and not root; run as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${apt_get[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null ||
  { "${apt_get[@]}" update >/dev/null && "${apt_get[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null; }
# The distribution's redis service is never used by dlock; tests start their own servers.
if command -v systemctl >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  systemctl disable --now redis-server redis-sentinel >/dev/null 2>&1 || true
  # Nor the distribution's PostgreSQL cluster (tests run initdb + pg_ctl in a temp dir).
  systemctl disable --now postgresql >/dev/null 2>&1 || true
  # Nor its etcd (tests start their own members on free loopback ports).
  systemctl disable --now etcd >/dev/null 2>&1 || true
  # Nor its PgBouncer (a test starts its own in front of its own PostgreSQL).
  systemctl disable --now pgbouncer >/dev/null 2>&1 || true
fi
