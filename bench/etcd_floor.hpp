// bench/etcd_floor.hpp: `lock_bench etcd://... W`, the etcd server's floor for scenarios A and B,
// and `lock_bench etcd://... WD`, its floor for D's hand-off.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dlock::bench {

/// One client and `workers` threads (A: 1; B: 50), each with sequential pairs of the two writes
/// a Mutex pair costs (put its own key, then delete it), sent through dlock's own gRPC stubs on
/// the client's I/O thread with no lock logic, for `d`; prints one JSON object (ops_per_s,
/// pair_p50_us, pair_p99_us over every worker's pairs). etcd URLs only; 64 otherwise.
int etcd_floor(const std::string& url, unsigned workers, std::chrono::milliseconds d);

/// D's hand-off with no lock logic: "one watch event + one answer", what issue 22 sets D's
/// target against. Two clients (D's --client-per-worker): the first puts a key; the second
/// watches it (from etcd's current revision, deletions only, as a waiter does) and, once the
/// watch is created and after D's random pause of 1-5 ms, the first deletes the key; the second,
/// at the deletion's event, sends one Range of the key. The sample is from the delete's call to
/// that Range's answer, through dlock's own gRPC stubs on each client's I/O thread. After
/// another pause, one Range of the first client (D's round-trip unit: is_locked() is one Range)
/// is timed as well. `samples` samples or `d`, whichever ends first; prints one JSON object
/// (handoff_p50_us, handoff_p99_us, idle_rtt_p50_us, idle_rtt_p99_us).
int etcd_handoff_floor(const std::string& url, std::uint64_t samples, std::chrono::milliseconds d);

} // namespace dlock::bench
