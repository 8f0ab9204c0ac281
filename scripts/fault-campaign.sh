#!/usr/bin/env bash
# The fault campaign (issue 24, item 5): every deterministic fault row (Redis, and ZooKeeper,
# PostgreSQL and etcd where their servers are installed; CI-tier and extended) once per seed,
# one at a time, into OUT/seedN/ID-MODE.json, each with its commit and load average.
# Resumable: present results are kept. See tests/fault/campaign.py for the options.
#   scripts/fault-campaign.sh [--seeds 1-5] [--only REGEX] [--stop-at HH:MM] [--build DIR] OUT
# Then: python3 tests/fault/faultrun.py safety-doc OUT docs/fault-results/*/ > docs/SAFETY.md
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 tests/fault/campaign.py "$@"
