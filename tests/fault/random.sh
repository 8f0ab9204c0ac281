#!/usr/bin/env bash
# The randomised fault tier (reliability.md §7.7 tier 3, tests/fault/random_tier.py): one
# Jepsen-style schedule of faults that keep dlock's model (lost replies, resets, held replies,
# blackholes, slow replies, nft partitions, server stalls, worker kill -9 with a replacement,
# SCRIPT FLUSH, server kill -9 with appendfsync always, server clocks stepped back or running
# 0.3 % off, workers' wall clocks stepped) for SECONDS, with SEED, in MODE (S, F, R or FO;
# default F), then the checker's verdict, the faults that fired and the liveness bound. FO is a
# Sentinel-managed master with coordinated failovers (writes paused until the replicas caught
# up, SENTINEL FAILOVER) in the mix, the master's cuts kept under down-after-milliseconds, and
# no server restart or server clock fault (random_tier.py says why).
#   tests/fault/random.sh 180 42 F [BUILD_DIR] [RESULTS_DIR]
#   tests/fault/random.sh 120 401 FO
# The result (RND-MODE.json, with the commit and the fault tally) goes to RESULTS_DIR (default
# BUILD_DIR/fault-results-random). Exit 0 when the run went as expected (SAFE, every probe
# passed), 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:?usage: tests/fault/random.sh SECONDS SEED [MODE] [BUILD_DIR] [RESULTS_DIR]}
seed=${2:?usage: tests/fault/random.sh SECONDS SEED [MODE] [BUILD_DIR] [RESULTS_DIR]}
mode=${3:-F}
build=${4:-build/ci}
results=${5:-$build/fault-results-random}
cmake --build "$build" --target dlock_fault_worker dlock_fault_proxy dlock_check dlock_skew >/dev/null
exec python3 tests/fault/faultrun.py --worker "$build/tests/fault/dlock_fault_worker" \
  --proxy "$build/tests/fault/dlock_fault_proxy" --check "$build/tests/fault/dlock_check" \
  --skew "$build/tests/fault/libdlock_skew.so" \
  random --seconds "$secs" --seed "$seed" --mode "$mode" --results "$results"
