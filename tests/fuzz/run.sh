#!/usr/bin/env bash
# Builds the parser fuzzer with clang and runs it for a bounded time (default 60 s).
# Exit status is non-zero when the fuzzer finds a crash; the reproducer is left in build/fuzz.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
cmake -S . -B build/fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDLOCK_BUILD_FUZZ=ON -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_TOOLS=OFF \
  -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_BENCH=OFF -DDLOCK_INSTALL=OFF >/dev/null
cmake --build build/fuzz --target resp3_parser_fuzz -j"$(nproc)" >/dev/null
mkdir -p build/fuzz/corpus
cp tests/fuzz/corpus/* build/fuzz/corpus/
cd build/fuzz
./tests/fuzz/resp3_parser_fuzz -max_total_time="$seconds" -timeout=5 -rss_limit_mb=1024 \
  -print_final_stats=1 corpus 2>&1 | tail -n 12
