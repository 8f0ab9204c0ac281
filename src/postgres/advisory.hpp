// PostgreSQL advisory locks (the default kind of a postgresql:// client).
//
// Holds live on holding sessions (advisory_sessions.hpp): a few sessions (at most settings::pool
// opened for tries), each holding any number of distinct keys, never one key twice (session
// locks stack).
//
// Acquisition tries first, pipelined on the least-loaded holding session without the key:
//   SELECT set_config('application_name', 'dlock:<name>' or 'dlock<count>', false)
//   SELECT CASE WHEN pg_try_advisory_lock[_shared](<key>) THEN nextval('dlock_fence') END
// Not granted and a wait left: a session of its own from the idle pool and one batch:
//   [DO: create the sequence dlock_fence if missing (first acquisition only)]
//   SELECT set_config('application_name', 'dlock:<name>', false)   -- `dlock list` reads it
//   SELECT set_config('lock_timeout', '<remaining wait> ms', false)  -- 0 = wait forever
//   SELECT pg_advisory_lock[_shared](<key>)          -- waits in the server's queue (FIFO)
//   SELECT nextval('dlock_fence')                    -- exclusive kinds: the fencing token
// The wait ends in the server (SQLSTATE 55P03 = not acquired) and, one statement budget
// later, on the client (the session is then closed, which drops a late grant with it). Once
// granted, the session joins the holding set. Hashtext keys (computed by the server, so two
// names may share one) and campaigns always take this path and their sessions take no tries.
//
// Holding: each holding session's socket is watched all the time, so a session the server ends
// (pg_terminate_backend, restart, crash) is a loss of every hold on it at once; and a `SELECT 1`
// every check_period / 2 proves them all: valid_until = the send time of the last good check +
// check_period, and a session whose check is not answered by then loses every hold (it is
// closed, so the server frees the locks). The server frees a vanished client's locks within the
// keepalive bound (settings.hpp). There is no lease: extend() proves the session alive, and a
// fixed lease (acquire_options::lease) ends the hold and unlocks the key when it runs out.
//
// Release: pg_advisory_unlock[_shared] on the hold's session; false means the lock was not ours
// (lost); no answer closes the session (every hold on it lost). A session that holds nothing
// goes back to the idle pool.
#pragma once

#include "core/glob.hpp"
#include "postgres/advisory_key.hpp"
#include "postgres/engine.hpp"

#include <dlock/inspect.hpp>
#include <dlock/lock_options.hpp>

#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

namespace dlock::detail::pg {

/// True for the kinds advisory locks serve: reentrant, simple, fair (exclusive; the server's
/// queue is FIFO), write (exclusive) and read (shared).
bool advisory_kind(lock_kind kind) noexcept;
/// "lock", "read" or "write".
const char* advisory_kind_name(lock_kind kind) noexcept;

using acquire_handler = std::function<void(std::error_code, std::shared_ptr<hold>)>;

/// I/O thread: acquires the advisory lock `name` as `opts` asks; `done` once on the I/O thread
/// (null hold and clear ec = not acquired within the wait).
void acquire_advisory(const std::shared_ptr<engine>& e, std::string name,
                      const acquire_options& opts, acquire_handler done);

/// I/O thread: the holders and waiters of the lock `name` from pg_locks.
void inspect_advisory(const std::shared_ptr<engine>& e, std::string name, lock_kind kind,
                      std::function<void(std::error_code, lock_status)> done);
/// I/O thread: ends every session holding the lock (pg_terminate_backend); true if any.
void force_unlock_advisory(const std::shared_ptr<engine>& e, std::string name,
                           std::function<void(std::error_code, bool)> done);
/// I/O thread: every advisory lock of the database (names from dlock's sessions'
/// application_name, else the key), filtered by the glob `pattern`.
void list_advisory(const std::shared_ptr<engine>& e, std::string pattern,
                   std::function<void(std::error_code, std::vector<lock_status>)> done);

/// Glob match: `*` any run, `?` one byte; empty pattern matches everything (core/glob.hpp).
using detail::glob_match;

} // namespace dlock::detail::pg
