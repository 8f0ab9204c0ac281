// PostgreSQL advisory locks seen from pg_locks: inspect_advisory, force_unlock_advisory
// (pg_terminate_backend) and list_advisory.
#include "postgres/advisory.hpp"
#include "postgres/advisory_impl.hpp"
#include "postgres/advisory_sessions.hpp"

#include <map>
#include <tuple>

namespace dlock::detail::pg {
namespace {

/// Rows: pid, granted, mode, application_name, client_addr.
std::string contenders_sql(const std::string& key_sql, const advisory_key& k) {
    return "SELECT l.pid, l.granted, l.mode, a.application_name, host(a.client_addr)" +
           locks_sql_tail + " AND " + key_matches(key_sql, k) +
           " AND l.pid <> pg_backend_pid() ORDER BY l.granted DESC, l.waitstart NULLS FIRST, "
           "l.pid";
}

lock_contender contender_of(const result& r, int row, std::uint64_t& waiters) {
    lock_contender c;
    const std::string pid(r.value(row, 0));
    c.holds = r.bool_value(row, 1);
    c.entry = "pid " + pid + " (" + std::string(r.value(row, 2)) + ")";
    c.session = pid;
    c.owner = std::string(r.value(row, 3));
    if (!r.is_null(row, 4))
        c.owner += (c.owner.empty() ? "" : " from ") + std::string(r.value(row, 4));
    if (c.owner.empty()) c.owner = "pid " + pid;
    if (!c.holds) c.position = waiters++;
    return c;
}

} // namespace

void inspect_advisory(const std::shared_ptr<engine>& e, std::string name, lock_kind kind,
                      std::function<void(std::error_code, lock_status)> done) {
    std::error_code ec;
    const auto key = make_key(name, e->config().key, ec);
    lock_status st;
    st.name = name;
    st.kind = advisory_kind_name(kind);
    if (ec) return done(ec, st);
    auto [expr, param] = key_expr(key);
    std::vector<statement> q;
    q.push_back({contenders_sql(expr, key), {param}});
    q.push_back({"SELECT " + expr, {param}});
    q.push_back({"SELECT pg_sequence_last_value(to_regclass('dlock_fence'))"});
    e->query(std::move(q), [st, key, done](std::error_code ec2, std::vector<result>& r) mutable {
        if (ec2) return done(ec2, st);
        if (r.empty() || !r[0].ok())
            return done(make_error_code(r.empty() ? errc::unavailable : error_of(r[0])), st);
        std::uint64_t waiters = 0;
        for (int i = 0; i < r[0].rows(); ++i)
            st.contenders.push_back(contender_of(r[0], i, waiters));
        st.exists = !st.contenders.empty();
        auto k = key;
        if (k.server_hash && r.size() > 1 && r[1].ok()) {
            k.server_hash = false;
            k.value = r[1].int_value(0, 0).value_or(0);
        }
        st.detail = "advisory key " + k.describe();
        if (r.size() > 2 && r[2].ok() && !r[2].is_null(0, 0))
            st.fencing_counter = static_cast<std::uint64_t>(r[2].int_value(0, 0).value_or(0));
        done({}, st);
    });
}

void force_unlock_advisory(const std::shared_ptr<engine>& e, std::string name,
                           std::function<void(std::error_code, bool)> done) {
    std::error_code ec;
    const auto key = make_key(name, e->config().key, ec);
    if (ec) return done(ec, false);
    auto [expr, param] = key_expr(key);
    const std::string sql = "SELECT count(*) FILTER (WHERE pg_terminate_backend(l.pid))" +
                            locks_sql_tail + " AND l.granted AND " + key_matches(expr, key) +
                            " AND l.pid <> pg_backend_pid()";
    e->query({{sql, {param}}}, [e, name, done](std::error_code ec2, std::vector<result>& r) {
        if (ec2) return done(ec2, false);
        if (r.empty() || !r[0].ok()) {
            if (!r.empty())
                e->set_error(e->config().display + ": unlock --force \"" + name +
                             "\": " + r[0].message());
            return done(make_error_code(r.empty() ? errc::unavailable : error_of(r[0])), false);
        }
        done({}, r[0].int_value(0, 0).value_or(0) > 0);
    });
}

void list_advisory(const std::shared_ptr<engine>& e, std::string pattern,
                   std::function<void(std::error_code, std::vector<lock_status>)> done) {
    const std::string sql = "SELECT l.pid, l.granted, l.mode, a.application_name, "
                            "host(a.client_addr), l.classid::bigint, l.objid::bigint, l.objsubid" +
                            locks_sql_tail +
                            " AND l.pid <> pg_backend_pid() ORDER BY l.classid, l.objid, "
                            "l.objsubid, l.granted DESC, l.waitstart NULLS FIRST, l.pid";
    e->query({{sql}}, [e, pattern, done](std::error_code ec, std::vector<result>& r) {
        std::vector<lock_status> out;
        if (ec) return done(ec, out);
        if (r.empty() || !r[0].ok())
            return done(make_error_code(r.empty() ? errc::unavailable : error_of(r[0])), out);
        const auto& rows = r[0];
        // A session holding several keys is named "dlock<count>": its keys are listed by name
        // when this client holds them, else by key.
        std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::string> known;
        for (const auto& s : e->holding)
            s->names(known);
        std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, lock_status> by_key;
        std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::uint64_t> waiters;
        for (int i = 0; i < rows.rows(); ++i) {
            const auto k =
                std::make_tuple(rows.int_value(i, 5).value_or(0), rows.int_value(i, 6).value_or(0),
                                rows.int_value(i, 7).value_or(0));
            auto& st = by_key[k];
            const std::string app(rows.value(i, 3));
            if (st.name.empty() || st.name.substr(0, 4) == "key ") {
                if (app.substr(0, app_prefix.size()) == app_prefix) {
                    st.name = app.substr(app_prefix.size());
                } else if (auto n = known.find(k); n != known.end()) {
                    st.name = n->second;
                } else {
                    advisory_key key;
                    key.pair = std::get<2>(k) == 2;
                    key.value = static_cast<std::int64_t>(
                        (static_cast<std::uint64_t>(std::get<0>(k)) << 32) |
                        static_cast<std::uint64_t>(std::get<1>(k)));
                    st.name = "key " + key.describe();
                }
            }
            // The first row is the holder when there is one (a waiter may want the other mode).
            if (st.contenders.empty()) st.kind = rows.value(i, 2) == "ShareLock" ? "read" : "lock";
            st.exists = true;
            st.contenders.push_back(contender_of(rows, i, waiters[k]));
        }
        for (auto& [k, st] : by_key)
            if (glob_match(pattern, st.name)) out.push_back(std::move(st));
        done({}, std::move(out));
    });
}

} // namespace dlock::detail::pg
