// dlock/inspect.hpp: what a lock looks like on its server, for tools (dlock status / list) and
// operators, on any backend that dlock::client::inspect() and list() answer for (ZooKeeper and
// PostgreSQL; on Redis the CLI reads the keys of dlock/layout.hpp itself).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dlock {

/// One owner or waiter of a lock as its server records it.
struct lock_contender {
    /// The owner as stored (a Curator node's `_c_<uuid>` prefix, a lease row's `locked_by`, a
    /// PostgreSQL backend pid): never a password.
    std::string owner{};
    /// Where it is recorded: a znode path, a table row key, "pid 1234".
    std::string entry{};
    /// The session that keeps it (ZooKeeper session id in hex, PostgreSQL backend pid); empty
    /// where the backend has none.
    std::string session{};
    /// True for a holder, false for a waiter.
    bool holds = false;
    /// The contender's place in the queue (0 = first), where the backend keeps an order.
    std::optional<std::uint64_t> position{};
    /// The fencing token this contender would carry (a creation zxid, a sequence value).
    std::optional<std::uint64_t> token{};
};

/// A lock as `dlock status` shows it.
struct lock_status {
    /// The lock's name, as given to client::inspect() or as list() found it.
    std::string name{};
    /// The kind as the backend names it ("lock", "read", "write", "semaphore", "shedlock", ...).
    std::string kind{};
    /// False when nothing of the lock exists on the server now.
    bool exists = false;
    /// Holders first, then waiters in queue order.
    std::vector<lock_contender> contenders{};
    /// Remaining lease of the holder, where the backend has leases.
    std::optional<std::chrono::milliseconds> remaining_lease{};
    /// The last fencing token given out for this lock, where the backend keeps a counter.
    std::optional<std::uint64_t> fencing_counter{};
    /// Anything else worth one line (a lease table's `locked_at`, permits of a semaphore).
    std::string detail{};
};

} // namespace dlock
