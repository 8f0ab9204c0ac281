// The lease rows' shared machinery (rows.hpp): one hold class (row_hold) and one attempt loop
// (row_attempt) for every row kind, driven by the kind's statements (rows/sql.hpp).
#include "core/drift.hpp"
#include "core/log.hpp"
#include "core/random.hpp"
#include "postgres/errors.hpp"
#include "postgres/rows/sql.hpp"

#include <asio/steady_timer.hpp>

#include <limits>
#include <unistd.h>

namespace dlock::detail::pg {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds max_poll{250}; // longest sleep between two tries without notifications

std::string hostname() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
    return buf;
}

class row_hold final : public pg_hold {
public:
    row_hold(std::shared_ptr<engine> e, const row_sql& sql, std::string name, std::string owner,
             std::optional<std::uint64_t> token, std::optional<std::int64_t> slot,
             milliseconds lease, bool watchdog)
        : pg_hold(std::move(e))
        , sql_(sql)
        , token_(token)
        , slot_(slot)
        , name_(std::move(name))
        , owner_(std::move(owner))
        , lease_(lease)
        , watchdog_(watchdog)
        , timer_(engine_->io())
        , version_(token ? static_cast<std::int64_t>(*token) : 0) {}

    void start(clock::time_point sent) {
        acquired_at_ = sent;
        next_extend_ = sent + lease_ / 3;
        set_valid_until(sent + lease_ - drift_for(lease_));
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
    /// What the kind's statements name the owner by: locked_by, the token, (clock-free) the
    /// version the row has now, or (semaphore) "<slot>:<token>".
    std::string id() const {
        if (sql_.clock_free) return std::to_string(version_);
        if (slot_ && token_) return std::to_string(*slot_) + ":" + std::to_string(*token_);
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
        arm(); // the deadline still ends the hold while the extend is unanswered
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
                    self->extend_failing_ = false;
                    self->next_extend_ = sent + now_lease / 3;
                    self->engine_->metrics().renewal_slack(self->valid_until());
                    self->set_valid_until(sent + now_lease - drift_for(now_lease));
                    self->arm();
                    return done({});
                }
                // No answer or an error: the watchdog tries again soon, until the deadline.
                self->next_extend_ = clock::now() + std::max(self->lease_ / 20, milliseconds(10));
                self->arm();
                const auto failed =
                    ec ? ec
                       : make_error_code(r.empty() ? errc::unavailable
                                                   : classify_sqlstate(r[0].sqlstate()));
                if (!std::exchange(self->extend_failing_, true)) // once until one succeeds
                    log_renewal_failed(self->engine_->metrics().log(), 1, self->name_,
                                       self->kind_label(), failed.message());
                done(failed);
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
                               self->mark_lost(loss_cause::taken);
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
        mark_lost(cause);
    }

    const row_sql& sql_;
    std::optional<std::uint64_t> token_;
    std::optional<std::int64_t> slot_; ///< the semaphore's permit: its row's slot
    std::string name_;
    std::string owner_;
    // I/O thread only:
    milliseconds lease_;
    bool watchdog_;
    asio::steady_timer timer_;
    clock::time_point acquired_at_{};
    clock::time_point next_extend_{};
    bool extending_ = false;
    bool extend_failing_ = false; ///< "lock renewal failed" logged since the last success
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
    unsigned permits = 1; ///< the semaphore's N
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
        eng->metrics().acquisition(metrics_slot(sql->kind), ec, got, false, clock::now() - start);
        done(ec, std::move(h));
    }

    void begin() {
        // Listen before the first attempt: a release after it cannot be missed.
        if (sql->notify && (!opts.wait || opts.wait->count() > 0) && !eng->listening())
            return eng->listen([self = shared_from_this()](std::error_code) {
                self->attempt(); // without the listener: polling
            });
        attempt();
    }

    void attempt() {
        if (eng->shut_down()) return finish(make_error_code(errc::cancelled), nullptr);
        const auto& cfg = eng->config();
        if (sql->notify && eng->listening() && !sleeper) {
            woken = false;
            sleeper = eng->on_notified(lease_channel, name, [w = weak_from_this()] {
                if (auto self = w.lock()) self->wake();
            });
        }
        std::vector<statement> st;
        const bool ensure = !eng->tables_ready.count(sql->kind);
        if (ensure) st.push_back({sql->ddl(cfg)});
        if (sql->ensure_row) st.push_back(sql->ensure_row(cfg, name, owner));
        std::optional<std::string> observed;
        if (seen && clock::now() >= seen_at + lease) observed = std::to_string(*seen);
        st.push_back(sql->acquire(cfg, name, owner, lease, observed, permits));
        if (sql->remaining) st.push_back(sql->remaining(cfg, name));
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
        // The semaphore's one row (semaphore.cpp, sm_acquire): [0] the slot granted, [1] its
        // token, [2] the slot tried (NULL: full), [4] the milliseconds to the first expiry.
        const bool slotted = sql->remaining == nullptr;
        const bool granted = slotted ? got.rows() == 1 && !got.is_null(0, 0) : got.affected() == 1;
        if (granted) {
            std::optional<std::uint64_t> token;
            std::optional<std::int64_t> slot;
            if (auto t = got.int_value(0, slotted ? 1 : 0)) token = static_cast<std::uint64_t>(*t);
            if (slotted) slot = got.int_value(0, 0);
            if (sleeper) eng->forget(std::exchange(sleeper, 0));
            auto h =
                std::make_shared<row_hold>(eng, *sql, name, owner, token, slot, lease, !opts.lease);
            h->start(sent);
            e.track(h);
            return finish({}, h);
        }
        // A semaphore's free slot taken by another attempt first: try again at once.
        if (slotted && got.rows() == 1 && !got.is_null(0, 2)) return attempt();
        // Held by someone else: wait for its release (notification) or its expiry, within the
        // wait; without notifications, poll at most every max_poll.
        const auto& rem = slotted ? got : r[at + 1];
        auto sleep_for =
            milliseconds(rem.int_value(0, slotted ? 4 : 0).value_or(0)) + milliseconds(1);
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

const row_sql& sql_of(lock_kind k) {
    return k == lock_kind::lease       ? lease_sql
           : k == lock_kind::versioned ? versioned_sql
           : k == lock_kind::semaphore ? semaphore_sql
                                       : shedlock_sql;
}

bool row_kind(lock_kind kind) noexcept {
    return kind == lock_kind::shedlock || kind == lock_kind::lease ||
           kind == lock_kind::versioned || kind == lock_kind::semaphore;
}

void acquire_row(const std::shared_ptr<engine>& e, lock_kind kind, std::string name,
                 const acquire_options& opts, acquire_handler done) {
    auto a = std::make_shared<row_attempt>();
    a->eng = e;
    a->sql = &sql_of(kind);
    a->name = std::move(name);
    a->opts = opts;
    a->done = std::move(done);
    a->lease = opts.lease.value_or(e->config().row_lease.value_or(
        kind == lock_kind::versioned ? versioned_default_lease : table_watchdog_lease));
    a->permits = opts.permits;
    if (kind == lock_kind::semaphore &&
        (opts.permits < 1 || opts.permits > unsigned{std::numeric_limits<std::int32_t>::max()})) {
        // A slot is an int: N is 1 to 2^31 - 1 (a negative count reaches here as a huge one).
        e->set_error("a semaphore needs permits from 1 to " +
                     std::to_string(std::numeric_limits<std::int32_t>::max()));
        return a->finish(make_error_code(errc::invalid_argument), nullptr);
    }
    if (a->name.empty() || a->name.size() > a->sql->max_name || a->lease < milliseconds(1)) {
        e->set_error("a " + std::string(a->sql->name) + " lock name is 1 to " +
                     std::to_string(a->sql->max_name) + " characters and its lease at least 1 ms");
        return a->finish(make_error_code(errc::invalid_argument), nullptr);
    }
    a->owner = hostname() + "/" + random_uuid();
    a->begin();
}

} // namespace dlock::detail::pg
