// The lease row kind's statements (rows.hpp): dlock's own dlock_lease table, its fencing token
// from the sequence dlock_fence, releases notified on lease_channel.
#include "postgres/rows/sql.hpp"

namespace dlock::detail::pg {
namespace {

using std::chrono::milliseconds;

// --- dlock_lease (research §2c; $1 name, $2 seconds or token, $3 owner or token) -------------

std::string ls_table(const settings&) {
    return "dlock_lease";
}
std::string ls_ddl(const settings&) {
    return "DO $$BEGIN " +
           create_missing("dlock_lease",
                          "CREATE TABLE IF NOT EXISTS dlock_lease(name text PRIMARY KEY, owner "
                          "text NOT NULL, token bigint NOT NULL, expires_at timestamptz NOT NULL, "
                          "acquired_at timestamptz NOT NULL)") +
           " " + create_missing("dlock_fence", "CREATE SEQUENCE IF NOT EXISTS dlock_fence") +
           " END$$";
}
statement ls_acquire(const settings&, const std::string& name, const std::string& owner,
                     milliseconds lease, const std::optional<std::string>&, unsigned) {
    // The token of a takeover is drawn in DO UPDATE, under the row lock, after the previous
    // holder's last change committed; the VALUES one is drawn before the conflict check and
    // serves only a name's first row. Rows are never deleted (release and force expire them),
    // so no acquisition after the first can insert a token drawn before a later one's grant.
    return {"INSERT INTO dlock_lease(name, owner, token, expires_at, acquired_at) VALUES ($1, $3, "
            "nextval('dlock_fence'), now() + make_interval(secs => $2), now()) ON CONFLICT "
            "(name) DO UPDATE SET owner = EXCLUDED.owner, token = nextval('dlock_fence'), "
            "expires_at = EXCLUDED.expires_at, acquired_at = EXCLUDED.acquired_at WHERE "
            "dlock_lease.expires_at <= now() RETURNING token",
            {name, seconds_text(lease), owner}};
}
statement ls_remaining(const settings&, const std::string& name) {
    return {"SELECT " + left_ms("expires_at", "now()") + " FROM dlock_lease WHERE name = $1",
            {name}};
}
statement ls_extend(const settings&, const std::string& name, const std::string& id,
                    milliseconds lease) {
    return {"UPDATE dlock_lease SET expires_at = now() + make_interval(secs => $2) WHERE name = "
            "$1 AND token = $3::bigint AND expires_at > now()",
            {name, seconds_text(lease), id}};
}
statement ls_release(const settings&, const std::string& name, const std::string& id) {
    // The row stays, expired (see ls_acquire).
    return {"WITH d AS (UPDATE dlock_lease SET expires_at = LEAST(expires_at, now()) WHERE name "
            "= $1 AND token = $2::bigint RETURNING name) SELECT pg_notify('" +
                lease_channel + "', name) FROM d",
            {name, id}};
}
statement ls_inspect(const settings&, const std::string& name) {
    return {"SELECT owner, " + left_ms("expires_at", "now()") +
                ", 'acquired_at ' || acquired_at || ', expires_at ' || expires_at, token FROM "
                "dlock_lease WHERE name = $1",
            {name}};
}
statement ls_list(const settings&) {
    return {"SELECT name, owner, " + left_ms("expires_at", "now()") +
            " FROM dlock_lease WHERE expires_at > now() ORDER BY name"};
}
statement ls_force(const settings&, const std::string& name) {
    return {"WITH d AS (UPDATE dlock_lease SET expires_at = now() WHERE name = $1 AND "
            "expires_at > now() RETURNING name) SELECT pg_notify('" +
                lease_channel + "', name) FROM d",
            {name}};
}

} // namespace

const row_sql lease_sql{lock_kind::lease, "lease",    4096,       true,         false,
                        ls_table,         ls_ddl,     ls_acquire, ls_remaining, ls_extend,
                        ls_release,       ls_inspect, ls_list,    ls_force};

} // namespace dlock::detail::pg
