// postgres/rows/sql.hpp: what the lease-row files share (the kinds of rows.hpp): row_sql, the
// statements of one kind; the three kinds' tables; the SQL pieces their statements are made of.
#pragma once

#include "postgres/rows.hpp"

#include <chrono>
#include <optional>
#include <string>

namespace dlock::detail::pg {

inline std::string seconds_text(std::chrono::milliseconds d) {
    // ShedLock sends the intervals as seconds with millisecond precision (BigDecimal).
    const auto ms = d.count();
    std::string frac = std::to_string(ms % 1000);
    frac.insert(0, 3 - frac.size(), '0');
    return std::to_string(ms / 1000) + "." + frac;
}

/// The milliseconds left until `column` (0 when passed), in database time `now`.
inline std::string left_ms(const std::string& column, const std::string& now) {
    return "GREATEST(0, (EXTRACT(EPOCH FROM (" + column + " - " + now + ")) * 1000)::bigint)";
}

/// A PL/pgSQL block that creates `object` with `create` when it is missing. Two sessions
/// creating it at once: the second fails on the catalog's unique index once the first
/// committed; the object exists then, so that error is no error.
inline std::string create_missing(const std::string& object, const std::string& create) {
    return "BEGIN IF to_regclass('" + object + "') IS NULL THEN " + create +
           "; END IF; EXCEPTION WHEN unique_violation OR duplicate_table OR duplicate_object THEN "
           "NULL; END;";
}

/// One row kind's statements. Every builder returns a whole statement with its parameters.
struct row_sql {
    lock_kind kind;
    const char* name;     ///< "shedlock", "lease", "versioned", "semaphore"
    std::size_t max_name; ///< longest lock name the table takes
    bool notify;          ///< releases notify lease_channel; waiters listen
    /// No expiry in the table (versioned): the row holds a version number that the holder's
    /// heartbeat replaces; a waiter takes over a version it has seen unchanged for a lease.
    bool clock_free;
    std::string (*table)(const settings&);
    std::string (*ddl)(const settings&);
    /// The acquisition: one row changed (ShedLock) or one token returned (lease, versioned) =
    /// acquired; the semaphore answers one row of its own (semaphore.cpp). `observed`: the
    /// version a clock-free waiter has seen unchanged for a whole lease (it may take the row
    /// over), nullopt = only a free row. `permits`: the semaphore's N (the others ignore it).
    statement (*acquire)(const settings&, const std::string& name, const std::string& owner,
                         std::chrono::milliseconds lease,
                         const std::optional<std::string>& observed, unsigned permits);
    /// One row, one column: the holder's milliseconds left (clock-free: its version). Null for
    /// the semaphore, whose acquisition answers the earliest expiry itself.
    statement (*remaining)(const settings&, const std::string& name);
    /// `id`: locked_by (ShedLock), the token (lease), the current version (versioned) or
    /// "<slot>:<token>" (semaphore). One row changed = still ours (versioned: it returns the
    /// new version).
    statement (*extend)(const settings&, const std::string& name, const std::string& id,
                        std::chrono::milliseconds lease);
    statement (*release)(const settings&, const std::string& name, const std::string& id);
    /// Columns: owner, milliseconds left, detail text, token (or NULL).
    statement (*inspect)(const settings&, const std::string& name);
    /// Columns: name, owner, milliseconds left; only rows still held.
    statement (*list)(const settings&);
    /// One row changed per lock ended.
    statement (*force)(const settings&, const std::string& name);
    /// Sent before `acquire` in the same transaction when not null (versioned: the row made
    /// when missing, free, so that `acquire` takes its version under the row lock).
    statement (*ensure_row)(const settings&, const std::string& name,
                            const std::string& owner) = nullptr;
};

/// The kinds' statements: shedlock.cpp, lease.cpp, versioned.cpp, semaphore.cpp.
extern const row_sql shedlock_sql;
extern const row_sql lease_sql;
extern const row_sql versioned_sql;
extern const row_sql semaphore_sql;

/// How a query on a row table ended (queries.cpp): nullopt when its first result is rows to
/// read; else the error to report, clear for "no table yet" (then there is no lock).
std::optional<std::error_code> table_outcome(std::error_code ec, const std::vector<result>& r);

/// The semaphore's inspect and list (semaphore.cpp): every live permit of a name as a holder.
void inspect_semaphore(const std::shared_ptr<engine>& e, std::string name,
                       std::function<void(std::error_code, lock_status)> done);
void list_semaphores(const std::shared_ptr<engine>& e, std::string pattern,
                     std::function<void(std::error_code, std::vector<lock_status>)> done);

/// The statements of a row kind (hold.cpp).
const row_sql& sql_of(lock_kind k);

} // namespace dlock::detail::pg
