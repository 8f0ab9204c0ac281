#include "core/loss_signal.hpp"

namespace dlock::detail {

bool loss_signal::mark_released() noexcept {
    const bool first = !released_.exchange(true, std::memory_order_acq_rel);
    set_valid_until(clock::time_point{});
    return first;
}

bool loss_signal::mark_lost(std::optional<loss_cause> cause) {
    if (lost_.exchange(true, std::memory_order_acq_rel)) return false;
    if (cause) set_cause(*cause);
    set_valid_until(clock::time_point{});
    before_loss();
    stop_.request_stop();
    std::vector<std::function<void()>> cbs;
    {
        std::lock_guard lk(cb_mu_);
        cbs.swap(callbacks_);
    }
    for (auto& cb : cbs)
        cb();
    return true;
}

void loss_signal::on_lost(std::function<void()> cb) {
    {
        std::lock_guard lk(cb_mu_);
        if (!lost()) {
            callbacks_.push_back(std::move(cb));
            return;
        }
    }
    cb();
}

} // namespace dlock::detail
