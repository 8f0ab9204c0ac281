// detail::renewal_service: the one watchdog of a client.
//
// Every hold is registered here. Holds taken without an explicit lease (watchdog holds) are
// renewed every watchdog_lease / 3 by batched scripts: up to `batch_size` locks per EVALSHA,
// all batches of a tick written in one pipelined write. A hold whose renewal answers 0 (gone or
// another owner) is lost at once; a hold whose renewals fail (timeouts, server down) is lost
// when its valid_until passes, measured on steady_clock from before the last successful send.
// Holds with a fixed lease are not renewed and are lost when their lease ends unreleased.
//
// Thread safety: add()/remove() from any thread (they post); the rest on the I/O thread.
#pragma once

#include <asio/steady_timer.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <unordered_map>

namespace dlock::detail {

class client_impl;
class hold_state;

class renewal_service {
public:
    static constexpr std::size_t batch_size = 100;

    explicit renewal_service(client_impl& c);
    void add(std::shared_ptr<hold_state> h);
    void remove(const std::shared_ptr<hold_state>& h);
    void stop();

    /// Counters for tests and benchmarks (relaxed; any thread).
    std::uint64_t batches_sent() const noexcept { return batches_.load(std::memory_order_relaxed); }
    std::uint64_t ticks() const noexcept { return ticks_.load(std::memory_order_relaxed); }

private:
    void arm_tick();
    void tick();
    void arm_loss();
    void check_deadlines();
    void forget(hold_state* h);

    client_impl& c_;
    asio::steady_timer tick_timer_;
    asio::steady_timer loss_timer_;
    std::unordered_map<hold_state*, std::shared_ptr<hold_state>> holds_; // I/O thread only
    std::size_t watchdog_holds_ = 0;
    std::size_t inflight_ = 0;
    bool tick_armed_ = false;
    bool stopped_ = false;
    std::atomic<std::uint64_t> batches_{0};
    std::atomic<std::uint64_t> ticks_{0};
};

} // namespace dlock::detail
