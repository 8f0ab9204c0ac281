// observe() on PostgreSQL (election.hpp): one observation of an election, driven by the
// engine's LISTEN session and one waiting session, on the engine's I/O thread; no polling while
// the LISTEN session is up.
//
// A refresh registers for the next NOTIFY of the name on dlock_election (a new leader or
// value), then reads the leader (read_leader). While there is a leader, one session waits for
// the name's advisory lock in shared mode, pipelined with its release: granted when the
// leader's lock is released or its session ends (or behind the next leader, which notifies),
// then given back at once by the server. A notification or that wait ending runs a refresh; the
// callback gets the result when it differs from the last one delivered
// (core/delivering_observer.hpp). Without the LISTEN session (it could not be set up, or it
// ended), refreshes run every second until it is back. A refresh that fails is tried again a
// second later.
//
// Lifetime: the observer keeps the engine, not the backend; the waiting session is the
// engine's (closed on shutdown) and closed when the observation stops.
#include "core/delivering_observer.hpp"
#include "postgres/advisory_impl.hpp"
#include "postgres/election.hpp"

#include <dlock/error.hpp>

#include <asio/steady_timer.hpp>

#include <atomic>
#include <thread>

namespace dlock::detail::pg {
namespace {

constexpr std::chrono::seconds retry_every{1};

class pg_observer final : public delivering_observer,
                          public std::enable_shared_from_this<pg_observer> {
public:
    pg_observer(std::shared_ptr<engine> e, std::string name, advisory_key key,
                lock_backend::observe_fn cb)
        : delivering_observer(std::move(cb))
        , engine_(std::move(e))
        , name_(std::move(name))
        , key_(std::move(key)) {}

    ~pg_observer() override {
        // Dropped without stop() reaching the I/O thread: close the waiting session there.
        if (waiter_) engine_->post([s = waiter_] { s->close(); });
    }

    /// On the I/O thread; `first` runs once: {} after the first delivery, or the error that
    /// prevented it.
    void start(std::function<void(std::error_code)> first) {
        io_thread_.store(std::this_thread::get_id(), std::memory_order_release);
        await_first(std::move(first));
        refresh();
    }

    void stop() noexcept override {
        delivering_observer::stop();
        if (std::this_thread::get_id() == io_thread_.load(std::memory_order_acquire)) return end();
        // A strong reference: end() runs on the I/O thread before the observer can go.
        engine_->post([self = shared_from_this()] { self->end(); });
    }

private:
    /// I/O thread: no more requests, wakes or waits.
    void end() {
        ended_ = true;
        ++gen_;
        if (sleeper_) engine_->forget(std::exchange(sleeper_, 0));
        if (waiter_) std::exchange(waiter_, nullptr)->close();
    }

    bool wanted(std::uint64_t gen) const noexcept {
        return !ended_ && !stopped() && gen == gen_ && !engine_->shut_down();
    }

    void refresh() {
        if (!wanted(gen_)) return;
        const auto gen = ++gen_;
        if (!engine_->listening()) {
            // Listen first, so that no change after the read below goes unnoticed; without
            // the LISTEN session, read every second.
            return engine_->listen([w = weak_from_this(), gen](std::error_code) {
                auto self = w.lock();
                if (self && self->wanted(gen)) self->read(gen);
            });
        }
        read(gen);
    }

    void read(std::uint64_t gen) {
        if (sleeper_) engine_->forget(std::exchange(sleeper_, 0));
        if (engine_->listening())
            sleeper_ = engine_->on_notified(election_channel, name_, [w = weak_from_this()] {
                auto self = w.lock();
                if (!self) return;
                self->sleeper_ = 0;
                self->refresh();
            });
        read_leader(engine_, name_,
                    [w = weak_from_this(), gen](std::error_code ec, std::optional<leader_info> li) {
                        auto self = w.lock();
                        if (self && self->wanted(gen)) self->on_read(ec, std::move(li));
                    });
    }

    void on_read(std::error_code ec, std::optional<leader_info> li) {
        if (ec) {
            if (awaiting_first()) return finish_first(ec);
            return retry_later();
        }
        const bool leading = li.has_value();
        deliver(std::move(li));
        if (!wanted(gen_)) return;    // stopped from inside the callback
        if (!sleeper_) retry_later(); // no notifications: read again in a second
        if (leading && !waiter_ && !waiting_) wait_for_release();
    }

    /// One session waiting for the lock in shared mode, released at once: it completes when
    /// the leader's lock is free (or behind the next leader, which notifies).
    void wait_for_release() {
        waiting_ = true;
        engine_->get_session([w = weak_from_this()](std::error_code ec,
                                                    std::shared_ptr<connection> s) {
            auto self = w.lock();
            if (!self || self->ended_) {
                if (s) s->close();
                return;
            }
            self->waiting_ = false;
            if (ec) return self->retry_later();
            self->waiter_ = s;
            std::vector<statement> st;
            st.push_back(
                {"SELECT set_config('application_name', $1, false)", {app_name_for(self->name_)}});
            st.push_back({"SELECT set_config('lock_timeout', '0', false)"});
            st.push_back(key_statement("SELECT " + key_call("pg_advisory_lock_shared", self->key_),
                                       self->key_));
            st.push_back(key_statement(
                "SELECT " + key_call("pg_advisory_unlock_shared", self->key_), self->key_));
            s->run(std::move(st), std::chrono::milliseconds(0),
                   [w, s](std::error_code e, std::vector<result>& r) {
                       auto o = w.lock();
                       const bool clean = !e && r.size() == 4 && r[3].ok();
                       if (!o || o->ended_) return s->close();
                       if (o->waiter_ == s) o->waiter_.reset();
                       if (clean)
                           o->engine_->put_session(s);
                       else
                           s->close();
                       if (!o->wanted(o->gen_)) return;
                       if (clean) return o->refresh();
                       o->retry_later();
                   });
        });
    }

    void retry_later() {
        if (timer_armed_) return;
        timer_armed_ = true;
        // The timer lives in its handler only: nothing of Asio outlives the engine's loop.
        auto t = std::make_shared<asio::steady_timer>(engine_->io(), retry_every);
        t->async_wait([t, w = weak_from_this()](std::error_code e) {
            auto self = w.lock();
            if (!self) return;
            self->timer_armed_ = false;
            if (!e && self->wanted(self->gen_)) self->refresh();
        });
    }

    std::shared_ptr<engine> engine_; // first: the last member destroyed
    std::string name_;
    advisory_key key_;
    std::atomic<std::thread::id> io_thread_{}; // set by start()
    // I/O thread only:
    std::shared_ptr<connection> waiter_{}; ///< the session waiting for the release
    std::uint64_t sleeper_ = 0;            ///< the engine's wake for the next NOTIFY
    std::uint64_t gen_ = 0;                ///< bumped per refresh: stale answers are ignored
    bool waiting_ = false;                 ///< a session for waiter_ is being set up
    bool timer_armed_ = false;
    bool ended_ = false;
};

} // namespace

std::shared_ptr<observer> observe_election(const std::shared_ptr<engine>& e, std::string_view name,
                                           lock_backend::observe_fn cb, std::error_code& ec) {
    ec.clear();
    if (e->on_io_thread() || !cb) {
        ec = make_error_code(errc::invalid_argument);
        return nullptr;
    }
    auto key = make_key(name, e->config().key, ec);
    if (ec) {
        e->set_error("election name \"" + std::string(name) + "\" cannot be a " +
                     std::string(to_string(e->config().key)) + " advisory key");
        return nullptr;
    }
    auto o = std::make_shared<pg_observer>(e, std::string(name), std::move(key), std::move(cb));
    ec =
        e->call<std::error_code>([o](std::function<void(std::error_code)> done) { o->start(done); },
                                 make_error_code(errc::unavailable));
    if (ec) {
        o->stop();
        return nullptr;
    }
    return o;
}

} // namespace dlock::detail::pg
