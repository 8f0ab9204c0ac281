#include "core/loss_signal.hpp"

#include <memory>

namespace dlock::detail {

bool loss_signal::mark_released() noexcept {
    const bool first = !released_.exchange(true, std::memory_order_acq_rel);
    set_valid_until(clock::time_point{});
    return first;
}

loss_signal::~loss_signal() {
    delete waiters_.load(std::memory_order_acquire);
}

loss_signal::loss_waiters& loss_signal::made_waiters() const {
    auto* w = waiters_.load(std::memory_order_seq_cst);
    if (w) return *w;
    auto fresh = std::make_unique<loss_waiters>();
    if (waiters_.compare_exchange_strong(w, fresh.get(), std::memory_order_seq_cst))
        return *fresh.release();
    return *w; // another thread made them first
}

std::stop_token loss_signal::stop_token() const {
    auto& w = made_waiters();
    // A loss marked before the waiters existed found none to stop.
    if (lost_.load(std::memory_order_seq_cst)) w.stop.request_stop();
    return w.stop.get_token();
}

bool loss_signal::mark_lost(std::optional<loss_cause> cause) {
    if (lost_.exchange(true, std::memory_order_seq_cst)) return false;
    if (cause) set_cause(*cause);
    set_valid_until(clock::time_point{});
    before_loss();
    auto* w = waiters_.load(std::memory_order_seq_cst);
    if (w == nullptr) return true; // nobody asked: stop_token() and on_lost() see lost_
    w->stop.request_stop();
    std::vector<std::function<void()>> cbs;
    {
        std::lock_guard lk(w->mu);
        cbs.swap(w->callbacks);
    }
    for (auto& cb : cbs)
        cb();
    return true;
}

void loss_signal::on_lost(std::function<void()> cb) {
    auto& w = made_waiters();
    {
        std::lock_guard lk(w.mu);
        if (!lost_.load(std::memory_order_seq_cst)) {
            w.callbacks.push_back(std::move(cb));
            return;
        }
    }
    cb();
}

} // namespace dlock::detail
