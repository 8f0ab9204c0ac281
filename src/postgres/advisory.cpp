#include "postgres/advisory.hpp"

#include "postgres/errors.hpp"

#include <asio/steady_timer.hpp>

#include <algorithm>
#include <map>
#include <tuple>

namespace dlock::detail::pg {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view app_prefix = "dlock:";
constexpr std::size_t max_app_name = 63; // NAMEDATALEN - 1

const std::string fence_ddl = "DO $$BEGIN IF to_regclass('dlock_fence') IS NULL THEN CREATE "
                              "SEQUENCE IF NOT EXISTS dlock_fence; END IF; END$$";

/// "dlock:<name>" cut to 63 bytes on a UTF-8 boundary (the server keeps no more).
std::string app_name_for(std::string_view name) {
    std::string s = std::string(app_prefix) + std::string(name);
    if (s.size() <= max_app_name) return s;
    std::size_t n = max_app_name;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80)
        --n;
    s.resize(n);
    return s;
}

bool shared_kind(lock_kind k) noexcept {
    return k == lock_kind::read;
}

statement key_statement(std::string sql, const advisory_key& k) {
    statement s{std::move(sql), {key_param1(k)}};
    if (auto p2 = key_param2(k)) s.params.emplace_back(std::move(*p2));
    return s;
}

/// The key as one bigint SQL expression over $1 (pg_locks coordinates are derived from it).
std::pair<std::string, std::string> key_expr(const advisory_key& k) {
    if (k.server_hash) return {"hashtext($1)::bigint", k.text};
    return {"$1::bigint", std::to_string(k.value)};
}

errc error_of(const result& r, bool caller_input = false) {
    return classify_sqlstate(r.sqlstate(), caller_input);
}

// --- the hold -------------------------------------------------------------------------------

class advisory_hold final : public pg_hold {
public:
    advisory_hold(std::shared_ptr<engine> e, std::string name, advisory_key key, lock_kind kind,
                  std::optional<std::uint64_t> token, std::shared_ptr<connection> session)
        : pg_hold(std::move(e))
        , name_(std::move(name))
        , key_(std::move(key))
        , kind_(kind)
        , token_(token)
        , session_(std::move(session))
        , tick_(engine_->io())
        , lease_timer_(engine_->io()) {}

    ~advisory_hold() override {
        // Dropped without release (only the engine's weak list and timers' weak captures are
        // left): end the session on the I/O thread, which frees the lock.
        if (!ended_io_ && session_) engine_->post([s = session_] { s->close(); });
    }

    // I/O thread: start watching the session; called once, right after the grant.
    void start(std::optional<milliseconds> fixed_lease) {
        acquired_at_ = clock::now();
        set_valid_until(acquired_at_ + engine_->config().check_period);
        if (fixed_lease) arm_lease(*fixed_lease);
        session_->on_closed([w = weak()](std::error_code) {
            if (auto h = w.lock()) h->lose(loss_cause::gone);
        });
        arm_tick();
    }

    const std::string& name() const noexcept override { return name_; }
    std::optional<std::uint64_t> fencing_token() const noexcept override { return token_; }
    void end_on_shutdown() override { lose(loss_cause::gone); }

private:
    std::shared_ptr<advisory_hold> self() {
        return std::static_pointer_cast<advisory_hold>(shared_from_this());
    }
    std::weak_ptr<advisory_hold> weak() { return self(); }

    bool ended() const noexcept { return ended_io_; }

    void arm_tick() {
        tick_.expires_after(engine_->config().check_period / 2);
        tick_.async_wait([w = weak()](std::error_code ec) {
            if (auto h = w.lock(); h && !ec) h->on_tick();
        });
    }

    void on_tick() {
        if (ended() || releasing_) return;
        if (clock::now() >= valid_until()) return lose(loss_cause::deadline);
        if (!checking_ && session_->idle()) prove([](std::error_code) {});
        arm_tick();
    }

    /// One `SELECT 1` on the session: valid_until moves to its send time + check_period.
    void prove(std::function<void(std::error_code)> done) {
        checking_ = true;
        const auto sent = clock::now();
        const auto period = engine_->config().check_period;
        session_->run({{"SELECT 1"}}, period,
                      [w = weak(), sent, period, done](std::error_code ec, std::vector<result>& r) {
                          auto h = w.lock();
                          if (!h) return done(make_error_code(errc::not_owner));
                          h->checking_ = false;
                          if (h->ended() || h->releasing_)
                              return done(h->lost() ? make_error_code(errc::not_owner)
                                                    : std::error_code{});
                          if (ec || r.empty() || !r[0].ok()) {
                              h->lose(loss_cause::gone);
                              return done(make_error_code(errc::not_owner));
                          }
                          auto until = sent + period;
                          if (h->lease_end_ && *h->lease_end_ < until) until = *h->lease_end_;
                          if (until > h->valid_until()) h->set_valid_until(until);
                          done({});
                      });
    }

    void arm_lease(milliseconds lease) {
        lease_end_ = clock::now() + lease;
        if (valid_until() > *lease_end_) set_valid_until(*lease_end_);
        lease_timer_.expires_at(*lease_end_);
        lease_timer_.async_wait([w = weak()](std::error_code ec) {
            // The fixed lease ran out: the lock must not outlive it; ending the session frees it.
            if (auto h = w.lock(); h && !ec && !h->releasing_) h->lose(loss_cause::deadline);
        });
    }

    void extend_io(milliseconds lease, std::function<void(std::error_code)> done) override {
        if (ended() || releasing_) return done(make_error_code(errc::not_owner));
        if (lease_end_) arm_lease(lease);
        if (checking_ || !session_->idle()) {
            // A check is in flight: its answer is as good as ours.
            return done({});
        }
        prove(std::move(done));
    }

    void release_io(std::function<void(std::error_code)> done) override {
        if (lost()) return done(make_error_code(errc::not_owner));
        if (ended() || releasing_) return done({});
        releasing_ = true;
        tick_.cancel();
        lease_timer_.cancel();
        const char* fn =
            shared_kind(kind_) ? "SELECT pg_advisory_unlock_shared" : "SELECT pg_advisory_unlock";
        auto& m = engine_->metrics();
        session_->run({key_statement(key_call(fn, key_), key_)}, engine_->config().request_timeout,
                      [self = self(), done, &m](std::error_code ec, std::vector<result>& r) {
                          if (self->ended())
                              return done(self->lost() ? make_error_code(errc::not_owner)
                                                       : std::error_code{});
                          self->ended_io_ = true;
                          m.hold_ended(clock::now() - self->acquired_at_);
                          if (!ec && !r.empty() && r[0].ok() && !r[0].bool_value(0, 0)) {
                              // The server says this session did not hold it: lost before we knew.
                              m.release(client_metrics::release_result::not_owner);
                              m.loss(loss_cause::gone);
                              self->session_->close();
                              self->mark_lost();
                              return done(make_error_code(errc::not_owner));
                          }
                          if (!ec && !r.empty() && r[0].ok()) {
                              m.release(client_metrics::release_result::released);
                              self->engine_->put_session(self->session_);
                          } else {
                              // No answer or an error: ending the session frees the lock either
                              // way.
                              m.release(client_metrics::release_result::failed);
                              self->session_->close();
                          }
                          self->session_.reset();
                          self->mark_released();
                          done({});
                      });
    }

    void lose(loss_cause cause) {
        if (ended() || releasing_) return;
        ended_io_ = true;
        tick_.cancel();
        lease_timer_.cancel();
        auto& m = engine_->metrics();
        m.hold_ended(clock::now() - acquired_at_);
        m.loss(cause);
        if (session_) {
            if (!session_->error_text().empty())
                engine_->set_error(engine_->config().display + ": lock \"" + name_ +
                                   "\" lost: " + session_->error_text());
            session_->on_closed(nullptr);
            session_->close();
            session_.reset();
        }
        mark_lost();
    }

    std::string name_;
    advisory_key key_;
    lock_kind kind_;
    std::optional<std::uint64_t> token_;
    // I/O thread only:
    std::shared_ptr<connection> session_;
    asio::steady_timer tick_;
    asio::steady_timer lease_timer_;
    std::optional<clock::time_point> lease_end_{};
    clock::time_point acquired_at_{};
    bool checking_ = false;
    bool releasing_ = false;
    bool ended_io_ = false;
};

// --- acquisition ----------------------------------------------------------------------------

struct attempt {
    std::shared_ptr<engine> eng;
    std::string name;
    acquire_options opts;
    advisory_key key;
    clock::time_point start = clock::now();
    acquire_handler done;
    bool fence = false;
    std::optional<result> ddl{}; ///< the sequence check's outcome, when it was sent

    void finish(std::error_code ec, std::shared_ptr<hold> h) {
        const bool got = h != nullptr;
        eng->metrics().acquisition(metrics_slot(opts.kind), ec, got, false, clock::now() - start);
        done(ec, std::move(h));
    }
};

void send(std::shared_ptr<attempt> a, std::shared_ptr<connection> s) {
    auto& cfg = a->eng->config();
    std::optional<milliseconds> remaining;
    if (a->opts.wait) {
        const auto left =
            std::chrono::duration_cast<milliseconds>(*a->opts.wait - (clock::now() - a->start));
        remaining = left > milliseconds(0) ? left : milliseconds(0);
    }
    const bool try_once = remaining && remaining->count() == 0;
    const bool shared = shared_kind(a->opts.kind);
    const std::string suffix = shared ? "_shared" : "";

    // The sequence check goes first in a batch of its own (its own implicit transaction, so a
    // CREATE is committed before the lock wait starts), in the same round trip.
    const bool ensure_fence = a->fence && !a->eng->fence_ready;
    if (ensure_fence)
        s->run({{fence_ddl}}, cfg.request_timeout, [a](std::error_code ec, std::vector<result>& r) {
            if (!ec && !r.empty()) a->ddl = r[0];
        });

    std::vector<statement> st;
    st.push_back({"SELECT set_config('application_name', $1, false)", {app_name_for(a->name)}});
    std::size_t lock_at = 0;
    if (try_once) {
        const std::string call = key_call("pg_try_advisory_lock" + suffix, a->key);
        lock_at = st.size();
        st.push_back(key_statement("SELECT CASE WHEN " + call + " THEN " +
                                       (a->fence ? "nextval('dlock_fence')" : "0") + " END",
                                   a->key));
    } else {
        st.push_back({"SELECT set_config('lock_timeout', $1, false)",
                      {remaining ? std::to_string(remaining->count()) : "0"}});
        lock_at = st.size();
        st.push_back(
            key_statement("SELECT " + key_call("pg_advisory_lock" + suffix, a->key), a->key));
        if (a->fence) st.push_back({"SELECT nextval('dlock_fence')"});
    }
    const auto budget = remaining ? *remaining + cfg.request_timeout : milliseconds(0);

    s->run(std::move(st), budget,
           [a, s, lock_at, try_once, ensure_fence](std::error_code ec, std::vector<result>& r) {
               auto& e = *a->eng;
               const auto fail = [&](errc code, const std::string& why) {
                   e.set_error(e.config().display + ": lock \"" + a->name + "\": " + why);
                   a->finish(make_error_code(code), nullptr);
               };
               // The first statement that failed, if any.
               std::size_t bad = r.size();
               for (std::size_t i = 0; i < r.size(); ++i)
                   if (!r[i].ok()) {
                       bad = i;
                       break;
                   }
               if (!ec && bad == r.size() && a->fence) e.fence_ready = true; // nextval worked
               if (bad == lock_at && r[lock_at].sqlstate() == sqlstate::lock_not_available) {
                   if (!ec) e.put_session(s); // the wait ended in the server: not acquired
                   return a->finish({}, nullptr);
               }
               if (ec || bad < r.size()) {
                   // The session died, timed out or a statement failed. A statement before the
                   // lock leaves the session clean; otherwise whatever was granted goes with
                   // the closed session.
                   if (!ec && bad < lock_at)
                       e.put_session(s);
                   else
                       s->close();
                   if (ensure_fence && a->ddl && !a->ddl->ok()) {
                       const auto code = error_of(*a->ddl);
                       if (code == errc::permission_denied)
                           return fail(code, "the sequence dlock_fence is missing and this role "
                                             "may not create it (create it once, or add "
                                             "dlock_fence=off to the URL): " +
                                                 a->ddl->message());
                       if (bad < r.size()) return fail(code, a->ddl->message());
                   }
                   if (bad < r.size()) return fail(error_of(r[bad]), r[bad].message());
                   return fail(errc::unavailable, s->error_text().empty()
                                                      ? std::string("session lost while waiting")
                                                      : s->error_text());
               }
               std::optional<std::uint64_t> token;
               if (try_once) {
                   if (r[lock_at].is_null(0, 0)) {
                       e.put_session(s);
                       return a->finish({}, nullptr);
                   }
                   if (a->fence)
                       token = static_cast<std::uint64_t>(r[lock_at].int_value(0, 0).value_or(0));
               } else if (a->fence) {
                   token = static_cast<std::uint64_t>(r.back().int_value(0, 0).value_or(0));
               }
               auto h =
                   std::make_shared<advisory_hold>(a->eng, a->name, a->key, a->opts.kind, token, s);
               h->start(a->opts.lease);
               e.track(h);
               a->finish({}, h);
           });
}

} // namespace

bool advisory_kind(lock_kind kind) noexcept {
    switch (kind) {
    case lock_kind::reentrant:
    case lock_kind::simple:
    case lock_kind::fair:
    case lock_kind::read:
    case lock_kind::write:
        return true;
    case lock_kind::shedlock:
    case lock_kind::lease:
    case lock_kind::versioned:
    case lock_kind::semaphore:
        return false;
    }
    return false;
}

const char* advisory_kind_name(lock_kind kind) noexcept {
    if (kind == lock_kind::read) return "read";
    if (kind == lock_kind::write) return "write";
    return "lock";
}

void acquire_advisory(const std::shared_ptr<engine>& e, std::string name,
                      const acquire_options& opts, acquire_handler done) {
    auto a = std::make_shared<attempt>();
    a->eng = e;
    a->name = std::move(name);
    a->opts = opts;
    a->done = std::move(done);
    std::error_code ec;
    if ((opts.lease && *opts.lease < milliseconds(1)) ||
        (opts.retry && (opts.retry->attempts == 0 || opts.retry->delay.count() < 0 ||
                        opts.retry->jitter.count() < 0)))
        return a->finish(make_error_code(errc::invalid_argument), nullptr);
    a->key = make_key(a->name, e->config().key, ec);
    if (ec) {
        e->set_error("lock name \"" + a->name + "\" cannot be a " +
                     std::string(to_string(e->config().key)) + " advisory key");
        return a->finish(ec, nullptr);
    }
    // Readers share the lock and get no token (as a Redis read lock).
    a->fence = e->config().fence && !shared_kind(opts.kind);
    e->get_session([a](std::error_code ec2, std::shared_ptr<connection> s) {
        if (ec2) return a->finish(ec2, nullptr);
        send(a, std::move(s));
    });
}

// --- queries ----------------------------------------------------------------------------------

namespace {

const std::string locks_sql_tail =
    " FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname "
    "= current_database())";

/// Rows: pid, granted, mode, application_name, client_addr.
std::string contenders_sql(const std::string& key_sql, int objsubid) {
    return "SELECT l.pid, l.granted, l.mode, a.application_name, host(a.client_addr)" +
           locks_sql_tail + " AND l.classid = ((" + key_sql +
           " >> 32) & 4294967295)::oid AND l.objid = (" + key_sql +
           " & 4294967295)::oid AND l.objsubid = " + std::to_string(objsubid) +
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
    q.push_back({contenders_sql(expr, key.objsubid()), {param}});
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
    const std::string sql =
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(l.pid))" + locks_sql_tail +
        " AND l.granted AND l.classid = ((" + expr + " >> 32) & 4294967295)::oid AND l.objid = (" +
        expr + " & 4294967295)::oid AND l.objsubid = " + std::to_string(key.objsubid()) +
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
    e->query({{sql}}, [pattern, done](std::error_code ec, std::vector<result>& r) {
        std::vector<lock_status> out;
        if (ec) return done(ec, out);
        if (r.empty() || !r[0].ok())
            return done(make_error_code(r.empty() ? errc::unavailable : error_of(r[0])), out);
        const auto& rows = r[0];
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
                } else {
                    advisory_key key;
                    key.pair = std::get<2>(k) == 2;
                    key.value = static_cast<std::int64_t>(
                        (static_cast<std::uint64_t>(std::get<0>(k)) << 32) |
                        static_cast<std::uint64_t>(std::get<1>(k)));
                    st.name = "key " + key.describe();
                }
            }
            st.kind = rows.value(i, 2) == "ShareLock" ? "read" : "lock";
            st.exists = true;
            st.contenders.push_back(contender_of(rows, i, waiters[k]));
        }
        for (auto& [k, st] : by_key)
            if (glob_match(pattern, st.name)) out.push_back(std::move(st));
        done({}, std::move(out));
    });
}

} // namespace dlock::detail::pg
