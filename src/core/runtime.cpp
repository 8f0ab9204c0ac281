#include "core/runtime.hpp"

namespace dlock::detail {

runtime::runtime(int concurrency_hint)
    : io_(concurrency_hint)
    , work_(asio::make_work_guard(io_)) {}

runtime::~runtime() {
    if (!running()) return;
    if (!on_io_thread()) {
        release_work();
        io_.stop();
    }
    finish();
}

void runtime::start(std::function<void()> after_run) {
    if (running()) return;
    thread_ = std::thread([this, after_run = std::move(after_run)] {
        thread_id_.store(std::this_thread::get_id(), std::memory_order_release);
        io_.run();
        {
            std::lock_guard lk(ran_mu_);
            ran_ = true;
        }
        ran_cv_.notify_all();
        // May destroy the runtime: `this` is not touched after it.
        if (after_run) after_run();
    });
    thread_id_.store(thread_.get_id(), std::memory_order_release);
}

bool runtime::try_post(std::function<void()> f) {
    std::lock_guard lk(gate_mu_);
    if (closed_.load(std::memory_order_relaxed)) return false;
    asio::post(io_, std::move(f));
    return true;
}

bool runtime::close(std::function<void()> last) {
    std::lock_guard lk(gate_mu_);
    if (closed_.load(std::memory_order_relaxed)) return false;
    closed_.store(true, std::memory_order_release);
    if (last) asio::post(io_, std::move(last));
    return true;
}

bool runtime::finish(std::optional<std::chrono::nanoseconds> bound) noexcept {
    std::lock_guard lk(join_mu_);
    if (!thread_.joinable()) return !on_io_thread();
    if (on_io_thread()) {
        thread_.detach();
        return false;
    }
    if (bound) {
        std::unique_lock rl(ran_mu_);
        if (!ran_cv_.wait_for(rl, *bound, [this] { return ran_; })) io_.stop();
    }
    thread_.join();
    return true;
}

} // namespace dlock::detail
