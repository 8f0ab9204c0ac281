#!/usr/bin/env bash
# package_test.sh [BUILD_DIR=build/ci]: the Debian package as a user gets it (scripts/test.sh
# runs it after the find_package consumer step).
#   1. `cpack -G DEB` in BUILD_DIR -> build/deb/dlock_<version>_<arch>.deb;
#   2. `dpkg-deb -c`: the library, headers, CMake package, dlock.pc, the CLI, its bash completion
#      and (when docs/dlock.1 exists) its man page are in it; `dpkg-deb -f`: Depends;
#   3. `dpkg -x` into a scratch root (nothing is installed on this machine);
#   4. tests/cmake_consumer built against that root with CMake (CMAKE_PREFIX_PATH) and with
#      plain `c++ main.cpp $(pkg-config --cflags --libs dlock)` (PKG_CONFIG_PATH);
#   5. both consumers run against a private redis-server (scripts/with-redis.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/ci}
out=$PWD/build/deb root=$PWD/build/deb/root
rm -rf "$out" build/consumer-deb
mkdir -p "$out"

echo "-- cpack -G DEB ($build)"
(cd "$build" && cpack -G DEB -B "$out" >"$out/cpack.log") || { cat "$out/cpack.log" >&2; exit 1; }
debs=("$out"/dlock_*.deb)
if [ ${#debs[@]} -ne 1 ] || [ ! -f "${debs[0]}" ]; then
  echo "expected one dlock_*.deb in $out" >&2
  exit 1
fi
deb=${debs[0]}
echo "-- $(basename "$deb"): $(dpkg-deb -f "$deb" Package Version Architecture | tr '\n' ' ')"
depends=$(dpkg-deb -f "$deb" Depends)
echo "   Depends: $depends"
need=(libasio-dev libssl-dev libc6 libstdc++6 libssl3)
# libpq is loaded at run time (src/postgres/libpq.hpp), which dpkg-shlibdeps cannot see.
grep -q '^LIBPQ_FOUND:INTERNAL=1' "$build/CMakeCache.txt" && need+=(libpq5)
for d in "${need[@]}"; do
  [[ ",$depends," == *[\ ,]"${d}"[\ ,\(]* ]] || { echo "Depends lacks $d" >&2; exit 1; }
done

contents=$(dpkg-deb -c "$deb" | awk '{ print $NF }')
expect=(
  ./usr/bin/dlock
  ./usr/include/dlock/dlock.hpp
  ./usr/include/dlock/redis.hpp
  ./usr/include/dlock/zookeeper.hpp
  ./usr/include/dlock/postgres.hpp
  ./usr/share/bash-completion/completions/dlock
)
[ -f docs/dlock.1 ] && expect+=(./usr/share/man/man1/dlock.1.gz)
for f in "${expect[@]}"; do
  grep -qxF "$f" <<<"$contents" || { echo "$f is not in the package" >&2; exit 1; }
done
for pattern in '/libdlock\.a$' '/cmake/dlock/dlockConfig\.cmake$' '/cmake/dlock/dlockTargets\.cmake$' \
  '/pkgconfig/dlock\.pc$'; do
  grep -qE "$pattern" <<<"$contents" || { echo "nothing matching $pattern in the package" >&2; exit 1; }
done
[ -f docs/dlock.1 ] || echo "   (docs/dlock.1 does not exist yet: no man page to check)"
# Nothing else: no private headers (src/), tests or build files.
stray=$(grep -vE '^\./$|^\./(usr/?|usr/(bin|include|lib|share)/?)$|^\./usr/bin/dlock$|^\./usr/include/dlock/|^\./usr/lib/|^\./usr/share/(bash-completion|man)(/|$)' <<<"$contents" || true)
[ -z "$stray" ] || { echo "unexpected files in the package:" >&2; echo "$stray" >&2; exit 1; }

echo "-- dpkg -x into $root"
dpkg-deb -x "$deb" "$root"
"$root/usr/bin/dlock" --version
if [ -f docs/dlock.1 ]; then # the gzipped man page is the one in the tree
  gzip -dc "$root/usr/share/man/man1/dlock.1.gz" | cmp -s - docs/dlock.1 ||
    { echo "the packaged man page differs from docs/dlock.1" >&2; exit 1; }
fi

echo "-- find_package(dlock) against the package"
cmake -S tests/cmake_consumer -B build/consumer-deb/cmake -DCMAKE_PREFIX_PATH="$root/usr" >/dev/null
grep -q "^dlock_DIR:PATH=$root/" build/consumer-deb/cmake/CMakeCache.txt ||
  { echo "find_package(dlock) did not use the package: $(grep '^dlock_DIR' build/consumer-deb/cmake/CMakeCache.txt)" >&2; exit 1; }
cmake --build build/consumer-deb/cmake >/dev/null

echo "-- pkg-config dlock against the package"
pc=$(find "$root" -name dlock.pc)
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs dlock)
echo "   pkg-config --cflags --libs dlock: $flags"
[[ $flags == *"-I$root/usr/"* && $flags == *"-L$root/usr/"* ]] ||
  { echo "pkg-config flags do not point into the package root" >&2; exit 1; }
# shellcheck disable=SC2086 # the flags are words
c++ tests/cmake_consumer/main.cpp $flags -o build/consumer-deb/consumer-pc

for c in build/consumer-deb/cmake/consumer build/consumer-deb/consumer-pc; do
  "$c" --version
  got=$(bash scripts/with-redis.sh "$c")
  echo "   $c: $got"
  # Two lines: the lock's fencing token, then a command through dlock/redis.hpp.
  [[ ${got%%$'\n'*} =~ ^token\ [1-9][0-9]*$ ]] || { echo "$c did not take the lock" >&2; exit 1; }
  [[ ${got#*$'\n'} == "ping PONG on 1 master(s)" ]] ||
    { echo "$c did not run a command through dlock/redis.hpp" >&2; exit 1; }
done
echo "-- package ok: $deb"
