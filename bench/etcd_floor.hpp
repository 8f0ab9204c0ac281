// bench/etcd_floor.hpp: `lock_bench etcd://... W`, the etcd server's floor for scenario A.
#pragma once

#include <chrono>
#include <string>

namespace dlock::bench {

/// One client, sequential pairs of the two writes a Mutex pair costs (put a key, then delete
/// it), sent through dlock's own gRPC stubs on its I/O thread with no lock logic, for `d`;
/// prints one JSON object (ops_per_s, pair_p50_us, pair_p99_us). etcd URLs only; 64 otherwise.
int etcd_floor(const std::string& url, std::chrono::milliseconds d);

} // namespace dlock::bench
