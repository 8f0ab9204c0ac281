#!/usr/bin/env bash
# The randomised fault tier (reliability.md §7.7 tier 3): one Jepsen-style schedule of faults
# that keep dlock's model (lost replies, resets, held replies, blackholes, slow replies, server
# stalls, worker kill -9 with a replacement, SCRIPT FLUSH, server kill -9 with appendfsync
# always) for SECONDS, with SEED, in MODE (S, F or R; default F), then the checker's verdict.
#   tests/fault/random.sh 180 42 F [BUILD_DIR]
# Exit 0 when the checker found what SAFE expects (no violation), 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:?usage: tests/fault/random.sh SECONDS SEED [MODE] [BUILD_DIR]}
seed=${2:?usage: tests/fault/random.sh SECONDS SEED [MODE] [BUILD_DIR]}
mode=${3:-F}
build=${4:-build/ci}
cmake --build "$build" --target dlock_fault_worker dlock_fault_proxy dlock_check dlock_skew >/dev/null
exec python3 tests/fault/faultrun.py --worker "$build/tests/fault/dlock_fault_worker" \
  --proxy "$build/tests/fault/dlock_fault_proxy" --check "$build/tests/fault/dlock_check" \
  --skew "$build/tests/fault/libdlock_skew.so" \
  random --seconds "$secs" --seed "$seed" --mode "$mode" --results "$build/fault-results-random"
