// ShedLock-compatible lease rows (lock_kind::shedlock): the `shedlock` table of the Java
// library net.javacrumbs.shedlock and its database-time statements, verbatim but for the
// parameter numbering (research/zookeeper-sql.md §2b, PostgresSqlServerTimeStatementsSource):
//
//   CREATE TABLE shedlock(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL,
//       locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name));
//   acquire  INSERT ... ON CONFLICT (name) DO UPDATE ... WHERE shedlock.lock_until <= now
//   extend   UPDATE ... SET lock_until = now + lease WHERE name AND locked_by AND lock_until > now
//   release  UPDATE ... SET lock_until = greatest(now, locked_at + lockAtLeastFor(0))
//            WHERE name AND locked_by                       -- rows are never deleted
// where now = timezone('utc', CURRENT_TIMESTAMP), the database's clock in UTC. A Java service
// must use ShedLock's usingDbTime() (or UTC with synchronised clocks), or the two sides
// disagree by the JVM's zone offset.
//
// locked_by is "<hostname>/<uuid>" per acquisition (ShedLock's own is the bare hostname), so a
// dlock holder and a Java node on the same host never extend or release each other's lock.
// The table is created when missing (a DO block; errc::permission_denied when the role may
// not). Names are at most 64 characters (the column), else errc::invalid_argument.
//
// No fencing token (the table has no counter: token() is empty, as in Redlock mode). Waiting
// polls (ShedLock itself never waits): after a refusal the attempt sleeps min(the holder's
// remaining lock_until, 250 ms, the caller's wait left). The lease is the watchdog's 30 s
// (extended every 10 s) or acquire_options::lease (fixed, not extended); valid_until = the send
// time of the last successful acquire or extend + lease - (lease / 100 + 2 ms); a hold that
// reaches it without a successful extend is lost. A forward step of the database clock
// shortens every lease; rows lost by an asynchronous failover mean two holders.
#pragma once

#include "postgres/advisory.hpp"

namespace dlock::detail::pg {

/// The watchdog lease of lease-table kinds (ShedLock's usual lockAtMostFor is 30 s too).
inline constexpr std::chrono::milliseconds table_watchdog_lease{30000};

void acquire_shedlock(const std::shared_ptr<engine>& e, std::string name,
                      const acquire_options& opts, acquire_handler done);
void inspect_shedlock(const std::shared_ptr<engine>& e, std::string name,
                      std::function<void(std::error_code, lock_status)> done);
/// Ends the lease now (lock_until = now; the row stays, as ShedLock requires).
void force_unlock_shedlock(const std::shared_ptr<engine>& e, std::string name,
                           std::function<void(std::error_code, bool)> done);
void list_shedlock(const std::shared_ptr<engine>& e, std::string pattern,
                   std::function<void(std::error_code, std::vector<lock_status>)> done);

} // namespace dlock::detail::pg
