// detail::hold's warning stage, for every backend: a lease whose remaining validity falls
// below its margin without a renewal warns before it is lost (issue 23, item 4).
//
// One timer per watched hold, on the backend's I/O thread, made by the first watcher (a hold
// nobody watches costs nothing). It is set to valid_until - margin; when it fires it reads
// valid_until again: a renewal that moved it sets the timer again (once per renewal period),
// otherwise the hold warns. A loss warns too, first (loss_signal::before_loss), if the timer
// has not (a key deleted by someone else gives no time to warn); a release ends the watch
// without a warning.
#include "core/hold.hpp"

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
    explicit warning_stage(const asio::any_io_executor& io) {
        if (!io) return;
        auto& ctx = asio::query(io, asio::execution::context);
        reg = asio::use_service<warning_timers>(ctx).registry();
        std::lock_guard lk(reg->mu);
        if (reg->closed) return;
        timer.emplace(io);
        reg->live.insert(this);
    }
    ~warning_stage() {
        if (!reg) return;
        std::lock_guard lk(reg->mu);
        reg->live.erase(this);
        timer.reset();
    }
    warning_stage(const warning_stage&) = delete;
    warning_stage& operator=(const warning_stage&) = delete;

    std::shared_ptr<timer_registry> reg;     ///< of the timer's io_context (none: no timer)
    std::optional<asio::steady_timer> timer; ///< used on the I/O thread only; none: no backend
    clock::duration margin{};                ///< set by the first arm(), on the I/O thread
    bool armed = false;                      ///< the margin is set (I/O thread)
    std::atomic<bool> warned{false};
    std::stop_source stop; ///< requested by warn()
    std::mutex mu;
    std::vector<std::function<void()>> callbacks; // guarded by mu
};

void warning_timers::shutdown() {
    std::lock_guard lk(reg_->mu);
    reg_->closed = true;
    for (auto* w : reg_->live)
        w->timer.reset();
    reg_->live.clear();
}

hold::~hold() {
    delete warning_.load(std::memory_order_acquire);
}

bool hold::warned() const noexcept {
    const auto* w = warning_.load(std::memory_order_acquire);
    return w && w->warned.load(std::memory_order_acquire);
}

hold::warning_stage& hold::stage() {
    if (auto* w = warning_.load(std::memory_order_acquire)) return *w;
    // An ended hold needs no timer (and its backend may be gone).
    const auto io = lost() || released() ? asio::any_io_executor{} : executor();
    auto fresh = std::make_unique<warning_stage>(io);
    warning_stage* expected = nullptr;
    if (!warning_.compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel))
        return *expected; // another thread made it first
    auto& w = *fresh.release();
    if (io) // the timer is touched on the I/O thread only
        asio::post(io, [h = shared_from_this(), &w] { arm(h, w); });
    else if (lost()) // nothing renews: only a loss can warn
        warn(w);
    return w;
}

void hold::before_loss() {
    if (auto* w = warning_.load(std::memory_order_acquire)) warn(*w);
}

void hold::arm(const std::shared_ptr<hold>& h, warning_stage& w) {
    if (!w.timer) return; // the hold ended, or its io_context is going (warning_timers)
    if (h->released() || h->lost() || w.warned.load()) {
        if (h->lost()) warn(w); // lost before the first arm
        w.timer.reset();        // a release ends the watch; a warning is once
        return;
    }
    const auto now = clock::now();
    const auto until = h->valid_until();
    if (!w.armed) {
        w.armed = true;
        const auto lease = h->lease_length();
        w.margin = h->margin_ms_ >= 0  ? clock::duration(std::chrono::milliseconds(h->margin_ms_))
                   : lease.count() > 0 ? clock::duration(lease) / 3
                                       : std::max(until - now, clock::duration{}) / 3;
    }
    if (until - now <= w.margin) return warn(w);
    w.timer->expires_at(until - w.margin);
    // The stage lives as long as the hold: alive whenever the weak pointer locks.
    w.timer->async_wait([wh = h->weak_from_this(), &w](std::error_code ec) {
        if (ec) return;
        if (auto hh = wh.lock()) arm(hh, w);
    });
}

void hold::warn(warning_stage& w) {
    if (w.warned.exchange(true, std::memory_order_acq_rel)) return;
    w.stop.request_stop();
    std::vector<std::function<void()>> cbs;
    {
        std::lock_guard lk(w.mu);
        cbs.swap(w.callbacks);
    }
    for (auto& cb : cbs)
        cb();
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
