// core/runtime.hpp: the one I/O runtime of every backend (the Redis client, Redlock, ZooKeeper,
// PostgreSQL): an asio::io_context run by one I/O thread, post, the blocking bridge `call`, and
// the pieces of a shutdown (let the loop run out of work, stop it after what is queued, join
// or detach the thread, a bounded wait for the loop to return). It has no sockets and decides
// no backend's drain: each backend says what to cancel and close first (its own handler on
// this loop), then ends the loop with these pieces, in the order its guarantees need (see
// each backend's shutdown and ARCHITECTURE.md, "Threads").
//
// Thread safety: every member may be called from any thread unless marked. post() is a plain
// asio::post on the loop's executor: no lock, no allocation beyond asio's own (the Redis hot
// path posts through it). try_post() and call() take the gate's mutex: work posted through
// them is either queued before close()'s last handler or refused, never queued on a loop
// that has already returned (where a blocking caller would wait for ever).
//
// Lifetime: the owner calls finish() before it destroys what the loop's handlers use; the
// destructor only backs that up (stops the loop and joins, or detaches on the I/O thread).
#pragma once

#include "core/completion_flag.hpp"

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace dlock::detail {

/// A value one thread hands to another that blocks for it: the first set() counts, later
/// ones are ignored. Shared (shared_ptr) when the waiter may give up before it is set.
template <class T>
class one_shot {
public:
    /// Any thread; only the first call stores its value and wakes the waiter.
    void set(T v) {
        if (once_.exchange(true, std::memory_order_acq_rel)) return;
        value_.emplace(std::move(v));
        flag_.set();
    }
    /// Blocks until set() (one thread); returns the value.
    T take() {
        flag_.wait();
        return std::move(*value_);
    }
    /// Blocks until set() or for at most `d` (one thread); nullopt on timeout.
    std::optional<T> take_for(std::chrono::nanoseconds d) {
        if (!flag_.wait_for(d)) return std::nullopt;
        return std::move(value_);
    }

private:
    std::atomic<bool> once_{false};
    std::optional<T> value_;
    completion_flag flag_;
};

class runtime {
public:
    using executor_type = asio::io_context::executor_type;

    /// `concurrency_hint`: asio's (1 when nothing but the I/O thread runs the loop).
    explicit runtime(int concurrency_hint = ASIO_CONCURRENCY_HINT_DEFAULT);
    ~runtime();
    runtime(const runtime&) = delete;
    runtime& operator=(const runtime&) = delete;

    asio::io_context& io() noexcept { return io_; }
    executor_type executor() const noexcept { return io_.get_executor(); }

    /// Starts the I/O thread (once). `after_run` runs on it after the loop returned (a
    /// backend that must delete itself there, see postgres/engine.hpp); it may destroy the
    /// runtime, which is not touched after it.
    void start(std::function<void()> after_run = {});
    /// Whether the thread was started and not yet joined or detached.
    bool running() const noexcept { return thread_.joinable(); }
    bool on_io_thread() const noexcept {
        return std::this_thread::get_id() == thread_id_.load(std::memory_order_acquire);
    }

    /// Runs `f` on the I/O thread: asio::post on the loop's executor, nothing else.
    template <class F>
    void post(F&& f) {
        asio::post(io_, std::forward<F>(f));
    }
    /// As post(), unless close() was called: then false and `f` is dropped.
    bool try_post(std::function<void()> f);
    /// Refuses try_post() and call() from now on; `last` is posted as the last work they
    /// let in. False (and `last` dropped) when already closed.
    bool close(std::function<void()> last);
    bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }

    /// The blocking bridge: runs `start(complete)` on the I/O thread and blocks until
    /// `complete(value)` is called (the first call counts; later ones are ignored).
    /// Returns `fallback` at once on the I/O thread (it would wait for itself) or when the
    /// runtime is closed, and after `bound` when given and nothing completed by then.
    template <class T>
    T call(std::function<void(std::function<void(T)>)> start, T fallback,
           std::optional<std::chrono::nanoseconds> bound = std::nullopt);

    ///@{
    /// The pieces of a shutdown, used in this order by the backends.
    /// Drops the work guard: the loop returns once it has nothing left to do.
    void release_work() noexcept { work_.reset(); }
    /// Posts a stop: the handlers queued before it run, then the loop returns.
    void stop_after_queued() {
        asio::post(io_, [this] { io_.stop(); });
    }
    /// Ends the I/O thread: on it, detaches it (the loop goes on after the caller returns;
    /// false); elsewhere waits up to `bound` (when given) for the loop to return, stops the
    /// loop if it has not, and joins (true). Nothing when not running. Any thread, idempotent.
    bool finish(std::optional<std::chrono::nanoseconds> bound = std::nullopt) noexcept;
    ///@}

private:
    mutable asio::io_context io_;
    asio::executor_work_guard<executor_type> work_;
    std::thread thread_;
    std::atomic<std::thread::id> thread_id_{};
    std::mutex join_mu_;              // finish(): one joiner
    std::mutex gate_mu_;              // try_post() against close()
    std::atomic<bool> closed_{false}; // written under gate_mu_
    std::mutex ran_mu_;
    bool ran_ = false; // guarded by ran_mu_: the loop returned
    std::condition_variable ran_cv_;
};

template <class T>
T runtime::call(std::function<void(std::function<void(T)>)> start, T fallback,
                std::optional<std::chrono::nanoseconds> bound) {
    if (on_io_thread()) return fallback;
    auto slot = std::make_shared<one_shot<T>>();
    if (!try_post(
            [slot, start = std::move(start)] { start([slot](T v) { slot->set(std::move(v)); }); }))
        return fallback;
    if (!bound) return slot->take();
    auto v = slot->take_for(*bound);
    return v ? std::move(*v) : std::move(fallback);
}

} // namespace dlock::detail
