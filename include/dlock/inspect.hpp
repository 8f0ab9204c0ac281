// dlock/inspect.hpp: what a lock looks like on its server, for tools (dlock status / list) and
// operators: one shape on every backend (dlock::client::inspect() and list()). What only one
// backend knows goes into lock_status::details; `dlock status --json` prints this shape
// (docs/dlock.1, "STATUS SCHEMA").
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
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
    /// How many times the holder holds it (a reentrant lock's count on the server), where the
    /// backend records it.
    std::optional<std::int64_t> hold_count{};
    /// A waiter's remaining place in the queue (Redisson's fair lock), where the backend has
    /// such deadlines.
    std::optional<std::chrono::milliseconds> remaining{};
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
    /// The backend that answered: "redis", "redlock", "zookeeper", "postgresql"
    /// (client::backend_name()).
    std::string backend{};
    /// How many wait, where the backend can count waiters it cannot name (Redis counts the
    /// subscribers of the lock's channels); nullopt where every waiter is a contender above.
    std::optional<std::uint64_t> waiter_count{};
    /// Backend-specific facts by name (Redis's read-write lock: "mode", "writer_waiting_ms").
    std::map<std::string, std::string> details{};
    /// Non-empty when the name holds something that is not a lock (a Redis key of another
    /// type or content): what it holds. Then nothing else is filled in.
    std::string foreign{};
};

} // namespace dlock
