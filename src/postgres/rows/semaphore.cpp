// The semaphore row kind's statements (rows.hpp) and its inspect and list: dlock's own table
// dlock_semaphore, one lease row per permit (slot 0 .. N-1 of a name), each with its fencing
// token from the sequence dlock_fence; releases notified on lease_channel
// (docs/design/semaphore.md, "PostgreSQL").
#include "core/glob.hpp"
#include "postgres/rows/sql.hpp"

#include <algorithm>

namespace dlock::detail::pg {
namespace {

using std::chrono::milliseconds;

// --- dlock_semaphore ($1 name, $2 seconds, $3 owner, $4 permits; slot and token by id) -------

std::string sm_table(const settings&) {
    return "dlock_semaphore";
}
std::string sm_ddl(const settings&) {
    return "DO $$BEGIN " +
           create_missing("dlock_semaphore",
                          "CREATE TABLE IF NOT EXISTS dlock_semaphore(name text NOT NULL, slot int "
                          "NOT NULL, owner text NOT NULL, token bigint NOT NULL, expires_at "
                          "timestamptz NOT NULL, acquired_at timestamptz NOT NULL, permits int NOT "
                          "NULL, PRIMARY KEY (name, slot))") +
           " " + create_missing("dlock_fence", "CREATE SEQUENCE IF NOT EXISTS dlock_fence") +
           " END$$";
}

/// One row: [0] the slot granted, [1] its token (both NULL: none), [2] the slot this attempt
/// tried (NULL: none of 0 .. N-1 was free, the semaphore is full), [3] the live permits of
/// the name (any slot), [4] the milliseconds until the first of slots 0 .. N-1 expires.
///
/// The lowest free slot is 0 or one past a live slot (no generate_series: a large N would
/// build N rows). Two attempts that picked one slot: the second's DO UPDATE sees the first's
/// fresh row (ON CONFLICT reads the latest version under the row lock) and changes nothing,
/// so it gets no row and tries again (a lost race, told from "full" by [2]). The token of a
/// takeover is drawn in DO UPDATE under the row lock; the VALUES one serves a slot's first row
/// only (rows are never deleted), as ls_acquire.
statement sm_acquire(const settings&, const std::string& name, const std::string& owner,
                     milliseconds lease, const std::optional<std::string>&, unsigned permits) {
    return {"WITH live AS (SELECT slot, expires_at FROM dlock_semaphore WHERE name = $1 AND "
            "expires_at > now()), pick AS (SELECT min(c) AS slot FROM (SELECT 0::bigint AS c "
            "UNION ALL SELECT slot::bigint + 1 FROM live) f WHERE c < $4::bigint AND NOT EXISTS "
            "(SELECT 1 FROM live WHERE live.slot = f.c)), got AS (INSERT INTO "
            "dlock_semaphore(name, slot, owner, token, expires_at, acquired_at, permits) SELECT "
            "$1, slot::int, $3, nextval('dlock_fence'), now() + make_interval(secs => $2), now(), "
            "$4::int FROM pick WHERE slot IS NOT NULL ON CONFLICT (name, slot) DO UPDATE SET "
            "owner = EXCLUDED.owner, token = nextval('dlock_fence'), expires_at = "
            "EXCLUDED.expires_at, acquired_at = EXCLUDED.acquired_at, permits = EXCLUDED.permits "
            "WHERE dlock_semaphore.expires_at <= now() RETURNING slot, token) SELECT (SELECT slot "
            "FROM got), (SELECT token FROM got), (SELECT slot FROM pick), (SELECT count(*) FROM "
            "live), (SELECT " +
                left_ms("min(expires_at)", "now()") + " FROM live WHERE slot < $4::bigint)",
            {name, seconds_text(lease), owner, std::to_string(permits)}};
}

/// "<slot>:<token>" (row_hold::id()) as two parameters.
std::pair<std::string, std::string> slot_and_token(const std::string& id) {
    const auto colon = id.find(':');
    if (colon == std::string::npos) return {"-1", id};
    return {id.substr(0, colon), id.substr(colon + 1)};
}

statement sm_extend(const settings&, const std::string& name, const std::string& id,
                    milliseconds lease) {
    auto [slot, token] = slot_and_token(id);
    return {"UPDATE dlock_semaphore SET expires_at = now() + make_interval(secs => $2) WHERE name "
            "= $1 AND slot = $3::int AND token = $4::bigint AND expires_at > now()",
            {name, seconds_text(lease), std::move(slot), std::move(token)}};
}
statement sm_release(const settings&, const std::string& name, const std::string& id) {
    // The row stays, expired (see sm_acquire); the waiters of the name are told at commit.
    auto [slot, token] = slot_and_token(id);
    return {"WITH d AS (UPDATE dlock_semaphore SET expires_at = LEAST(expires_at, now()) WHERE "
            "name = $1 AND slot = $2::int AND token = $3::bigint RETURNING name) SELECT "
            "pg_notify('" +
                lease_channel + "', name) FROM d",
            {name, std::move(slot), std::move(token)}};
}
/// Columns: slot, owner, milliseconds left, token, permits asked for; live permits only.
statement sm_inspect(const settings&, const std::string& name) {
    return {"SELECT slot, owner, " + left_ms("expires_at", "now()") +
                ", token, permits FROM dlock_semaphore WHERE name = $1 AND expires_at > now() "
                "ORDER BY slot",
            {name}};
}
/// Columns: name, then sm_inspect's.
statement sm_list(const settings&) {
    return {"SELECT name, slot, owner, " + left_ms("expires_at", "now()") +
            ", token, permits FROM dlock_semaphore WHERE expires_at > now() ORDER BY name, slot"};
}
/// Every live permit of the name ends (each holder's next extend finds its row expired).
statement sm_force(const settings&, const std::string& name) {
    return {"WITH d AS (UPDATE dlock_semaphore SET expires_at = now() WHERE name = $1 AND "
            "expires_at > now() RETURNING name) SELECT pg_notify('" +
                lease_channel + "', name) FROM d",
            {name}};
}

/// Adds the permit of row `i` of `r` (columns from `c`: slot, owner, left, token, permits).
void add_permit(lock_status& st, const result& r, int i, int c, std::int64_t& least,
                std::int64_t& most) {
    lock_contender p;
    p.owner = std::string(r.value(i, c + 1));
    p.entry = "slot " + std::string(r.value(i, c));
    p.holds = true;
    p.hold_count = 1;
    p.remaining = milliseconds(r.int_value(i, c + 2).value_or(0));
    if (auto t = r.int_value(i, c + 3)) p.token = static_cast<std::uint64_t>(*t);
    const auto n = r.int_value(i, c + 4).value_or(0);
    least = st.contenders.empty() ? n : std::min(least, n);
    most = std::max(most, n);
    st.contenders.push_back(std::move(p));
    st.exists = true;
}

/// The one line and details["permits"]: the largest N the live holders asked for (every
/// acquisition names N; clients that disagree admit up to the largest N holders).
void sum_up(lock_status& st, std::int64_t least, std::int64_t most) {
    if (st.contenders.empty()) return;
    st.details["permits"] = std::to_string(most);
    st.detail =
        std::to_string(st.contenders.size()) + " of " + std::to_string(most) + " permit(s) in use";
    if (least != most)
        st.detail += "; holders asked for " + std::to_string(least) + " to " +
                     std::to_string(most) + " permits";
}

lock_status empty_status(std::string name) {
    lock_status st;
    st.name = std::move(name);
    st.kind = "semaphore";
    return st;
}

} // namespace

const row_sql semaphore_sql{
    lock_kind::semaphore, "semaphore", 4096,      true,       false,      sm_table, sm_ddl,
    sm_acquire,           nullptr,     sm_extend, sm_release, sm_inspect, sm_list,  sm_force};

void inspect_semaphore(const std::shared_ptr<engine>& e, std::string name,
                       std::function<void(std::error_code, lock_status)> done) {
    std::vector<statement> q{sm_inspect(e->config(), name),
                             {"SELECT pg_sequence_last_value(to_regclass('dlock_fence'))"}};
    e->query(std::move(q), [name, done](std::error_code ec, std::vector<result>& r) {
        auto st = empty_status(name);
        if (auto out = table_outcome(ec, r)) return done(*out, st);
        std::int64_t least = 0;
        std::int64_t most = 0;
        for (int i = 0; i < r[0].rows(); ++i)
            add_permit(st, r[0], i, 0, least, most);
        sum_up(st, least, most);
        if (r.size() > 1 && r[1].ok() && !r[1].is_null(0, 0))
            st.fencing_counter = static_cast<std::uint64_t>(r[1].int_value(0, 0).value_or(0));
        done({}, std::move(st));
    });
}

void list_semaphores(const std::shared_ptr<engine>& e, std::string pattern,
                     std::function<void(std::error_code, std::vector<lock_status>)> done) {
    e->query({sm_list(e->config())}, [pattern, done](std::error_code ec, std::vector<result>& r) {
        std::vector<lock_status> out;
        if (auto o = table_outcome(ec, r)) return done(*o, out);
        std::int64_t least = 0;
        std::int64_t most = 0;
        for (int i = 0; i < r[0].rows(); ++i) {
            std::string name(r[0].value(i, 0));
            if (!glob_match(pattern, name)) continue;
            if (out.empty() || out.back().name != name) {
                if (!out.empty()) sum_up(out.back(), least, most);
                out.push_back(empty_status(std::move(name)));
                least = most = 0;
            }
            add_permit(out.back(), r[0], i, 1, least, most);
        }
        if (!out.empty()) sum_up(out.back(), least, most);
        done({}, std::move(out));
    });
}

} // namespace dlock::detail::pg
