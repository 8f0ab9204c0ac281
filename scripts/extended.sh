#!/usr/bin/env bash
# The extended tier: what CI's scripts/test.sh leaves out for time (docs/design/ci.md, "When the
# run outgrows the budget"), run after it on the same trees:
#   bash scripts/extended.sh
# - the fault tier's extended modes (`ctest -L extended` in build/ci, one at a time);
# - under ASan+UBSan (build/asan), the suites named by asan_extended: the PostgreSQL suites
#   (each starts its own server: initdb is slow under a loaded CPU), the Sentinel and Cluster
#   topology suites and the multi-lock suite (timing-bound; TSan runs them in CI's step 6), the
#   etcd cluster suite (member kills and restarts), the Curator interop suite (its other side is
#   a JVM), the fault suite's history checker (a test tool, not the library) and the CLI's
#   black-box suite `cli.*` (tests/cli/cli_test.sh: hundreds of short ASan processes, a fifth of
#   the ASan step's test time; step 1 runs it on the release build, and the CLI's GoogleTest
#   suites stay under ASan in CI), and the three slowest suites left after it (Redlock's
#   masters, ZooKeeper's election, the ZooKeeper CLI: about 186 s of ASan test time; the
#   conformance suite runs Redlock, ZooKeeper and elections under ASan in CI), and the
#   ZooKeeper and etcd integration suites (their executables' ASan build and their servers'
#   start-ups; the conformance suite runs both backends' kinds under ASan in CI, and their
#   unit tests stay). The conformance suite keeps every backend under ASan in CI.
# scripts/test.sh sources this file for asan_extended only: its ASan tree neither builds nor runs
# those suites (DLOCK_TEST_SKIP), and this script builds them first.
asan_extended='^(postgres_[a-z_]+|cli_postgres_test|redis_topology_sentinel_test|redis_topology_cluster_test|redis_locks_multi_lock_test|checker_test|zookeeper_curator_interop_test|etcd_cluster_test|cli|redis_redlock_masters_test|zookeeper_election_test|cli_zookeeper_test|zookeeper_(lock|client|semaphore|ensemble|log)_test|etcd_(auth|rwlock|semaphore|interop|election|once|log|tls)_test)\.'

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  cd "$(dirname "$0")/.."
  for d in build/ci build/asan; do
    [ -d "$d" ] || { echo "extended.sh: $d is missing: run scripts/test.sh first" >&2; exit 2; }
  done
  ctest --test-dir build/ci --output-on-failure --timeout 300 --no-tests=error -L extended
  # CI's ASan tree does not build these suites (DLOCK_TEST_SKIP): build them now.
  cmake -S . -B build/asan -DDLOCK_TEST_SKIP= >/dev/null
  cmake --build build/asan -j"$(nproc)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp \
    ctest --test-dir build/asan --output-on-failure --timeout 300 --no-tests=error -LE fault \
    -j2 -R "$asan_extended"
fi
