// The shedlock row kind's statements (rows.hpp): ShedLock's table and its database-time
// statements.
#include "postgres/rows/sql.hpp"

namespace dlock::detail::pg {
namespace {

using std::chrono::milliseconds;

const std::string utc_now = "timezone('utc', CURRENT_TIMESTAMP)";

// --- ShedLock (PostgresSqlServerTimeStatementsSource: :name = $1, :lockAtMostForInterval /
// :lockAtLeastForInterval = $2, :lockedBy = $3) -------------------------------------------------

std::string sl_table(const settings& s) {
    return s.shedlock_table;
}
std::string sl_ddl(const settings& s) {
    const auto& t = s.shedlock_table;
    return "DO $$BEGIN " +
           create_missing(t, "CREATE TABLE IF NOT EXISTS " + t +
                                 "(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, "
                                 "locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, "
                                 "PRIMARY KEY (name))") +
           " END$$";
}
statement sl_acquire(const settings& s, const std::string& name, const std::string& owner,
                     milliseconds lease, const std::optional<std::string>&, unsigned) {
    const auto& t = s.shedlock_table;
    return {"INSERT INTO " + t + "(name, lock_until, locked_at, locked_by) VALUES($1, " + utc_now +
                " + make_interval(secs => $2), " + utc_now +
                ", $3) ON CONFLICT (name) DO UPDATE SET lock_until = " + utc_now +
                " + make_interval(secs => $2), locked_at = " + utc_now + ", locked_by = $3 WHERE " +
                t + ".name = $1 AND " + t + ".lock_until <= " + utc_now,
            {name, seconds_text(lease), owner}};
}
statement sl_remaining(const settings& s, const std::string& name) {
    return {"SELECT " + left_ms("lock_until", utc_now) + " FROM " + s.shedlock_table +
                " WHERE name = $1",
            {name}};
}
statement sl_extend(const settings& s, const std::string& name, const std::string& id,
                    milliseconds lease) {
    return {"UPDATE " + s.shedlock_table + " SET lock_until = " + utc_now +
                " + make_interval(secs => $2) WHERE name = $1 AND locked_by = $3 AND lock_until "
                "> " +
                utc_now,
            {name, seconds_text(lease), id}};
}
statement sl_release(const settings& s, const std::string& name, const std::string& id) {
    return {"UPDATE " + s.shedlock_table +
                " SET lock_until = CASE WHEN locked_at + make_interval(secs => $2) > " + utc_now +
                " THEN locked_at + make_interval(secs => $2) ELSE " + utc_now +
                " END WHERE name = $1 AND locked_by = $3",
            {name, seconds_text(milliseconds(0)), id}};
}
statement sl_inspect(const settings& s, const std::string& name) {
    return {"SELECT locked_by, " + left_ms("lock_until", utc_now) +
                ", 'locked_at ' || locked_at || ' UTC, lock_until ' || lock_until || ' UTC (row "
                "kept)', NULL FROM " +
                s.shedlock_table + " WHERE name = $1",
            {name}};
}
statement sl_list(const settings& s) {
    return {"SELECT name, locked_by, " + left_ms("lock_until", utc_now) + " FROM " +
            s.shedlock_table + " WHERE lock_until > " + utc_now + " ORDER BY name"};
}
statement sl_force(const settings& s, const std::string& name) {
    return {"UPDATE " + s.shedlock_table + " SET lock_until = " + utc_now +
                " WHERE name = $1 AND lock_until > " + utc_now,
            {name}};
}

} // namespace

const row_sql shedlock_sql{
    lock_kind::shedlock, "shedlock",   64,        false,      false,      sl_table, sl_ddl,
    sl_acquire,          sl_remaining, sl_extend, sl_release, sl_inspect, sl_list,  sl_force};

} // namespace dlock::detail::pg
