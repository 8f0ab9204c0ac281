#include "postgres/shedlock.hpp"

#include "core/random.hpp"
#include "postgres/errors.hpp"

#include <asio/steady_timer.hpp>

#include <unistd.h>

namespace dlock::detail::pg {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t max_name = 64;  // shedlock.name VARCHAR(64)
constexpr milliseconds max_poll{250}; // longest sleep between two tries
const std::string db_now = "timezone('utc', CURRENT_TIMESTAMP)";

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

std::string ddl(const std::string& t) {
    return "DO $$BEGIN IF to_regclass('" + t + "') IS NULL THEN CREATE TABLE IF NOT EXISTS " + t +
           "(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT "
           "NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name)); END IF; END$$";
}

// ShedLock's DB-time statements (PostgresSqlServerTimeStatementsSource.java), :name = $1,
// :lockAtMostForInterval / :lockAtLeastForInterval = $2, :lockedBy = $3.
std::string insert_sql(const std::string& t) {
    return "INSERT INTO " + t + "(name, lock_until, locked_at, locked_by) VALUES($1, " + db_now +
           " + make_interval(secs => $2), " + db_now + ", $3) ON CONFLICT (name) DO UPDATE SET " +
           "lock_until = " + db_now + " + make_interval(secs => $2), locked_at = " + db_now +
           ", locked_by = $3 WHERE " + t + ".name = $1 AND " + t + ".lock_until <= " + db_now;
}
std::string extend_sql(const std::string& t) {
    return "UPDATE " + t + " SET lock_until = " + db_now +
           " + make_interval(secs => $2) WHERE name = $1 AND locked_by = $3 AND lock_until > " +
           db_now;
}
std::string unlock_sql(const std::string& t) {
    return "UPDATE " + t + " SET lock_until = CASE WHEN locked_at + make_interval(secs => $2) > " +
           db_now + " THEN locked_at + make_interval(secs => $2) ELSE " + db_now +
           " END WHERE name = $1 AND locked_by = $3";
}
/// The holder's remaining lease in ms (0 when free or expired), for the wait between tries.
std::string remaining_sql(const std::string& t) {
    return "SELECT GREATEST(0, (EXTRACT(EPOCH FROM (lock_until - " + db_now +
           ")) * 1000)::bigint) FROM " + t + " WHERE name = $1";
}

/// How a query on the table ended: nullopt when its first result is rows to read; else the
/// error to report, clear for "no table yet" (then there is no lock).
std::optional<std::error_code> table_outcome(std::error_code ec, const std::vector<result>& r) {
    if (ec) return ec;
    if (!r.empty() && r[0].ok()) return std::nullopt;
    if (!r.empty() && r[0].sqlstate() == sqlstate::undefined_table) return std::error_code{};
    return make_error_code(r.empty() ? errc::unavailable : classify_sqlstate(r[0].sqlstate()));
}

lock_status row_status(std::string name, std::string locked_by, std::int64_t left_ms) {
    lock_status st;
    st.name = std::move(name);
    st.kind = "shedlock";
    if (left_ms <= 0) return st;
    st.exists = true;
    st.remaining_lease = milliseconds(left_ms);
    lock_contender c;
    c.owner = std::move(locked_by);
    c.entry = "row " + st.name;
    c.holds = true;
    st.contenders.push_back(std::move(c));
    return st;
}

class shedlock_hold final : public pg_hold {
public:
    shedlock_hold(std::shared_ptr<engine> e, std::string name, std::string owner,
                  milliseconds lease, bool watchdog)
        : pg_hold(std::move(e))
        , name_(std::move(name))
        , owner_(std::move(owner))
        , lease_(lease)
        , watchdog_(watchdog)
        , timer_(engine_->io()) {}

    void start(clock::time_point sent) {
        acquired_at_ = sent;
        next_extend_ = sent + lease_ / 3;
        set_valid_until(sent + lease_ - margin(lease_));
        arm();
    }

    const std::string& name() const noexcept override { return name_; }
    std::optional<std::uint64_t> fencing_token() const noexcept override { return std::nullopt; }
    void end_on_shutdown() override {
        // The row expires by itself at lock_until; the holder must stop now.
        lose(loss_cause::deadline);
    }

private:
    std::shared_ptr<shedlock_hold> self() {
        return std::static_pointer_cast<shedlock_hold>(shared_from_this());
    }
    const std::string& table() const { return engine_->config().shedlock_table; }

    /// Next event: a watchdog extend at last success + lease / 3, or the deadline.
    void arm() {
        if (ended_) return;
        auto at = valid_until();
        if (watchdog_ && !extending_) at = std::min(at, next_extend_);
        timer_.expires_at(at);
        timer_.async_wait([w = std::weak_ptr<shedlock_hold>(self())](std::error_code ec) {
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
            {{extend_sql(table()), {name_, seconds_text(lease), owner_}}},
            [self = self(), sent, lease, done](std::error_code ec, std::vector<result>& r) {
                self->extending_ = false;
                if (self->ended_ || self->releasing_) return done(make_error_code(errc::not_owner));
                if (!ec && !r.empty() && r[0].ok()) {
                    if (r[0].affected() == 0) {
                        self->lose(loss_cause::taken);
                        return done(make_error_code(errc::not_owner));
                    }
                    self->lease_ = lease;
                    self->next_extend_ = sent + lease / 3;
                    self->set_valid_until(sent + lease - margin(lease));
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
        engine_->query({{unlock_sql(table()), {name_, seconds_text(milliseconds(0)), owner_}}},
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
                               // The row expires at lock_until anyway; the caller learns the
                               // release did not reach the server.
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
};

struct sl_attempt : std::enable_shared_from_this<sl_attempt> {
    std::shared_ptr<engine> eng;
    std::string name;
    acquire_options opts;
    std::string owner;
    milliseconds lease{};
    clock::time_point start = clock::now();
    acquire_handler done;
    std::unique_ptr<asio::steady_timer> timer{};

    void finish(std::error_code ec, std::shared_ptr<hold> h) {
        const bool got = h != nullptr;
        eng->metrics().acquisition(client_metrics::kinds - 1, ec, got, false, clock::now() - start);
        done(ec, std::move(h));
    }

    void attempt() {
        const auto& t = eng->config().shedlock_table;
        std::vector<statement> st;
        const bool ensure = !eng->shedlock_ready;
        if (ensure) st.push_back({ddl(t)});
        st.push_back({insert_sql(t), {name, seconds_text(lease), owner}});
        st.push_back({remaining_sql(t), {name}});
        const auto sent = clock::now();
        eng->query(std::move(st), [self = shared_from_this(), ensure,
                                   sent](std::error_code ec, std::vector<result>& r) {
            auto& e = *self->eng;
            if (ec) return self->finish(ec, nullptr);
            for (const auto& x : r)
                if (!x.ok()) {
                    const auto code = classify_sqlstate(x.sqlstate());
                    std::string why = x.message();
                    if (ensure && code == errc::permission_denied)
                        why = "the table " + e.config().shedlock_table +
                              " is missing and this role may not create it: " + why;
                    e.set_error(e.config().display + ": lock \"" + self->name + "\": " + why);
                    return self->finish(make_error_code(code), nullptr);
                }
            e.shedlock_ready = true;
            const auto& ins = r[ensure ? 1 : 0];
            if (ins.affected() == 1) {
                auto h = std::make_shared<shedlock_hold>(self->eng, self->name, self->owner,
                                                         self->lease, !self->opts.lease);
                h->start(sent);
                e.track(h);
                return self->finish({}, h);
            }
            // Held by someone else: try again when it may have ended, within the wait.
            const auto& rem = r[ensure ? 2 : 1];
            const auto holder_left = milliseconds(rem.int_value(0, 0).value_or(0));
            if (!self->opts.wait) return self->sleep(std::min(holder_left, max_poll));
            const auto left = *self->opts.wait -
                              std::chrono::duration_cast<milliseconds>(clock::now() - self->start);
            if (left <= milliseconds(0)) return self->finish({}, nullptr);
            self->sleep(std::min({holder_left, max_poll, left}));
        });
    }

    void sleep(milliseconds d) {
        if (!timer) timer = std::make_unique<asio::steady_timer>(eng->io());
        timer->expires_after(std::max(d, milliseconds(1)));
        timer->async_wait([self = shared_from_this()](std::error_code ec) {
            if (ec || self->eng->shut_down())
                return self->finish(make_error_code(errc::cancelled), nullptr);
            self->attempt();
        });
    }
};

} // namespace

void acquire_shedlock(const std::shared_ptr<engine>& e, std::string name,
                      const acquire_options& opts, acquire_handler done) {
    auto a = std::make_shared<sl_attempt>();
    a->eng = e;
    a->name = std::move(name);
    a->opts = opts;
    a->done = std::move(done);
    a->lease = opts.lease.value_or(table_watchdog_lease);
    if (a->name.empty() || a->name.size() > max_name || a->lease < milliseconds(1)) {
        e->set_error("a ShedLock name is 1 to 64 characters and a lease at least 1 ms");
        return a->finish(make_error_code(errc::invalid_argument), nullptr);
    }
    a->owner = hostname() + "/" + random_uuid();
    a->attempt();
}

void inspect_shedlock(const std::shared_ptr<engine>& e, std::string name,
                      std::function<void(std::error_code, lock_status)> done) {
    lock_status st;
    st.name = name;
    st.kind = "shedlock";
    const auto& t = e->config().shedlock_table;
    const std::string sql =
        "SELECT locked_by, locked_at::text, lock_until::text, GREATEST(0, (EXTRACT(EPOCH FROM "
        "(lock_until - " +
        db_now + ")) * 1000)::bigint) FROM " + t + " WHERE name = $1";
    e->query({{sql, {name}}}, [st, done](std::error_code ec, std::vector<result>& r) mutable {
        if (auto out = table_outcome(ec, r)) return done(*out, st);
        if (r[0].rows() == 0) return done({}, st);
        auto found =
            row_status(st.name, std::string(r[0].value(0, 0)), r[0].int_value(0, 3).value_or(0));
        found.detail = "locked_at " + std::string(r[0].value(0, 1)) + " UTC, lock_until " +
                       std::string(r[0].value(0, 2)) + " UTC (row kept)";
        done({}, std::move(found));
    });
}

void force_unlock_shedlock(const std::shared_ptr<engine>& e, std::string name,
                           std::function<void(std::error_code, bool)> done) {
    const auto& t = e->config().shedlock_table;
    e->query({{"UPDATE " + t + " SET lock_until = " + db_now +
                   " WHERE name = $1 AND lock_until > " + db_now,
               {name}}},
             [done](std::error_code ec, std::vector<result>& r) {
                 if (auto out = table_outcome(ec, r)) return done(*out, false);
                 done({}, r[0].affected() > 0);
             });
}

void list_shedlock(const std::shared_ptr<engine>& e, std::string pattern,
                   std::function<void(std::error_code, std::vector<lock_status>)> done) {
    const auto& t = e->config().shedlock_table;
    const std::string sql =
        "SELECT name, locked_by, GREATEST(0, (EXTRACT(EPOCH FROM (lock_until - " + db_now +
        ")) * 1000)::bigint) FROM " + t + " WHERE lock_until > " + db_now + " ORDER BY name";
    e->query({{sql}}, [pattern, done](std::error_code ec, std::vector<result>& r) {
        std::vector<lock_status> out;
        if (auto o = table_outcome(ec, r)) return done(*o, out);
        for (int i = 0; i < r[0].rows(); ++i) {
            std::string name(r[0].value(i, 0));
            if (!glob_match(pattern, name)) continue;
            out.push_back(row_status(std::move(name), std::string(r[0].value(i, 1)),
                                     std::max<std::int64_t>(r[0].int_value(i, 2).value_or(0), 1)));
        }
        done({}, std::move(out));
    });
}

} // namespace dlock::detail::pg
