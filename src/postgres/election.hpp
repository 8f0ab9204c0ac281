// Leader election on PostgreSQL (dlock/election.hpp; docs/design/election.md). No incumbent
// client has an election layout on PostgreSQL, so the layout is dlock's own:
//
// - Leading is holding the advisory lock of the election's name: the key of the lock of that
//   name (advisory_key.hpp, the URL's key scheme), as on ZooKeeper and etcd, where an election
//   and a lock of one name share the directory or range. A campaign is the advisory lock's
//   acquisition (advisory.cpp): a session of its own, the server's FIFO queue, no polling.
// - The leader's row, dlock_election(name, value, epoch, pid), is written on the leader's own
//   session by the statement after the grant, in the same batch (one round trip); the epoch is
//   nextval('dlock_fence'), so successive leaders' epochs strictly increase. The same statement
//   sends NOTIFY dlock_election with the name. The value is bytea: any bytes.
// - leader() reads the row whose pid holds the name's advisory lock (pg_locks), so a row left by
//   a leader that died (its session ended, the lock went with it) reads as vacant.
// - proclaim() updates the row on the leader's own session where name, epoch and pid are still
//   its own, and notifies; resign deletes the row (by its epoch) and unlocks, in one batch.
// - observe() (observe.cpp) reads the leader, then waits for a change: a NOTIFY on the
//   engine's LISTEN session (a new leader or value), and, while there is a leader, a shared
//   request of the advisory lock on a session of its own, pipelined with its release: the
//   server grants it when the leader's lock is released or its session ends, and the release
//   follows at once in the server (no client round trip holds the election up).
#pragma once

#include "core/lock_backend.hpp"
#include "postgres/advisory.hpp"

#include <dlock/election.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock::detail::pg {

/// A PL/pgSQL block creating dlock_election when it is missing.
extern const std::string election_ddl;

/// `bytes` as lowercase hex (the value travels as text: decode($n, 'hex')).
std::string to_hex(std::string_view bytes);
/// The bytes of lowercase or uppercase hex `text`; nullopt when it is not hex.
std::optional<std::string> from_hex(std::string_view text);

/// The statement after the grant that records the leader of `name` with `value`: one row, one
/// column, the epoch (none when `try_key` is given and the lock was not free). `try_key`: the
/// lock is tried in the same statement (pg_try_advisory_lock; its parameters first).
statement lead_statement(const std::string& name, const std::string& value,
                         const advisory_key* try_key);
/// A leader's new value, on its own session: one row when it still leads.
statement proclaim_statement(const std::string& name, const std::string& value,
                             std::uint64_t epoch);
/// The leader's row deleted by its epoch (resign, before the unlock).
statement resign_statement(const std::string& name, std::uint64_t epoch);

/// I/O thread: campaigns for `name` with `value` (advisory.cpp; `done` once on the I/O
/// thread, a null hold and clear ec when not elected within `wait`).
void campaign_advisory(const std::shared_ptr<engine>& e, std::string name, std::string value,
                       std::optional<std::chrono::milliseconds> wait, acquire_handler done);
/// I/O thread: the leader of `name` (nullopt = vacant).
void read_leader(const std::shared_ptr<engine>& e, const std::string& name,
                 std::function<void(std::error_code, std::optional<leader_info>)> done);
/// I/O thread: `leader`'s new value (errc::not_owner when it is not a leader's hold of this
/// backend, or no longer leads).
void proclaim_leader(hold& leader, std::string value, std::function<void(std::error_code)> done);
/// Not on the I/O thread: observes `name` (observe.cpp; the contract of lock_backend::observe).
std::shared_ptr<observer> observe_election(const std::shared_ptr<engine>& e, std::string_view name,
                                           lock_backend::observe_fn cb, std::error_code& ec);

} // namespace dlock::detail::pg
