// detail::hold's warning stage, for every backend: a lease whose remaining validity falls
// below its margin without a renewal warns before it is lost (issue 23, item 4).
//
// One timer per watched hold, on the backend's I/O thread, made by the first watcher (a hold
// nobody watches costs nothing). It is set to valid_until - margin; when it fires it reads
// valid_until again: a renewal that moved it sets the timer again (once per renewal period),
// otherwise the hold warns. A loss warns too, first (loss_signal::before_loss), if the timer
// has not (a key deleted by someone else gives no time to warn); a release ends the watch
// without a warning.
//
// The loss's log record lives here too (hold::log_loss(), the same for every backend).
//
// acquire_options::max_hold lives here too: the same stage, made when the hold is handed out,
// carries the hold's end (grant + max_hold, which caps held_until(), so the warning comes a
// margin before it) and a second timer for it. When that fires, the backend's own
// release_async() is started (each backend stops renewing and deletes the lock on the server)
// and, one post later (after a backend's posted release has started and no longer sees a live
// hold as lost), the hold is marked lost with loss_cause::max_hold.
#include "core/hold.hpp"
#include "core/kinds.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"

#include <asio/execution/context.hpp>
#include <asio/execution_context.hpp>
#include <asio/post.hpp>
#include <asio/query.hpp>
#include <asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

namespace dlock::detail {

using clock = std::chrono::steady_clock;

namespace {

/// The warning timers alive on one io_context. A lease may outlive its client, and with it its
/// warning stage; a timer destroyed after its io_context would touch freed memory. So each
/// context has this service (asio shuts a context's services down before it destroys any), and
/// its shutdown drops every timer still registered; a stage leaves the registry when it goes.
/// The registry is shared, so a stage that outlives the context still finds its mutex.
struct timer_registry {
    std::mutex mu;
    bool closed = false;                           // guarded by mu
    std::unordered_set<hold::warning_stage*> live; // guarded by mu
};

class warning_timers final : public asio::execution_context::service {
public:
    using key_type = warning_timers;
    explicit warning_timers(asio::execution_context& ctx)
        : asio::execution_context::service(ctx) {}
    const std::shared_ptr<timer_registry>& registry() const noexcept { return reg_; }

private:
    void shutdown() override; // below: it needs warning_stage

    std::shared_ptr<timer_registry> reg_ = std::make_shared<timer_registry>();
};

} // namespace

struct hold::warning_stage {
    warning_stage(const asio::any_io_executor& io, clock::time_point until)
        : max_until(until) {
        if (!io) return;
        auto& ctx = asio::query(io, asio::execution::context);
        reg = asio::use_service<warning_timers>(ctx).registry();
        std::lock_guard lk(reg->mu);
        if (reg->closed) return;
        timer.emplace(io);
        if (until != clock::time_point{}) end_timer.emplace(io);
        reg->live.insert(this);
    }
    ~warning_stage() {
        if (!reg) return;
        std::lock_guard lk(reg->mu);
        reg->live.erase(this);
        timer.reset();
        end_timer.reset();
    }
    warning_stage(const warning_stage&) = delete;
    warning_stage& operator=(const warning_stage&) = delete;

    std::shared_ptr<timer_registry> reg;     ///< of the timer's io_context (none: no timer)
    std::optional<asio::steady_timer> timer; ///< used on the I/O thread only; none: no backend
    /// grant + max_hold; the epoch: no max_hold. Set at construction, then only read.
    const clock::time_point max_until;
    std::optional<asio::steady_timer> end_timer; ///< max_hold's (I/O thread); none: no max_hold
    clock::duration margin{};                    ///< set by the first arm(), on the I/O thread
    bool armed = false;                          ///< the margin is set (I/O thread)
    std::atomic<bool> warned{false};
    std::stop_source stop; ///< requested by warn()
    std::mutex mu;
    std::vector<std::function<void()>> callbacks; // guarded by mu
};

void warning_timers::shutdown() {
    std::lock_guard lk(reg_->mu);
    reg_->closed = true;
    for (auto* w : reg_->live) {
        w->timer.reset();
        w->end_timer.reset();
    }
    reg_->live.clear();
}

hold::~hold() {
    delete warning_.load(std::memory_order_acquire);
}

clock::time_point hold::held_until() const noexcept {
    const auto until = valid_until();
    const auto* w = warning_.load(std::memory_order_acquire);
    if (!w || w->max_until == clock::time_point{}) return until;
    return std::min(until, w->max_until);
}

bool hold::warned() const noexcept {
    const auto* w = warning_.load(std::memory_order_acquire);
    return w && w->warned.load(std::memory_order_acquire);
}

hold::warning_stage& hold::stage(clock::time_point max_until) {
    if (auto* w = warning_.load(std::memory_order_acquire)) return *w;
    // An ended hold needs no timer (and its backend may be gone).
    const auto io = lost() || released() ? asio::any_io_executor{} : executor();
    auto fresh = std::make_unique<warning_stage>(io, max_until);
    warning_stage* expected = nullptr;
    if (!warning_.compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel))
        return *expected; // another thread made it first
    auto& w = *fresh.release();
    if (io) // the timers are touched on the I/O thread only
        asio::post(io, [h = shared_from_this(), &w] {
            arm(h, w);
            arm_end(h, w);
        });
    else if (lost()) // nothing renews: only a loss can warn
        warn(*this, w);
    return w;
}

void hold::before_loss() {
    if (auto* w = warning_.load(std::memory_order_acquire)) warn(*this, *w);
    if (cause()) log_loss(); // else the backend reports once it knows (Redis's diagnosis)
}

std::string_view hold::kind_label() const noexcept {
    const auto k = kind_.load(std::memory_order_relaxed);
    return k < 0 ? std::string_view{} : info_of(static_cast<lock_kind>(k)).metrics_label;
}

void hold::log_loss() const noexcept {
    const auto c = cause();
    if (!c || loss_reported_.exchange(true, std::memory_order_acq_rel)) return;
    try {
        with_metrics([&](client_metrics& m) {
            const auto& sink = m.log();
            if (!log_enabled(sink, log_level::warning)) return;
            const auto kind = kind_label();
            if (kind.empty())
                log(sink, log_level::warning, log_message::lock_lost,
                    {{"lock", name()}, {"cause", to_string(*c)}});
            else
                log(sink, log_level::warning, log_message::lock_lost,
                    {{"lock", name()}, {"kind", kind}, {"cause", to_string(*c)}});
        });
    } catch (...) { // with_metrics' std::function: nothing to report then
    }
}

void hold::arm(const std::shared_ptr<hold>& h, warning_stage& w) {
    if (!w.timer) return; // the hold ended, or its io_context is going (warning_timers)
    if (h->released() || h->lost() || w.warned.load()) {
        if (h->lost()) warn(*h, w); // lost before the first arm
        w.timer.reset();            // a release ends the watch; a warning is once
        return;
    }
    const auto now = clock::now();
    const auto until = h->held_until();
    if (!w.armed) {
        w.armed = true;
        const auto lease = h->lease_length();
        w.margin = h->margin_ms_ >= 0  ? clock::duration(std::chrono::milliseconds(h->margin_ms_))
                   : lease.count() > 0 ? clock::duration(lease) / 3
                                       : std::max(until - now, clock::duration{}) / 3;
    }
    if (until - now <= w.margin) return warn(*h, w);
    w.timer->expires_at(until - w.margin);
    // The stage lives as long as the hold: alive whenever the weak pointer locks.
    w.timer->async_wait([wh = h->weak_from_this(), &w](std::error_code ec) {
        if (ec) return;
        if (auto hh = wh.lock()) arm(hh, w);
    });
}

void hold::warn(const hold& h, warning_stage& w) {
    if (w.warned.exchange(true, std::memory_order_acq_rel)) return;
    h.with_metrics([](client_metrics& m) { m.warning(); });
    w.stop.request_stop();
    std::vector<std::function<void()>> cbs;
    {
        std::lock_guard lk(w.mu);
        cbs.swap(w.callbacks);
    }
    for (auto& cb : cbs)
        cb();
}

void hold::set_max_hold(std::optional<std::chrono::milliseconds> d) {
    if (d) stage(clock::now() + *d);
}

void hold::arm_end(const std::shared_ptr<hold>& h, warning_stage& w) {
    if (!w.end_timer) return; // no max_hold, or the io_context is going
    w.end_timer->expires_at(w.max_until);
    w.end_timer->async_wait([wh = h->weak_from_this(), &w](std::error_code ec) {
        if (ec) return;
        if (auto hh = wh.lock()) end_at_max_hold(hh, w);
    });
}

void hold::end_at_max_hold(const std::shared_ptr<hold>& h, warning_stage& w) {
    w.end_timer.reset(); // once
    if (h->released() || h->lost()) return;
    // The backend's own release: it stops renewing and deletes the lock (best-effort; a
    // failure leaves the lock to expire with its lease or session). Its result is not ours
    // to report: the holder learns of the end from the loss below.
    h->release_async([](std::error_code) {});
    const auto io = h->executor();
    auto lose = [h] {
        if (!h->mark_lost(loss_cause::max_hold)) return;
        h->with_metrics([](client_metrics& m) { m.loss(loss_cause::max_hold); });
    };
    if (io)
        asio::post(io, std::move(lose));
    else
        lose();
}

std::stop_token hold::warning_token() {
    return stage().stop.get_token();
}

void hold::on_warning(std::function<void()> cb) {
    auto& w = stage();
    {
        std::lock_guard lk(w.mu);
        if (!w.warned.load(std::memory_order_acquire)) {
            w.callbacks.push_back(std::move(cb));
            return;
        }
    }
    cb();
}

} // namespace dlock::detail
