// completion_flag: one thread blocks until another signals, with exactly one futex wait and at
// most one futex wake per use. libstdc++'s std::atomic::wait spins with sched_yield before it
// sleeps, which on a client pinned to one CPU delays the very I/O thread that will signal it
// (BENCHMARKS.md: sched_yield calls per command and a slower sequential round trip).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace dlock::detail {

class completion_flag {
public:
    /// Signals the waiter (any thread, once).
    void set() noexcept {
        if (state_.exchange(done, std::memory_order_acq_rel) == waiting)
            ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAKE_PRIVATE, 1,
                      nullptr, nullptr, 0);
    }
    /// Blocks until set() (one thread).
    void wait() noexcept {
        std::uint32_t s = idle;
        if (!state_.compare_exchange_strong(s, waiting, std::memory_order_acq_rel) && s == done)
            return;
        while (state_.load(std::memory_order_acquire) != done)
            ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAIT_PRIVATE,
                      waiting, nullptr, nullptr, 0);
    }
    /// Blocks until set() or for at most `d` (one thread); true when set. After a timeout a
    /// later set() is harmless (the flag must still be alive: share it, as one_shot does).
    bool wait_for(std::chrono::nanoseconds d) noexcept {
        const auto deadline = std::chrono::steady_clock::now() + d;
        std::uint32_t s = idle;
        if (!state_.compare_exchange_strong(s, waiting, std::memory_order_acq_rel) && s == done)
            return true;
        while (state_.load(std::memory_order_acquire) != done) {
            const auto left = deadline - std::chrono::steady_clock::now();
            if (left <= std::chrono::nanoseconds::zero()) return false;
            const auto secs = std::chrono::duration_cast<std::chrono::seconds>(left);
            const timespec ts{static_cast<time_t>(secs.count()),
                              static_cast<long>((left - secs).count())};
            // A relative timeout, measured on CLOCK_MONOTONIC.
            ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&state_), FUTEX_WAIT_PRIVATE,
                      waiting, &ts, nullptr, 0);
        }
        return true;
    }
    bool is_set() const noexcept { return state_.load(std::memory_order_acquire) == done; }

private:
    static constexpr std::uint32_t idle = 0, waiting = 1, done = 2;
    static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
    std::atomic<std::uint32_t> state_{idle};
};

} // namespace dlock::detail
