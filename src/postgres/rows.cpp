#include "postgres/rows.hpp"

#include "core/random.hpp"
#include "postgres/errors.hpp"

#include <asio/steady_timer.hpp>

#include <unistd.h>

namespace dlock::detail::pg {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds max_poll{250}; // longest sleep between two tries without notifications
const std::string utc_now = "timezone('utc', CURRENT_TIMESTAMP)";
const std::string lease_channel = "dlock_lease";

std::string seconds_text(milliseconds d) {
    // ShedLock sends the intervals as seconds with millisecond precision (BigDecimal).
    const auto ms = d.count();
    std::string frac = std::to_string(ms % 1000);
    frac.insert(0, 3 - frac.size(), '0');
    return std::to_string(ms / 1000) + "." + frac;
}

std::string hostname() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
    return buf;
}

milliseconds margin(milliseconds lease) {
    return lease / 100 + milliseconds(2);
}

/// The milliseconds left until `column` (0 when passed), in database time `now`.
std::string left_ms(const std::string& column, const std::string& now) {
    return "GREATEST(0, (EXTRACT(EPOCH FROM (" + column + " - " + now + ")) * 1000)::bigint)";
}

/// One row kind's statements. Every builder returns a whole statement with its parameters.
struct row_sql {
    lock_kind kind;
    const char* name;     ///< "shedlock", "lease", "versioned"
    std::size_t max_name; ///< longest lock name the table takes
    bool notify;          ///< releases notify lease_channel; waiters listen
    /// No expiry in the table (versioned): the row holds a version number that the holder's
    /// heartbeat replaces; a waiter takes over a version it has seen unchanged for a lease.
    bool clock_free;
    std::string (*table)(const settings&);
    std::string (*ddl)(const settings&);
    /// The acquisition: one row changed (ShedLock) or one token returned (lease, versioned) =
    /// acquired. `observed`: the version a clock-free waiter has seen unchanged for a whole
    /// lease (it may take the row over), nullopt = only a free row.
    statement (*acquire)(const settings&, const std::string& name, const std::string& owner,
                         milliseconds lease, const std::optional<std::string>& observed);
    /// One row, one column: the holder's milliseconds left (clock-free: its version).
    statement (*remaining)(const settings&, const std::string& name);
    /// `id`: locked_by (ShedLock), the token (lease) or the current version (versioned). One
    /// row changed = still ours (versioned: it returns the new version).
    statement (*extend)(const settings&, const std::string& name, const std::string& id,
                        milliseconds lease);
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

// --- ShedLock (PostgresSqlServerTimeStatementsSource: :name = $1, :lockAtMostForInterval /
// :lockAtLeastForInterval = $2, :lockedBy = $3) -------------------------------------------------

/// A PL/pgSQL block that creates `object` with `create` when it is missing. Two sessions
/// creating it at once: the second fails on the catalog's unique index once the first
/// committed; the object exists then, so that error is no error.
std::string create_missing(const std::string& object, const std::string& create) {
    return "BEGIN IF to_regclass('" + object + "') IS NULL THEN " + create +
           "; END IF; EXCEPTION WHEN unique_violation OR duplicate_table OR duplicate_object THEN "
           "NULL; END;";
}

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
                     milliseconds lease, const std::optional<std::string>&) {
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
                     milliseconds lease, const std::optional<std::string>&) {
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
                     milliseconds, const std::optional<std::string>& observed) {
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

const row_sql shedlock_sql{
    lock_kind::shedlock, "shedlock",   64,        false,      false,      sl_table, sl_ddl,
    sl_acquire,          sl_remaining, sl_extend, sl_release, sl_inspect, sl_list,  sl_force};
const row_sql lease_sql{lock_kind::lease, "lease",    4096,       true,         false,
                        ls_table,         ls_ddl,     ls_acquire, ls_remaining, ls_extend,
                        ls_release,       ls_inspect, ls_list,    ls_force};
const row_sql versioned_sql{
    lock_kind::versioned, "versioned",  255,       true,       true,       vs_table, vs_ddl,
    vs_acquire,           vs_remaining, vs_extend, vs_release, vs_inspect, vs_list,  vs_force,
    vs_ensure_row};

const row_sql& sql_of(lock_kind k) {
    return k == lock_kind::lease       ? lease_sql
           : k == lock_kind::versioned ? versioned_sql
                                       : shedlock_sql;
}

/// How a query on the table ended: nullopt when its first result is rows to read; else the
/// error to report, clear for "no table yet" (then there is no lock).
std::optional<std::error_code> table_outcome(std::error_code ec, const std::vector<result>& r) {
    if (ec) return ec;
    if (!r.empty() && r[0].ok()) return std::nullopt;
    if (!r.empty() && r[0].sqlstate() == sqlstate::undefined_table) return std::error_code{};
    return make_error_code(r.empty() ? errc::unavailable : classify_sqlstate(r[0].sqlstate()));
}

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

class row_hold final : public pg_hold {
public:
    row_hold(std::shared_ptr<engine> e, const row_sql& sql, std::string name, std::string owner,
             std::optional<std::uint64_t> token, milliseconds lease, bool watchdog)
        : pg_hold(std::move(e))
        , sql_(sql)
        , token_(token)
        , name_(std::move(name))
        , owner_(std::move(owner))
        , lease_(lease)
        , watchdog_(watchdog)
        , timer_(engine_->io())
        , version_(token ? static_cast<std::int64_t>(*token) : 0) {}

    void start(clock::time_point sent) {
        acquired_at_ = sent;
        next_extend_ = sent + lease_ / 3;
        set_valid_until(sent + lease_ - margin(lease_));
        arm();
    }

    const std::string& name() const noexcept override { return name_; }
    std::optional<std::uint64_t> fencing_token() const noexcept override { return token_; }
    void end_on_shutdown() override {
        // The row expires by itself; the holder must stop now.
        lose(loss_cause::deadline);
    }

private:
    std::shared_ptr<row_hold> self() {
        return std::static_pointer_cast<row_hold>(shared_from_this());
    }
    /// What the kind's statements name the owner by: locked_by, the token, or (clock-free)
    /// the version the row has now.
    std::string id() const {
        if (sql_.clock_free) return std::to_string(version_);
        return token_ ? std::to_string(*token_) : owner_;
    }

    /// Next event: a watchdog extend at last success + lease / 3, or the deadline.
    void arm() {
        if (ended_) return;
        auto at = valid_until();
        if (watchdog_ && !extending_) at = std::min(at, next_extend_);
        timer_.expires_at(at);
        timer_.async_wait([w = std::weak_ptr<row_hold>(self())](std::error_code ec) {
            auto h = w.lock();
            if (!h || ec || h->ended_ || h->releasing_) return;
            if (clock::now() >= h->valid_until()) return h->lose(loss_cause::deadline);
            if (h->watchdog_ && !h->extending_)
                h->extend_io(h->lease_, [](std::error_code) {});
            else
                h->arm();
        });
    }

    void extend_io(milliseconds lease, std::function<void(std::error_code)> done) override {
        if (ended_ || releasing_) return done(make_error_code(errc::not_owner));
        extending_ = true;
        const auto sent = clock::now();
        engine_->query(
            {sql_.extend(engine_->config(), name_, id(), lease)},
            [self = self(), sent, lease, done](std::error_code ec, std::vector<result>& r) {
                self->extending_ = false;
                if (self->ended_ || self->releasing_) return done(make_error_code(errc::not_owner));
                if (!ec && !r.empty() && r[0].ok()) {
                    if (r[0].affected() == 0) {
                        self->lose(loss_cause::taken);
                        return done(make_error_code(errc::not_owner));
                    }
                    auto now_lease = lease;
                    if (self->sql_.clock_free) {
                        // Waiters count their own lease, not ours: the hold keeps the one it
                        // was acquired with (a longer one would overstate valid_until).
                        self->version_ = r[0].int_value(0, 0).value_or(self->version_);
                        now_lease = std::min(lease, self->lease_);
                    }
                    self->lease_ = now_lease;
                    self->next_extend_ = sent + now_lease / 3;
                    self->set_valid_until(sent + now_lease - margin(now_lease));
                    self->arm();
                    return done({});
                }
                // No answer or an error: the watchdog tries again soon, until the deadline.
                self->next_extend_ = clock::now() + std::max(self->lease_ / 20, milliseconds(10));
                self->arm();
                done(ec ? ec
                        : make_error_code(r.empty() ? errc::unavailable
                                                    : classify_sqlstate(r[0].sqlstate())));
            });
    }

    void release_io(std::function<void(std::error_code)> done) override {
        if (lost()) return done(make_error_code(errc::not_owner));
        if (ended_ || releasing_) return done({});
        releasing_ = true;
        timer_.cancel();
        auto& m = engine_->metrics();
        engine_->query({sql_.release(engine_->config(), name_, id())},
                       [self = self(), done, &m](std::error_code ec, std::vector<result>& r) {
                           if (self->ended_) return done(make_error_code(errc::not_owner));
                           self->ended_ = true;
                           m.hold_ended(clock::now() - self->acquired_at_);
                           if (!ec && !r.empty() && r[0].ok() && r[0].affected() == 0) {
                               m.release(client_metrics::release_result::not_owner);
                               m.loss(loss_cause::taken);
                               self->mark_lost();
                               return done(make_error_code(errc::not_owner));
                           }
                           if (ec || r.empty() || !r[0].ok()) {
                               // The row expires anyway; the caller learns the release did
                               // not reach the server.
                               m.release(client_metrics::release_result::failed);
                               self->mark_released();
                               return done(ec ? ec
                                              : make_error_code(r.empty() ? errc::unavailable
                                                                          : classify_sqlstate(
                                                                                r[0].sqlstate())));
                           }
                           m.release(client_metrics::release_result::released);
                           self->mark_released();
                           done({});
                       });
    }

    void lose(loss_cause cause) {
        if (ended_ || releasing_) return;
        ended_ = true;
        timer_.cancel();
        auto& m = engine_->metrics();
        m.hold_ended(clock::now() - acquired_at_);
        m.loss(cause);
        mark_lost();
    }

    const row_sql& sql_;
    std::optional<std::uint64_t> token_;
    std::string name_;
    std::string owner_;
    // I/O thread only:
    milliseconds lease_;
    bool watchdog_;
    asio::steady_timer timer_;
    clock::time_point acquired_at_{};
    clock::time_point next_extend_{};
    bool extending_ = false;
    bool releasing_ = false;
    bool ended_ = false;
    std::int64_t version_; ///< clock-free: the row's version, replaced by each heartbeat
};

struct row_attempt : std::enable_shared_from_this<row_attempt> {
    std::shared_ptr<engine> eng;
    const row_sql* sql = nullptr;
    std::string name;
    acquire_options opts;
    std::string owner;
    milliseconds lease{};
    clock::time_point start = clock::now();
    acquire_handler done;
    std::unique_ptr<asio::steady_timer> timer{};
    std::uint64_t sleeper = 0; ///< the registered wake-up (notify kinds), 0 = none
    bool woken = false;        ///< a notification came since the last attempt was sent
    bool sleeping = false;
    /// Clock-free kinds: the holder's version as first seen, and when (the answer's arrival:
    /// the version was set before it). Taken over once unchanged for a whole lease.
    std::optional<std::int64_t> seen{};
    clock::time_point seen_at{};

    void finish(std::error_code ec, std::shared_ptr<hold> h) {
        if (sleeper) eng->forget(std::exchange(sleeper, 0));
        const bool got = h != nullptr;
        eng->metrics().acquisition(client_metrics::kinds - 1, ec, got, false, clock::now() - start);
        done(ec, std::move(h));
    }

    void begin() {
        // Listen before the first attempt: a release after it cannot be missed.
        if (sql->notify && (!opts.wait || opts.wait->count() > 0) && !eng->listening())
            return eng->listen(lease_channel, [self = shared_from_this()](std::error_code) {
                self->attempt(); // without the listener: polling
            });
        attempt();
    }

    void attempt() {
        if (eng->shut_down()) return finish(make_error_code(errc::cancelled), nullptr);
        const auto& cfg = eng->config();
        if (sql->notify && eng->listening() && !sleeper) {
            woken = false;
            sleeper = eng->on_notified(name, [w = weak_from_this()] {
                if (auto self = w.lock()) self->wake();
            });
        }
        std::vector<statement> st;
        const bool ensure = !eng->tables_ready.count(sql->kind);
        if (ensure) st.push_back({sql->ddl(cfg)});
        if (sql->ensure_row) st.push_back(sql->ensure_row(cfg, name, owner));
        std::optional<std::string> observed;
        if (seen && clock::now() >= seen_at + lease) observed = std::to_string(*seen);
        st.push_back(sql->acquire(cfg, name, owner, lease, observed));
        st.push_back(sql->remaining(cfg, name));
        const auto sent = clock::now();
        eng->query(std::move(st), [self = shared_from_this(), ensure,
                                   sent](std::error_code ec, std::vector<result>& r) {
            self->answered(ec, r, ensure, sent);
        });
    }

    void answered(std::error_code ec, std::vector<result>& r, bool ensure, clock::time_point sent) {
        auto& e = *eng;
        if (ec) return finish(ec, nullptr);
        for (const auto& x : r)
            if (!x.ok()) {
                const auto code = classify_sqlstate(x.sqlstate());
                std::string why = x.message();
                if (ensure && code == errc::permission_denied)
                    why = "the table " + sql->table(e.config()) +
                          " is missing and this role may not create it: " + why;
                e.set_error(e.config().display + ": lock \"" + name + "\": " + why);
                return finish(make_error_code(code), nullptr);
            }
        e.tables_ready.insert(sql->kind);
        const std::size_t at = std::size_t{ensure} + std::size_t{sql->ensure_row != nullptr};
        const auto& got = r[at];
        if (got.affected() == 1) {
            std::optional<std::uint64_t> token;
            if (auto t = got.int_value(0, 0)) token = static_cast<std::uint64_t>(*t);
            if (sleeper) eng->forget(std::exchange(sleeper, 0));
            auto h = std::make_shared<row_hold>(eng, *sql, name, owner, token, lease, !opts.lease);
            h->start(sent);
            e.track(h);
            return finish({}, h);
        }
        // Held by someone else: wait for its release (notification) or its expiry, within the
        // wait; without notifications, poll at most every max_poll.
        const auto& rem = r[at + 1];
        auto sleep_for = milliseconds(rem.int_value(0, 0).value_or(0)) + milliseconds(1);
        if (sql->clock_free) sleep_for = until_takeover(rem);
        if (!(sql->notify && sleeper)) sleep_for = std::min(sleep_for, max_poll);
        if (opts.wait) {
            const auto left =
                *opts.wait - std::chrono::duration_cast<milliseconds>(clock::now() - start);
            if (left <= milliseconds(0)) return finish({}, nullptr);
            sleep_for = std::min(sleep_for, left);
        }
        if (woken) return attempt(); // released while our statement was in flight
        sleeping = true;
        if (!timer) timer = std::make_unique<asio::steady_timer>(eng->io());
        timer->expires_after(sleep_for);
        // The timer's handler keeps the attempt alive while it sleeps (the notification side
        // holds it weakly); a cancel drops it once the wake-up took over.
        timer->async_wait([self = shared_from_this()](std::error_code t) {
            if (!t) self->wake();
        });
    }

    /// Clock-free kinds: how long until the holder's version may be taken over (it restarts
    /// when the version changed: the holder is alive); a free row is tried again at once.
    milliseconds until_takeover(const result& rem) {
        const auto now = clock::now();
        if (rem.rows() == 0 || rem.is_null(0, 0)) {
            seen.reset();
            return milliseconds(1);
        }
        const auto v = rem.int_value(0, 0).value_or(0);
        if (seen != v) {
            seen = v;
            seen_at = now;
        }
        const auto left = std::chrono::ceil<milliseconds>(seen_at + lease - now) + milliseconds(1);
        // A pglock holder's release sends no notification: look again at least every second.
        return std::clamp(left, milliseconds(1), milliseconds(1000));
    }

    void wake() {
        woken = true;
        if (!sleeping) return; // the attempt in flight sees `woken` when it is answered
        sleeping = false;
        timer->cancel();
        if (sleeper) eng->forget(std::exchange(sleeper, 0));
        attempt();
    }
};

} // namespace

bool row_kind(lock_kind kind) noexcept {
    return kind == lock_kind::shedlock || kind == lock_kind::lease || kind == lock_kind::versioned;
}

void acquire_row(const std::shared_ptr<engine>& e, lock_kind kind, std::string name,
                 const acquire_options& opts, acquire_handler done) {
    auto a = std::make_shared<row_attempt>();
    a->eng = e;
    a->sql = &sql_of(kind);
    a->name = std::move(name);
    a->opts = opts;
    a->done = std::move(done);
    a->lease = opts.lease.value_or(kind == lock_kind::versioned ? versioned_default_lease
                                                                : table_watchdog_lease);
    if (a->name.empty() || a->name.size() > a->sql->max_name || a->lease < milliseconds(1)) {
        e->set_error("a " + std::string(a->sql->name) + " lock name is 1 to " +
                     std::to_string(a->sql->max_name) + " characters and its lease at least 1 ms");
        return a->finish(make_error_code(errc::invalid_argument), nullptr);
    }
    a->owner = hostname() + "/" + random_uuid();
    a->begin();
}

void inspect_row(const std::shared_ptr<engine>& e, lock_kind kind, std::string name,
                 std::function<void(std::error_code, lock_status)> done) {
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
