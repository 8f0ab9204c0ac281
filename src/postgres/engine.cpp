#include "postgres/engine.hpp"

#include "core/random.hpp"

#include <algorithm>

namespace dlock::detail::pg {

engine::engine(settings s, const log_options& log)
    : settings_(std::make_shared<const settings>(std::move(s)))
    , id_(random_uuid())
    , metrics_(log) {}

std::shared_ptr<engine> engine::create(settings s, const log_options& log) {
    std::shared_ptr<engine> e(new engine(std::move(s), log), [](engine* p) {
        if (!p->on_io_thread()) {
            delete p; // joins the I/O thread
            return;
        }
        // The last reference went in a handler on the I/O thread: the loop drains once the
        // shutdown has closed everything, and the thread deletes the engine after run().
        p->dispose_after_run_.store(true, std::memory_order_release);
        p->begin_shutdown();
    });
    e->start();
    return e;
}

engine::~engine() {
    shutdown();
}

void engine::start() {
    rt_.start([this] {
        if (dispose_after_run_.load(std::memory_order_acquire)) {
            // Nobody else references the engine (its deleter ran): the thread is its own
            // (finish() on the I/O thread detaches it).
            rt_.finish();
            delete this;
        }
    });
}

void engine::drain_tries() {
    while (!waiting_tries.empty() && !shut_down()) {
        auto next = std::move(waiting_tries.front());
        waiting_tries.pop_front();
        if (!next(false)) {
            waiting_tries.push_front(std::move(next));
            return;
        }
    }
}

void engine::shutdown() noexcept {
    begin_shutdown();
    // On the I/O thread the loop is still running this very handler; the thread is joined
    // by whoever destroys the engine (or detaches itself, see create()).
    if (!on_io_thread()) rt_.finish();
}

void engine::begin_shutdown() noexcept {
    // The last work the gate lets in: everything posted before it ran first.
    const bool first = rt_.close([this] {
        for (auto& w : holds_)
            if (auto h = w.lock()) h->end_on_shutdown();
        holds_.clear();
        auto tries = std::move(waiting_tries);
        waiting_tries.clear();
        for (auto& t : tries)
            t(true);
        holding.clear();
        idle_.clear();
        auto queued = std::move(batches_);
        batches_.clear();
        std::vector<result> none;
        for (auto& q : queued)
            q.done(make_error_code(errc::cancelled), none);
        if (trim_) trim_->cancel();
        // Acquisitions asleep until a notification wake now and end as cancelled.
        auto sleeping = std::move(sleepers_);
        sleepers_.clear();
        for (auto& [id, z] : sleeping)
            z.wake();
        if (listener_) listener_->close();
        for (auto& w : sessions_)
            if (auto s = w.lock()) s->close();
        sessions_.clear();
    });
    if (first) rt_.release_work();
}

void engine::get_session(session_handler done) {
    if (shut_down()) return done(make_error_code(errc::cancelled), nullptr);
    while (!idle_.empty()) {
        auto s = std::move(idle_.back().first);
        idle_.pop_back();
        if (s->open() && s->idle()) return done({}, std::move(s));
    }
    auto s = std::make_shared<connection>(rt_.io(), settings_);
    // Prune the weak list now and then (sessions end all the time).
    if (sessions_.size() > 64 && sessions_.size() % 64 == 0)
        std::erase_if(sessions_, [](const auto& w) { return w.expired(); });
    sessions_.push_back(s);
    s->connect([this, s, done = std::move(done)](std::error_code ec) {
        if (ec) {
            set_error(settings_->display + ": " + s->error_text());
            return done(ec, nullptr);
        }
        metrics_.connected(false); // every session is a connection of its own (no reconnect)
        done({}, s);
    });
}

void engine::put_session(std::shared_ptr<connection> s) {
    if (!s) return;
    s->on_closed(nullptr);
    if (shut_down() || !s->open() || !s->idle()) {
        s->close();
        return;
    }
    idle_.emplace_back(std::move(s), std::chrono::steady_clock::now());
    if (idle_.size() > settings_->pool) arm_trim();
}

void engine::arm_trim() {
    if (!trim_) trim_ = std::make_unique<asio::steady_timer>(rt_.io());
    if (trim_->expiry() > std::chrono::steady_clock::now()) return; // armed
    // The oldest beyond the pool is closed once it has lingered.
    trim_->expires_at(idle_.front().second + idle_linger);
    trim_->async_wait([this](std::error_code ec) {
        if (ec || shut_down()) return;
        const auto now = std::chrono::steady_clock::now();
        while (idle_.size() > settings_->pool && idle_.front().second + idle_linger <= now) {
            idle_.front().first->close();
            idle_.erase(idle_.begin());
        }
        if (idle_.size() > settings_->pool) arm_trim();
    });
}

void engine::track(const std::shared_ptr<pg_hold>& h) {
    if (holds_.size() > 64 && holds_.size() % 64 == 0)
        std::erase_if(holds_, [](const auto& w) { return w.expired(); });
    holds_.push_back(h);
}

void engine::query(std::vector<statement> stmts, batch_done done) {
    queued_batch b{std::move(stmts), std::move(done)};
    if (querying_ >= std::max<std::size_t>(settings_->pool, 1) && idle_.empty() && !shut_down())
        return batches_.push_back(std::move(b));
    start_batch(std::move(b));
}

void engine::start_batch(queued_batch b) {
    ++querying_;
    get_session(
        [this, b = std::move(b)](std::error_code ec, std::shared_ptr<connection> s) mutable {
            if (!ec) return run_batch(s, std::move(b));
            // The server could not be reached now: the batches behind this one would try the
            // same server, so they fail with it rather than wait for a connect each.
            --querying_;
            auto failed = std::move(batches_);
            batches_.clear();
            std::vector<result> none;
            b.done(ec, none);
            for (auto& q : failed)
                q.done(ec, none);
        });
}

void engine::run_batch(const std::shared_ptr<connection>& s, queued_batch b) {
    s->run(std::move(b.stmts), settings_->request_timeout,
           [this, s, done = std::move(b.done)](std::error_code e, std::vector<result>& r) {
               if (e) set_error(settings_->display + ": " + s->error_text());
               // The next batch first (its caller has waited longer), on this session when
               // it is still good, else on another.
               if (!batches_.empty() && !shut_down()) {
                   auto next = std::move(batches_.front());
                   batches_.pop_front();
                   if (!e && s->open() && s->idle()) {
                       run_batch(s, std::move(next));
                   } else {
                       --querying_;
                       start_batch(std::move(next));
                   }
               } else {
                   --querying_;
                   if (!e) put_session(s);
               }
               done(e, r);
           });
}

void engine::listen(std::function<void(std::error_code)> ready) {
    if (listening_) return ready({});
    listen_waiters_.push_back(std::move(ready));
    if (listener_ || shut_down()) {
        if (shut_down()) {
            auto ws = std::move(listen_waiters_);
            listen_waiters_.clear();
            for (auto& w : ws)
                w(make_error_code(errc::cancelled));
        }
        return;
    }
    auto s = std::make_shared<connection>(rt_.io(), settings_);
    listener_ = s;
    sessions_.push_back(s);
    const auto fail_all = [this](std::error_code ec) {
        listening_ = false;
        listener_.reset();
        auto ws = std::move(listen_waiters_);
        listen_waiters_.clear();
        for (auto& w : ws)
            w(ec);
        // Sleepers wake and try again (they poll until a new session listens).
        auto ss = std::move(sleepers_);
        sleepers_.clear();
        for (auto& [id, z] : ss)
            z.wake();
    };
    s->connect([this, s, fail_all](std::error_code ec) {
        if (ec) return fail_all(ec);
        metrics_.connected(false);
        s->on_notify([this](std::string_view channel, std::string_view payload) {
            std::vector<std::function<void()>> wake;
            for (auto it = sleepers_.begin(); it != sleepers_.end();)
                if (it->second.payload == payload && it->second.channel == channel) {
                    wake.push_back(std::move(it->second.wake));
                    it = sleepers_.erase(it);
                } else {
                    ++it;
                }
            for (auto& w : wake)
                w();
        });
        s->on_closed(fail_all);
        s->run({{"LISTEN " + lease_channel}, {"LISTEN " + election_channel}},
               settings_->request_timeout,
               [this, fail_all](std::error_code e, std::vector<result>& r) {
                   if (e || r.size() != 2 || !r[0].ok() || !r[1].ok())
                       return fail_all(e ? e : make_error_code(errc::server_error));
                   listening_ = true;
                   auto ws = std::move(listen_waiters_);
                   listen_waiters_.clear();
                   for (auto& w : ws)
                       w({});
               });
    });
}

std::uint64_t engine::on_notified(const std::string& channel, const std::string& payload,
                                  std::function<void()> wake) {
    const auto id = next_sleeper_++;
    sleepers_.emplace(id, sleeper{channel, payload, std::move(wake)});
    return id;
}

void engine::forget(std::uint64_t id) {
    sleepers_.erase(id);
}

void engine::set_error(std::string text) {
    std::lock_guard lk(mu_);
    last_error_ = std::move(text);
}

std::string engine::last_error() const {
    std::lock_guard lk(mu_);
    return last_error_;
}

// --- pg_hold ----------------------------------------------------------------------------------

void pg_hold::release_blocking(std::error_code& ec) {
    ec.clear();
    if (engine_->on_io_thread()) return release_async([](std::error_code) {});
    ec = engine_->call<std::error_code>(
        [h = self()](std::function<void(std::error_code)> done) { h->release_io(std::move(done)); },
        lost() ? make_error_code(errc::not_owner) : std::error_code{});
}

void pg_hold::release_async(std::function<void(std::error_code)> done) {
    if (!engine_->post([h = self(), done] { h->release_io(done); }))
        done(lost() ? make_error_code(errc::not_owner) : std::error_code{});
}

void pg_hold::extend(std::chrono::milliseconds lease, std::error_code& ec) {
    ec.clear();
    if (lease < std::chrono::milliseconds(1) || engine_->on_io_thread()) {
        ec = make_error_code(errc::invalid_argument);
        return;
    }
    ec = engine_->call<std::error_code>(
        [h = self(), lease](std::function<void(std::error_code)> done) {
            h->extend_io(lease, std::move(done));
        },
        make_error_code(errc::not_owner));
}

void pg_hold::extend_async(std::chrono::milliseconds lease,
                           std::function<void(std::error_code)> done) {
    if (lease < std::chrono::milliseconds(1)) return done(make_error_code(errc::invalid_argument));
    if (!engine_->post([h = self(), lease, done] { h->extend_io(lease, done); }))
        done(make_error_code(errc::not_owner));
}

void pg_hold::with_metrics(const std::function<void(client_metrics&)>& f) const {
    f(engine_->metrics());
}

asio::any_io_executor pg_hold::executor() const {
    if (engine_->shut_down()) return {};
    return engine_->io().get_executor();
}

} // namespace dlock::detail::pg
