#!/usr/bin/env bash
# The README's second command and what CI runs (.ci/run): installs what is missing, then
#   1. a warnings-as-errors build of everything, the whole test suite (unit + integration
#      against real redis-server processes the tests start), and the examples;
#   1b. the deterministic fault tier (`ctest -L fault -LE extended`, fixed seeds,
#      tests/fault/faultrun.py; the modes labelled `extended` are left to `ctest -L extended`):
#      the scenarios of reliability.md §7.3 judged by the history checker; it writes
#      build/ci/fault-results, from which docs/SAFETY.md is generated. Steps 1 and 5 leave it
#      out (-LE fault): it is timing-based and runs once, here;
#   2. lint: the clang-format check and clang-tidy (scripts/lint.sh, checks in .clang-tidy);
#   3. the find_package(dlock) consumer test against an installed copy;
#   4. the Debian package (scripts/package_test.sh): `cpack -G DEB`, its contents, `dpkg -x`
#      into a scratch root, the consumer built against it with CMake and with pkg-config;
#   5. an ASan+UBSan build running the whole suite;
#   6. a TSan build running the lock family (lock, rwlock, multi-lock, Redlock), lease and
#      connection suites (async and renewal code);
#   7. the libFuzzer parser target for a bounded time (DLOCK_FUZZ_SECONDS, default 60).
# Set DLOCK_TEST_QUICK=1 to run only step 1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
jobs=$(nproc)
# Serial: the integration tests start their own servers and some assert time bounds (a wait
# deadline honoured within milliseconds); running them side by side on 2 cores adds jitter.
ctest_args=(--output-on-failure --timeout 300 --no-tests=error -LE fault)

step() { printf '\n==== %s ====\n' "$*"; }

step "1/7 build (warnings are errors) and test"
cmake -S . -B build/ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_WARNINGS_AS_ERRORS=ON >/dev/null
cmake --build build/ci -j"$jobs"
ctest --test-dir build/ci "${ctest_args[@]}"
[ "${DLOCK_TEST_QUICK:-0}" = 1 ] && exit 0

step "1b/7 fault tier: the scenarios of reliability.md §7.3 (fixed seeds)"
rm -rf build/ci/fault-results
ctest --test-dir build/ci --output-on-failure --timeout 300 --no-tests=error -L fault -LE extended

step "2/7 lint: clang-format check and clang-tidy"
bash scripts/lint.sh build/ci

step "3/7 find_package(dlock) consumer"
rm -rf build/install build/consumer
cmake --install build/ci --prefix build/install >/dev/null
cmake -S tests/cmake_consumer -B build/consumer -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/consumer -j"$jobs" >/dev/null
build/consumer/consumer --version
bash scripts/with-redis.sh build/consumer/consumer

step "4/7 Debian package: cpack -G DEB, dpkg -x, consumer with CMake and pkg-config"
bash scripts/package_test.sh build/ci

step "5/7 ASan+UBSan build and test"
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DDLOCK_WARNINGS_AS_ERRORS=ON \
  -DDLOCK_SANITIZE=address,undefined -DDLOCK_BUILD_BENCH=OFF >/dev/null
cmake --build build/asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan "${ctest_args[@]}"

step "6/7 TSan build: lock family, lease and connection suites"
cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=Debug -DDLOCK_WARNINGS_AS_ERRORS=ON \
  -DDLOCK_SANITIZE=thread -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_TOOLS=OFF -DDLOCK_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/tsan -j"$jobs"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build/tsan "${ctest_args[@]}" -R '^(lock|lease|interop|connection|connection_faults|sync_lane|rwlock|rwlock_redisson|rwlock_interop|redlock|multi_lock|multi_mutex|kinds/multi_lock_kinds|sentinel|cluster)\.'

step "7/7 parser fuzzing (${DLOCK_FUZZ_SECONDS:-60} s)"
bash tests/fuzz/run.sh "${DLOCK_FUZZ_SECONDS:-60}"

step "all green"
