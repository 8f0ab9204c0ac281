// inspect.hpp: reading a lock's state from its Redis layout, shared by `dlock status`, `list`
// and their --watch views (watch.cpp). Everything goes through client::command(), so locks
// taken by Redisson (Java) and redis-py show the same way.
#pragma once

#include "common.hpp"

#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace dlock::cli {

struct holder {
    std::string owner;
    long long count = 0;
};

/// What one name holds, as status and list print it.
struct lock_info {
    std::string name;
    std::string kind = "none"; ///< "lock", "simple", "fair", "read-write" or "none" (nothing)
    std::string foreign_type;  ///< non-empty: N exists but holds this, which is not a lock
    std::vector<holder> holders;
    std::optional<long long> ttl_ms;        ///< remaining lease; -1: no expiry; nullopt: no lock
    long long waiters = 0;                  ///< clients subscribed to N's unlock channels
    std::optional<long long> fencing_token; ///< value of the fencing counter, if it exists
    /// Fair lock: the waiters in queue order, each with the ms left of its place (its
    /// deadline on the server's clock minus the server's TIME; nullopt: no deadline).
    std::vector<std::pair<std::string, std::optional<long long>>> queue;
    /// Read-write lock: its mode ("read" or "write"), and the PTTL of a waiting dlock writer's
    /// marker (nullopt: no writer waits).
    std::string mode;
    std::optional<long long> writer_waiting_ms;
};

/// Reads what `name` holds. Not atomic (a few commands): a lock that changes meanwhile may
/// show a mix, never a wrong kind. Errors: dlock::error (transport, or an error reply).
lock_info inspect(client& c, const std::string& name);

/// The locks that exist now among the keys matching `pattern` (SCAN MATCH syntax), by name.
std::vector<lock_info> list_locks(client& c, const std::string& pattern);

void print_json(std::ostream& out, const lock_info& i);
void print_status_text(std::ostream& out, const lock_info& i);
void print_list_text(std::ostream& out, const std::vector<lock_info>& locks);
std::string ttl_text(const lock_info& i);
std::string fencing_text(const lock_info& i);

/// The failure for a name that holds something else (exit 65).
failure not_a_lock(const lock_info& i);

} // namespace dlock::cli
