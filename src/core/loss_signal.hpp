// core::loss_signal: how a held lock tells its holder that it is gone, for any backend.
// valid_until (steady clock, a lower bound), lost/released flags, a stop_source and callbacks.
//
// Thread safety: every member from any thread. mark_lost() runs the callbacks on the thread
// that calls it: the client's I/O thread when the watchdog or a deadline finds the loss, the
// caller's thread when release(), extend() or unlock() learns it from the server, or
// on_lost()'s caller when the hold was lost already.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <stop_token>
#include <vector>

namespace dlock::detail {

class loss_signal {
public:
    using clock = std::chrono::steady_clock;

    clock::time_point valid_until() const noexcept {
        return clock::time_point(
            std::chrono::nanoseconds(valid_until_ns_.load(std::memory_order_acquire)));
    }
    void set_valid_until(clock::time_point t) noexcept {
        valid_until_ns_.store(
            std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count(),
            std::memory_order_release);
    }
    bool lost() const noexcept { return lost_.load(std::memory_order_acquire); }
    bool released() const noexcept { return released_.load(std::memory_order_acquire); }
    std::stop_token stop_token() const noexcept { return stop_.get_token(); }
    /// Runs `cb` once on loss; at once, on this thread, if already lost.
    void on_lost(std::function<void()> cb);

protected:
    /// Normal end: valid_until in the past, stop not requested. Returns false if it had ended.
    bool mark_released() noexcept;
    /// Loss: valid_until in the past, stop requested, callbacks run (once). Returns false if
    /// it was lost already.
    bool mark_lost();
    /// Runs in mark_lost() before the stop token and the loss callbacks (the hold's warning
    /// comes first: core/warning.cpp).
    virtual void before_loss() {}
    loss_signal() = default;
    virtual ~loss_signal() = default;
    loss_signal(loss_signal&&) = delete;
    loss_signal& operator=(loss_signal&&) = delete;
    loss_signal(const loss_signal&) = delete;
    loss_signal& operator=(const loss_signal&) = delete;

private:
    std::atomic<std::int64_t> valid_until_ns_{0};
    std::atomic<bool> lost_{false};
    std::atomic<bool> released_{false};
    std::stop_source stop_;
    std::mutex cb_mu_;
    std::vector<std::function<void()>> callbacks_; // guarded by cb_mu_
};

} // namespace dlock::detail
