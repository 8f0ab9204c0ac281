#include "core/delivering_observer.hpp"

namespace dlock::detail {

void delivering_observer::stop() noexcept {
    if (in_cb_.load(std::memory_order_acquire) == std::this_thread::get_id()) {
        stopped_.store(true, std::memory_order_release); // the running callback is the last
        return;
    }
    std::lock_guard lk(cb_mu_);
    stopped_.store(true, std::memory_order_release);
    cb_ = nullptr;
}

void delivering_observer::finish_first(std::error_code ec) {
    if (auto f = std::move(first_)) f(ec);
    first_ = nullptr;
}

void delivering_observer::deliver(std::optional<leader_info> v) {
    if (!delivered_ || v != last_) {
        delivered_ = true;
        last_ = v;
        std::lock_guard lk(cb_mu_);
        if (!stopped() && cb_) {
            in_cb_.store(std::this_thread::get_id(), std::memory_order_release);
            try {
                cb_(v);
            } catch (...) {
                // A callback must not throw; its exception is dropped (the I/O thread goes on).
            }
            in_cb_.store(std::thread::id{}, std::memory_order_release);
            if (stopped()) cb_ = nullptr;
        }
    }
    if (first_) finish_first({});
}

} // namespace dlock::detail
