// The versioned row kind's statements (rows.hpp): cirello.io/pglock's table, a lease with no
// clock in the table (a version number that the holder's heartbeat replaces).
#include "postgres/rows/sql.hpp"

namespace dlock::detail::pg {
namespace {

using std::chrono::milliseconds;

// --- versioned: cirello.io/pglock's table (research §2b; see rows.hpp) ------------------------

std::string vs_table(const settings& s) {
    return s.versioned_table;
}
std::string vs_ddl(const settings& s) {
    // pglock's schema.sql, each object created when missing.
    const auto& t = s.versioned_table;
    return "DO $$BEGIN " +
           create_missing(t, "CREATE TABLE IF NOT EXISTS " + t +
                                 " (name CHARACTER VARYING(255) PRIMARY KEY, "
                                 "record_version_number BIGINT, data BYTEA, owner CHARACTER "
                                 "VARYING(255))") +
           " " +
           create_missing(t + "_rvn", "CREATE SEQUENCE IF NOT EXISTS " + t +
                                          "_rvn CYCLE OWNED BY " + t + ".record_version_number") +
           " END$$";
}
statement vs_ensure_row(const settings& s, const std::string& name, const std::string& owner) {
    // A free row (NULL version, as pglock's KeepOnRelease leaves it) when there is none.
    return {"INSERT INTO " + s.versioned_table +
                " (name, record_version_number, data, owner) VALUES ($1, NULL, NULL, $2) ON "
                "CONFLICT (name) DO NOTHING",
            {name, owner}};
}
statement vs_acquire(const settings& s, const std::string& name, const std::string& owner,
                     milliseconds, const std::optional<std::string>& observed, unsigned) {
    // The new version is drawn while the row is locked, so it is larger than every version
    // drawn before the previous holder's last change: strictly increasing per acquisition.
    const auto& t = s.versioned_table;
    return {"UPDATE " + t + " SET record_version_number = nextval('" + t +
                "_rvn'), owner = $2 WHERE name = $1 AND (record_version_number IS NULL OR "
                "record_version_number = $3::bigint) RETURNING record_version_number",
            {name, owner, observed}};
}
statement vs_remaining(const settings& s, const std::string& name) {
    return {"SELECT record_version_number FROM " + s.versioned_table + " WHERE name = $1", {name}};
}
statement vs_extend(const settings& s, const std::string& name, const std::string& id,
                    milliseconds) {
    // pglock's heartbeat: a new version, only while the row still has ours.
    const auto& t = s.versioned_table;
    return {"UPDATE " + t + " SET record_version_number = nextval('" + t +
                "_rvn') WHERE name = $1 AND record_version_number = $2::bigint RETURNING "
                "record_version_number",
            {name, id}};
}
statement vs_release(const settings& s, const std::string& name, const std::string& id) {
    return {"WITH d AS (DELETE FROM " + s.versioned_table +
                " WHERE name = $1 AND record_version_number = $2::bigint RETURNING name) SELECT "
                "pg_notify('" +
                lease_channel + "', name) FROM d",
            {name, id}};
}
statement vs_inspect(const settings& s, const std::string& name) {
    return {"SELECT owner, CASE WHEN record_version_number IS NULL THEN 0 ELSE 1 END, "
            "'record_version_number ' || record_version_number || ' (no expiry in the table: "
            "a waiter takes over a version unchanged for its lease)', NULL FROM " +
                s.versioned_table + " WHERE name = $1",
            {name}};
}
statement vs_list(const settings& s) {
    return {"SELECT name, owner, 1 FROM " + s.versioned_table +
            " WHERE record_version_number IS NOT NULL ORDER BY name"};
}
statement vs_force(const settings& s, const std::string& name) {
    return {"WITH d AS (DELETE FROM " + s.versioned_table +
                " WHERE name = $1 AND record_version_number IS NOT NULL RETURNING name) SELECT "
                "pg_notify('" +
                lease_channel + "', name) FROM d",
            {name}};
}

} // namespace

const row_sql versioned_sql{
    lock_kind::versioned, "versioned",  255,       true,       true,       vs_table, vs_ddl,
    vs_acquire,           vs_remaining, vs_extend, vs_release, vs_inspect, vs_list,  vs_force,
    vs_ensure_row};

} // namespace dlock::detail::pg
