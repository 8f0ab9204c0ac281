// Lease rows: locks kept as rows of a table with an expiry in database time, renewed by a
// watchdog, released by the owner's own statement. Two kinds share the machinery (one hold
// class, one attempt loop, one set of queries) and differ in their statements:
//
// lock_kind::shedlock: ShedLock's `shedlock` table (net.javacrumbs.shedlock) and its
// database-time statements verbatim but for the parameter numbering (research/zookeeper-sql.md
// §2b, PostgresSqlServerTimeStatementsSource):
//   CREATE TABLE shedlock(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL,
//       locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name));
//   acquire  INSERT ... ON CONFLICT (name) DO UPDATE ... WHERE shedlock.lock_until <= now
//   extend   UPDATE ... SET lock_until = now + lease WHERE name AND locked_by AND lock_until > now
//   release  UPDATE ... SET lock_until = greatest(now, locked_at + lockAtLeastFor(0))
//            WHERE name AND locked_by                       -- rows are never deleted
// with now = timezone('utc', CURRENT_TIMESTAMP). A Java service must use ShedLock's
// usingDbTime() (or UTC with synchronised clocks). locked_by is "<hostname>/<uuid>" per
// acquisition (ShedLock's own is the bare hostname), so a dlock holder and a Java node on one
// host never extend or release each other's lock. Names are at most 64 characters. No fencing
// token. Waiting polls (ShedLock itself never waits): at most every 250 ms, bounded by the
// holder's lock_until.
//
// lock_kind::lease: dlock's own table (§2c), with a fencing token from the sequence
// dlock_fence taken in the same statement as the row, and LISTEN/NOTIFY wake-ups:
//   CREATE TABLE dlock_lease(name text PRIMARY KEY, owner text NOT NULL, token bigint NOT NULL,
//       expires_at timestamptz NOT NULL, acquired_at timestamptz NOT NULL)
//   acquire  INSERT ... VALUES (.., nextval('dlock_fence'), now() + lease, now())
//            ON CONFLICT (name) DO UPDATE ... WHERE dlock_lease.expires_at <= now() RETURNING token
//   extend   UPDATE ... SET expires_at = now() + lease WHERE name AND token AND expires_at > now()
//   release  DELETE ... WHERE name AND token, with pg_notify('dlock_lease', name) in the same
//            transaction (delivered on commit)
// Waiters LISTEN dlock_lease on one session per client (set up before their first attempt, so
// no release between an attempt and the wait is missed) and sleep until a notification for
// their name or the holder's expires_at, whichever comes first: no polling.
//
// lock_kind::versioned: cirello.io/pglock's table (its schema.sql; default name `locks`,
// dlock_versioned_table=NAME), a lease with no clock in the table. The row's
// record_version_number (from the sequence <table>_rvn) is replaced by every heartbeat of the
// holder; NULL or no row = free. A waiter that has seen one version unchanged for a whole lease
// on its own steady clock takes the row over (pglock's rule); all parties must use the same
// lease (pglock's default 20 s, heartbeat every lease / 3):
//   CREATE TABLE locks (name CHARACTER VARYING(255) PRIMARY KEY, record_version_number BIGINT,
//       data BYTEA, owner CHARACTER VARYING(255));
//   CREATE SEQUENCE locks_rvn CYCLE OWNED BY locks.record_version_number;
//   acquire  INSERT ... VALUES ($1, NULL, NULL, $owner) ON CONFLICT (name) DO NOTHING;
//            UPDATE ... SET record_version_number = nextval('locks_rvn'), owner = $owner
//            WHERE name = $1 AND (record_version_number IS NULL OR record_version_number =
//            $seen) RETURNING record_version_number          -- one transaction
//   extend   UPDATE ... SET record_version_number = nextval(..) WHERE name AND version = ours
//   release  DELETE ... WHERE name AND version = ours, with pg_notify('dlock_lease', name)
// The fencing token is the version drawn at acquisition (under the row lock, so strictly
// increasing across holders; the heartbeats' later versions are larger still). The statements
// differ from pglock's (which draws the version before its upsert) but read and write the
// row with the same meaning, so the two exclude each other; that is read from pglock's source,
// not tested against pglock itself (no Go toolchain here). Waiters wake on dlock's
// notifications and look again at least every second (a pglock holder's release notifies no
// one). What it cannot guarantee: clock rates are assumed equal and the lease the same
// everywhere; a holder paused past its lease is taken over without knowing it until its next
// heartbeat; a crashed holder's row is taken over only after a full lease.
//
// lock_kind::semaphore: dlock's own table, one lease row per permit (docs/design/semaphore.md):
//   CREATE TABLE dlock_semaphore(name text, slot int, owner text, token bigint, expires_at
//       timestamptz, acquired_at timestamptz, permits int, PRIMARY KEY (name, slot))
//   acquire  one statement: the lowest slot of 0 .. N-1 without a live row, INSERT ... ON
//            CONFLICT (name, slot) DO UPDATE ... WHERE expires_at <= now() RETURNING slot,
//            token; it also answers whether any slot was free (else: full) and the earliest
//            expiry of slots 0 .. N-1 (semaphore.cpp)
//   extend   UPDATE ... WHERE name AND slot AND token AND expires_at > now()
//   release  UPDATE ... SET expires_at = now() WHERE name AND slot AND token, with
//            pg_notify('dlock_lease', name) in the same statement
// Waiters listen as the lease kind's do and wake at the earliest expiry of their slots.
//
// All: the table (and sequence) is created when missing (errc::permission_denied when the
// role may not). The lease is the watchdog's 30 s (extended every 10 s; dlock_lease=MS) or
// acquire_options::lease (fixed, not extended); valid_until = the send time of the last
// successful acquire or extend + lease - drift_for(lease) (core/drift.hpp: lease / 100 + 2 ms); a
// hold that reaches it without a successful extend is lost. What they cannot guarantee: the
// database wall clock decides expiry (a forward step shortens every lease); a row lost by an
// asynchronous failover means two holders; no loss is noticed faster than the extend period.
#pragma once

#include "postgres/advisory.hpp"

namespace dlock::detail::pg {

/// The watchdog lease of the row kinds (ShedLock's usual lockAtMostFor is 30 s too).
inline constexpr std::chrono::milliseconds table_watchdog_lease{30000};

/// The versioned kind's lease when acquire_options::lease is not set: pglock's default
/// leaseDuration (every party to one lock must use the same; it is stored nowhere).
inline constexpr std::chrono::milliseconds versioned_default_lease{20000};

/// True for lock_kind::shedlock, lock_kind::lease, lock_kind::versioned and
/// lock_kind::semaphore.
bool row_kind(lock_kind kind) noexcept;

/// I/O thread, as acquire_advisory() (advisory.hpp).
void acquire_row(const std::shared_ptr<engine>& e, lock_kind kind, std::string name,
                 const acquire_options& opts, acquire_handler done);
void inspect_row(const std::shared_ptr<engine>& e, lock_kind kind, std::string name,
                 std::function<void(std::error_code, lock_status)> done);
/// ShedLock: ends the lease now (lock_until = now; the row stays, as ShedLock requires).
/// Lease: deletes the row and notifies its waiters. Semaphore: expires every permit's row and
/// notifies.
void force_unlock_row(const std::shared_ptr<engine>& e, lock_kind kind, std::string name,
                      std::function<void(std::error_code, bool)> done);
void list_rows(const std::shared_ptr<engine>& e, lock_kind kind, std::string pattern,
               std::function<void(std::error_code, std::vector<lock_status>)> done);

} // namespace dlock::detail::pg
