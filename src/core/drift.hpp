// core/drift.hpp: the clock-drift allowance every backend subtracts from a lease or session
// timeout before it believes a lock is still its own: lease * 1% + 2 ms (SAFETY.md; the fault
// checker's drift_ns says the same). One definition for Redis, Redlock (quorum_round),
// ZooKeeper (the session's validity) and PostgreSQL (lease rows).
#pragma once

#include <chrono>

namespace dlock::detail {

/// lease / 100 + 2 ms, in nanoseconds (a 150 ms lease: 3.5 ms). Edge values: lease <= 0 gives
/// 2 ms plus a non-positive share; callers reject such leases before.
constexpr std::chrono::nanoseconds drift_for(std::chrono::milliseconds lease) noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(lease) / 100 +
           std::chrono::milliseconds(2);
}

} // namespace dlock::detail
