// Run once per period on PostgreSQL (dlock/once.hpp, docs/design/once.md): one row per name in
// dlock_once(name, slot, token). The slot is counted inside the statement from
// clock_timestamp(), so the server's clock decides, never the client's. A claim inserts the
// row, or moves it to the current slot when it holds an earlier one, in one INSERT ... ON
// CONFLICT: two claims of one slot are ordered by the row lock and the second changes nothing.
// A release deletes the row only while it still holds this claim's slot and token.
#include "postgres/once.hpp"

#include "postgres/errors.hpp"
#include "postgres/rows/sql.hpp"

#include <utility>
#include <vector>

namespace dlock::detail::pg {
namespace {

const std::string once_ddl =
    "DO $$BEGIN " +
    create_missing("dlock_once", "CREATE TABLE IF NOT EXISTS dlock_once(name text PRIMARY KEY, "
                                 "slot bigint NOT NULL, token text NOT NULL)") +
    " END$$";

// $1 name, $2 period in ms, $3 token. The CTE reads the clock once (it is referenced twice,
// so it is evaluated once); RETURNING gives the slot and the milliseconds left of it.
constexpr const char* claim_sql =
    "WITH t AS (SELECT floor(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint AS ms) "
    "INSERT INTO dlock_once AS o (name, slot, token) SELECT $1, t.ms / $2::bigint, $3 FROM t "
    "ON CONFLICT (name) DO UPDATE SET slot = EXCLUDED.slot, token = EXCLUDED.token "
    "WHERE o.slot < EXCLUDED.slot "
    "RETURNING o.slot, GREATEST(0, (o.slot + 1) * $2::bigint - (SELECT ms FROM t))";

constexpr const char* release_sql =
    "DELETE FROM dlock_once WHERE name = $1 AND slot = $2::bigint AND token = $3";

/// The error of a failed statement, its detail recorded on the engine.
std::error_code failed(engine& e, const result& r, const std::string& name, bool ensured) {
    const auto code = classify_sqlstate(r.sqlstate());
    std::string why = r.message();
    if (ensured && code == errc::permission_denied)
        why = "the table dlock_once is missing and this role may not create it: " + why;
    e.set_error(e.config().display + ": once per period \"" + name + "\": " + why);
    return make_error_code(code);
}

void claim(const std::shared_ptr<engine>& e, std::string name, std::chrono::milliseconds period,
           std::string token, bool ensure,
           std::function<void(std::error_code, std::optional<period_slot>)> done) {
    std::vector<statement> q;
    if (ensure) q.push_back({once_ddl});
    q.push_back({claim_sql, {name, std::to_string(period.count()), token}});
    e->query(std::move(q), [e, name, period, token, ensure, done](std::error_code ec,
                                                                  std::vector<result>& r) mutable {
        if (ec) return done(ec, std::nullopt);
        if (r.empty()) return done(make_error_code(errc::unavailable), std::nullopt);
        const auto& got = r.back();
        if (!got.ok()) {
            // The table is made the first time it is missing, then the claim is sent again.
            if (!ensure && got.sqlstate() == sqlstate::undefined_table)
                return claim(e, std::move(name), period, std::move(token), true, std::move(done));
            return done(failed(*e, ensure && !r.front().ok() ? r.front() : got, name, ensure),
                        std::nullopt);
        }
        if (got.rows() == 0) return done({}, std::nullopt); // this slot is taken
        const auto slot = got.int_value(0, 0), left = got.int_value(0, 1);
        if (!slot || !left) return done(make_error_code(errc::protocol_error), std::nullopt);
        period_slot s;
        s.index = *slot;
        s.period = period;
        s.left = std::chrono::milliseconds(*left);
        s.token = std::move(token);
        done({}, std::move(s));
    });
}

} // namespace

void claim_period_row(const std::shared_ptr<engine>& e, std::string name,
                      std::chrono::milliseconds period, std::string token,
                      std::function<void(std::error_code, std::optional<period_slot>)> done) {
    claim(e, std::move(name), period, std::move(token), false, std::move(done));
}

void release_period_row(const std::shared_ptr<engine>& e, std::string name, const period_slot& s,
                        std::function<void(std::error_code, bool)> done) {
    e->query({{release_sql, {name, std::to_string(s.index), s.token}}},
             [e, name, done](std::error_code ec, std::vector<result>& r) {
                 if (ec) return done(ec, false);
                 if (r.empty()) return done(make_error_code(errc::unavailable), false);
                 if (r[0].ok()) return done({}, r[0].affected() == 1);
                 // No table: no claim was ever made, so there is nothing to give back.
                 if (r[0].sqlstate() == sqlstate::undefined_table) return done({}, false);
                 done(failed(*e, r[0], name, false), false);
             });
}

} // namespace dlock::detail::pg
