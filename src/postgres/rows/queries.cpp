// The lease rows' queries (rows.hpp): inspect_row, force_unlock_row and list_rows, one
// statement of the kind each (a missing table: no lock); the semaphore's inspect and list,
// which show every permit, are in semaphore.cpp.
#include "postgres/errors.hpp"
#include "postgres/rows/sql.hpp"

namespace dlock::detail::pg {

std::optional<std::error_code> table_outcome(std::error_code ec, const std::vector<result>& r) {
    if (ec) return ec;
    if (!r.empty() && r[0].ok()) return std::nullopt;
    if (!r.empty() && r[0].sqlstate() == sqlstate::undefined_table) return std::error_code{};
    return make_error_code(r.empty() ? errc::unavailable : classify_sqlstate(r[0].sqlstate()));
}

namespace {

using std::chrono::milliseconds;

lock_status row_status(const row_sql& k, std::string name, std::string owner, std::int64_t left) {
    lock_status st;
    st.name = std::move(name);
    st.kind = k.name;
    if (left <= 0) return st;
    st.exists = true;
    if (!k.clock_free) st.remaining_lease = milliseconds(left);
    lock_contender c;
    c.owner = std::move(owner);
    c.entry = k.table == nullptr ? std::string() : "row " + st.name;
    c.holds = true;
    st.contenders.push_back(std::move(c));
    return st;
}

} // namespace

void inspect_row(const std::shared_ptr<engine>& e, lock_kind kind, std::string name,
                 std::function<void(std::error_code, lock_status)> done) {
    if (kind == lock_kind::semaphore) return inspect_semaphore(e, std::move(name), std::move(done));
    const auto& k = sql_of(kind);
    std::vector<statement> q{k.inspect(e->config(), name)};
    if (kind == lock_kind::lease)
        q.push_back({"SELECT pg_sequence_last_value(to_regclass('dlock_fence'))"});
    if (kind == lock_kind::versioned)
        q.push_back({"SELECT pg_sequence_last_value(to_regclass($1))",
                     {e->config().versioned_table + "_rvn"}});
    e->query(std::move(q), [&k, name, done](std::error_code ec, std::vector<result>& r) {
        lock_status none;
        none.name = name;
        none.kind = k.name;
        if (auto out = table_outcome(ec, r)) return done(*out, none);
        if (r[0].rows() == 0) return done({}, none);
        auto st =
            row_status(k, name, std::string(r[0].value(0, 0)), r[0].int_value(0, 1).value_or(0));
        st.detail = std::string(r[0].value(0, 2));
        if (auto t = r[0].int_value(0, 3); t && !st.contenders.empty())
            st.contenders[0].token = static_cast<std::uint64_t>(*t);
        if (r.size() > 1 && r[1].ok() && !r[1].is_null(0, 0))
            st.fencing_counter = static_cast<std::uint64_t>(r[1].int_value(0, 0).value_or(0));
        done({}, std::move(st));
    });
}

void force_unlock_row(const std::shared_ptr<engine>& e, lock_kind kind, std::string name,
                      std::function<void(std::error_code, bool)> done) {
    e->query({sql_of(kind).force(e->config(), name)},
             [done](std::error_code ec, std::vector<result>& r) {
                 if (auto out = table_outcome(ec, r)) return done(*out, false);
                 done({}, r[0].affected() > 0);
             });
}

void list_rows(const std::shared_ptr<engine>& e, lock_kind kind, std::string pattern,
               std::function<void(std::error_code, std::vector<lock_status>)> done) {
    if (kind == lock_kind::semaphore)
        return list_semaphores(e, std::move(pattern), std::move(done));
    const auto& k = sql_of(kind);
    e->query({k.list(e->config())}, [&k, pattern, done](std::error_code ec,
                                                        std::vector<result>& r) {
        std::vector<lock_status> out;
        if (auto o = table_outcome(ec, r)) return done(*o, out);
        for (int i = 0; i < r[0].rows(); ++i) {
            std::string name(r[0].value(i, 0));
            if (!glob_match(pattern, name)) continue;
            out.push_back(row_status(k, std::move(name), std::string(r[0].value(i, 1)),
                                     std::max<std::int64_t>(r[0].int_value(i, 2).value_or(0), 1)));
        }
        done({}, std::move(out));
    });
}

} // namespace dlock::detail::pg
