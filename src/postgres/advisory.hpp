// PostgreSQL advisory locks (the default kind of a postgresql:// client).
//
// Acquisition: a session of its own per hold (pooled when idle) and one pipelined batch:
//   [DO: create the sequence dlock_fence if missing (first acquisition only)]
//   SELECT set_config('application_name', 'dlock:<name>', false)   -- `dlock list` reads it
//   SELECT set_config('lock_timeout', '<remaining wait> ms', false)  -- 0 = wait forever
//   SELECT pg_advisory_lock[_shared](<key>)          -- waits in the server's queue (FIFO)
//   SELECT nextval('dlock_fence')                    -- exclusive kinds: the fencing token
// A try (wait = 0) is one statement instead of the last two:
//   SELECT CASE WHEN pg_try_advisory_lock(<key>) THEN nextval('dlock_fence') END
// The wait ends in the server (SQLSTATE 55P03 = not acquired) and, one statement budget
// later, on the client (the session is then closed, which drops a late grant with it).
//
// Holding: the session's socket is watched all the time, so a session the server ends
// (pg_terminate_backend, restart, crash) is a loss at once; and a `SELECT 1` every
// check_period / 2 proves it alive: valid_until = the send time of the last good check +
// check_period, and a hold whose valid_until passes unproven is lost (the session is closed,
// so the server frees the lock). The server frees a vanished client's lock within the
// keepalive bound (settings.hpp). There is no lease: extend() proves the session alive, and a
// fixed lease (acquire_options::lease) ends the hold and frees the lock when it runs out.
//
// Release: pg_advisory_unlock[_shared]; true puts the session back in the pool, false means
// the lock was not ours (lost); a session that died during the release freed the lock too.
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
