// bench/zk_floor.hpp: `lock_bench zk://... W`, the ZooKeeper server's floor for scenarios A and B.
#pragma once

#include <chrono>
#include <string>

namespace dlock::bench {

/// `workers` chains (1: scenario A's; 50: B's), each repeating the three requests a lock pair
/// costs on its own directory (create a protected EPHEMERAL_SEQUENTIAL node, read the
/// directory's children, delete the node) on one handle of the C client, driven by a plain
/// poll loop on this thread, with no lock logic and no dlock code, for `d`; prints one JSON
/// object (ops_per_s: pairs per second, pair_p50_us, pair_p99_us). zk:// URLs only.
int zk_floor(const std::string& url, unsigned workers, std::chrono::milliseconds d);

} // namespace dlock::bench
