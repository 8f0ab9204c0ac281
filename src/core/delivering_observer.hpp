// core/delivering_observer.hpp: what every backend's election observer (core/observer.hpp)
// shares: the callback, delivering a state only when it differs from the last one delivered,
// the completion of the first delivery (observe() returns after it), and stop() as the
// observer contract has it. A backend's observer derives from it and only finds the states
// (ZooKeeper: zookeeper/observe.cpp; etcd: etcd/observe.cpp).
//
// Stopping: deliveries run under cb_mu_ and check stopped(); stop() takes cb_mu_ (so a callback
// running on the I/O thread finishes first) unless it is called from inside the callback, where
// it only marks the observer stopped and that callback is the last.
//
// Thread safety: stop() and stopped() from any thread; everything else on the backend's I/O
// thread.
#pragma once

#include "core/lock_backend.hpp"
#include "core/observer.hpp"

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

namespace dlock::detail {

class delivering_observer : public observer {
public:
    explicit delivering_observer(lock_backend::observe_fn cb)
        : cb_(std::move(cb)) {}

    void stop() noexcept override;

protected:
    bool stopped() const noexcept { return stopped_.load(std::memory_order_acquire); }
    /// What the start completes with: {} after the first delivery, or the error that prevented
    /// it (finish_first()).
    void await_first(std::function<void(std::error_code)> first) { first_ = std::move(first); }
    bool awaiting_first() const noexcept { return static_cast<bool>(first_); }
    void finish_first(std::error_code ec);
    /// Runs the callback with `v` unless it equals the last state delivered (the first state
    /// is always delivered), then completes the first delivery. An exception from the callback
    /// is dropped (the I/O thread goes on).
    void deliver(std::optional<leader_info> v);
    bool delivered() const noexcept { return delivered_; }

private:
    // I/O thread only:
    bool delivered_ = false;
    std::optional<leader_info> last_{};
    std::function<void(std::error_code)> first_{};
    // Any thread:
    std::mutex cb_mu_;
    lock_backend::observe_fn cb_; // guarded by cb_mu_
    std::atomic<bool> stopped_{false};
    std::atomic<std::thread::id> in_cb_{};
};

} // namespace dlock::detail
