// inspect.hpp: `dlock status`, `list` and `unlock --force` on every backend, and their --watch
// views (watch.cpp): one path over client::inspect / list / force_unlock, which read each
// store's own records (Redis keys in Redisson's and redis-py's layouts, ZooKeeper nodes,
// pg_locks and the lease tables), and one schema (docs/dlock.1, STATUS SCHEMA).
#pragma once

#include "common.hpp"

#include <chrono>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace dlock::cli {

/// The client of `g`: Redlock for several --url or a redlock:// URL (redlock_options_for), else
/// the one URL's (Redis URLs take $DLOCK_PASSWORD and the client name "dlock-cli"; other
/// schemes go to the library's table of backends). Errors: usage_error for a bad URL, failure
/// otherwise. `watchdog`: client_options::watchdog_lease on Redis and Redlock (ignored elsewhere).
client open_client(const global_options& g,
                   std::optional<std::chrono::milliseconds> watchdog = std::nullopt);

/// What `status NAME` shows: the first kind that holds `name` (`found`: which one; on Redis
/// every kind shares one key and the kind is read from it), else the default kind's free
/// view. Errors: failure (diagnosed), usage_error for a name no lock may have.
lock_status status_of(client& c, const std::string& name, lock_kind* found = nullptr);

/// The locks that exist now among the names matching `pattern` (glob: * and ?).
std::vector<lock_status> list_locks(client& c, const std::string& pattern);

std::size_t holder_count(const lock_status& s);
/// How many wait: the backend's count where it has one, else the waiting contenders.
std::uint64_t waiter_count(const lock_status& s);
std::string ttl_text(const lock_status& s);
std::string fencing_text(const lock_status& s);

void print_json(std::ostream& out, const lock_status& s);
void print_status_text(std::ostream& out, const lock_status& s);
void print_list_text(std::ostream& out, const std::vector<lock_status>& locks);

/// The failure for a name that holds something else (exit 65).
failure not_a_lock(const lock_status& s);

} // namespace dlock::cli
