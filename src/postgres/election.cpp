// Leader election on PostgreSQL: the table, the statements, leader() and proclaim()
// (election.hpp). The campaign is the advisory acquisition (advisory.cpp), the observation
// observe.cpp.
#include "postgres/election.hpp"

#include "postgres/advisory_impl.hpp"
#include "postgres/rows/sql.hpp"

#include <dlock/error.hpp>

namespace dlock::detail::pg {
namespace {

std::string param(std::size_t n) {
    std::string p = "$"; // appended: GCC 12 at -O3 warns falsely on "$" + a temporary string
    p += std::to_string(n);
    return p;
}

} // namespace

const std::string election_ddl =
    "DO $$BEGIN " +
    create_missing("dlock_election",
                   "CREATE TABLE IF NOT EXISTS dlock_election(name text PRIMARY KEY, value bytea "
                   "NOT NULL, epoch bigint NOT NULL, pid integer NOT NULL)") +
    " END$$";

std::string to_hex(std::string_view bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) {
        const auto b = static_cast<unsigned char>(c);
        out += digits[b >> 4];
        out += digits[b & 0xf];
    }
    return out;
}

std::optional<std::string> from_hex(std::string_view text) {
    const auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    if (text.size() % 2 != 0) return std::nullopt;
    std::string out;
    out.reserve(text.size() / 2);
    for (std::size_t i = 0; i < text.size(); i += 2) {
        const int hi = nibble(text[i]), lo = nibble(text[i + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out += static_cast<char>((hi << 4) | lo);
    }
    return out;
}

statement lead_statement(const std::string& name, const std::string& value,
                         const advisory_key* try_key) {
    // The data-modifying CTE runs once; nextval() is evaluated only for a row that passes the
    // try's filter, so a try that finds the lock taken draws no epoch and notifies nobody.
    statement s;
    std::string with = "WITH ";
    std::string from;
    if (try_key) {
        s = key_statement({}, *try_key);
        with += "g AS (SELECT " + key_call("pg_try_advisory_lock", *try_key) + " AS got), ";
        from = " FROM g WHERE g.got";
    }
    const auto n = param(s.params.size() + 1), v = param(s.params.size() + 2);
    s.sql = with + "i AS (INSERT INTO dlock_election AS d (name, value, epoch, pid) SELECT " + n +
            "::text, decode(" + v + ", 'hex'), nextval('dlock_fence'), pg_backend_pid()" + from +
            " ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, epoch = EXCLUDED.epoch, "
            "pid = EXCLUDED.pid RETURNING d.epoch) SELECT i.epoch, pg_notify('" +
            election_channel + "', " + n + "::text) FROM i";
    s.params.push_back(name);
    s.params.push_back(to_hex(value));
    return s;
}

statement proclaim_statement(const std::string& name, const std::string& value,
                             std::uint64_t epoch) {
    return {"WITH u AS (UPDATE dlock_election SET value = decode($2, 'hex') WHERE name = $1 AND "
            "epoch = $3::bigint AND pid = pg_backend_pid() RETURNING 1) SELECT pg_notify('" +
                election_channel + "', $1::text) FROM u",
            {name, to_hex(value), std::to_string(epoch)}};
}

statement resign_statement(const std::string& name, std::uint64_t epoch) {
    return {"DELETE FROM dlock_election WHERE name = $1 AND epoch = $2::bigint",
            {name, std::to_string(epoch)}};
}

void read_leader(const std::shared_ptr<engine>& e, const std::string& name,
                 std::function<void(std::error_code, std::optional<leader_info>)> done) {
    std::error_code ec;
    const auto key = make_key(name, e->config().key, ec);
    if (ec) {
        e->set_error("election name \"" + name + "\" cannot be a " +
                     std::string(to_string(e->config().key)) + " advisory key");
        return done(ec, std::nullopt);
    }
    auto [expr, key_param] = key_expr(key);
    // The row of the session that holds the name's lock: a dead leader's row is no leader.
    const std::string sql =
        "SELECT encode(d.value, 'hex'), d.epoch FROM dlock_election d WHERE d.name = $2 AND "
        "d.pid IN (SELECT l.pid" +
        locks_sql_tail + " AND l.granted AND l.mode = 'ExclusiveLock' AND " +
        key_matches(expr, key) + ")";
    e->query({{sql, {key_param, name}}}, [e, name, done](std::error_code ec2,
                                                         std::vector<result>& r) {
        if (ec2) return done(ec2, std::nullopt);
        if (r.empty()) return done(make_error_code(errc::unavailable), std::nullopt);
        if (!r[0].ok()) {
            // No table yet: nobody ever led.
            if (r[0].sqlstate() == sqlstate::undefined_table) return done({}, std::nullopt);
            e->set_error(e->config().display + ": leader of \"" + name + "\": " + r[0].message());
            return done(make_error_code(error_of(r[0])), std::nullopt);
        }
        if (r[0].rows() == 0) return done({}, std::nullopt);
        auto value = from_hex(r[0].value(0, 0));
        const auto epoch = r[0].int_value(0, 1);
        if (!value || !epoch) return done(make_error_code(errc::protocol_error), std::nullopt);
        done({}, leader_info{std::move(*value), static_cast<std::uint64_t>(*epoch)});
    });
}

void proclaim_leader(hold& leader, std::string value, std::function<void(std::error_code)> done) {
    auto* h = dynamic_cast<advisory_hold*>(&leader);
    if (!h || h->lost() || h->released()) return done(make_error_code(errc::not_owner));
    h->proclaim_io(std::move(value), std::move(done));
}

} // namespace dlock::detail::pg
