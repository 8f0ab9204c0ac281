#!/usr/bin/env bash
# The README's first command: installs what is missing, builds the dlock CLI (Release) and runs
# the stock-deduction demo on a private redis-server that `dlock demo` starts and stops itself.
# Extra arguments go to `dlock demo` (e.g. --processes 3 --threads 4, or --url redis://host:port).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DDLOCK_BUILD_TESTS=OFF \
  -DDLOCK_BUILD_BENCH=ON -DDLOCK_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build/release --target dlock_cli_main -j"$(nproc)" >/dev/null
exec build/release/tools/dlock/dlock demo "$@"
