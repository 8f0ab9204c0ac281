// core::loss_signal: how a held lock tells its holder that it is gone, for any backend.
// valid_until (steady clock, a lower bound), lost/released flags, a stop_source and callbacks.
// The stop_source and the callbacks are made by the first stop_token() or on_lost(): most
// holds are never asked for either, and 10,000 held locks must stay under 1 KiB each (the
// pair cost about 110 bytes per hold, a third of it a stop_source's own allocation).
//
// Thread safety: every member from any thread. mark_lost() runs the callbacks on the thread
// that calls it: the client's I/O thread when the watchdog or a deadline finds the loss, the
// caller's thread when release(), extend() or unlock() learns it from the server, or
// on_lost()'s caller when the hold was lost already.
#pragma once

#include <dlock/metrics.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
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
    /// Requested on loss (at once when the loss came first).
    std::stop_token stop_token() const;
    /// Runs `cb` once on loss; at once, on this thread, if already lost.
    void on_lost(std::function<void()> cb);
    /// The loss's cause (lease::loss_cause()); nullopt until known.
    std::optional<loss_cause> cause() const noexcept {
        const int c = cause_.load(std::memory_order_acquire);
        if (c < 0) return std::nullopt;
        return static_cast<loss_cause>(c);
    }
    /// Records the cause when it is learnt after the loss (Redis's "not yours" diagnosis); the
    /// first cause recorded stays.
    void set_cause(loss_cause c) const noexcept {
        int none = -1;
        cause_.compare_exchange_strong(none, static_cast<int>(c), std::memory_order_acq_rel);
    }

protected:
    /// Normal end: valid_until in the past, stop not requested. Returns false if it had ended.
    bool mark_released() noexcept;
    /// Loss: valid_until in the past, stop requested, callbacks run (once). Returns false if
    /// it was lost already. `cause`: recorded first (set_cause), when known.
    bool mark_lost(std::optional<loss_cause> cause = std::nullopt);
    /// Runs in mark_lost() before the stop token and the loss callbacks (the hold's warning
    /// comes first: core/warning.cpp).
    virtual void before_loss() {}
    loss_signal() = default;
    virtual ~loss_signal();
    loss_signal(loss_signal&&) = delete;
    loss_signal& operator=(loss_signal&&) = delete;
    loss_signal(const loss_signal&) = delete;
    loss_signal& operator=(const loss_signal&) = delete;

private:
    std::atomic<std::int64_t> valid_until_ns_{0};
    std::atomic<bool> lost_{false};
    std::atomic<bool> released_{false};
    mutable std::atomic<int> cause_{-1}; ///< a loss_cause; -1: none (yet); set_cause()
    /// The stop source and the callbacks, made once by the first stop_token() or on_lost().
    struct loss_waiters {
        std::stop_source stop;
        std::mutex mu;
        std::vector<std::function<void()>> callbacks; // guarded by mu
    };
    loss_waiters& made_waiters() const;
    // The loss and the waiters' making order each other through seq_cst (lost_ then waiters_
    // in mark_lost, waiters_ then lost_ in stop_token/on_lost): one side always sees the other.
    mutable std::atomic<loss_waiters*> waiters_{nullptr};
};

} // namespace dlock::detail
