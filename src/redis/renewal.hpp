// detail::renewal_service: the one watchdog of a client.
//
// Every hold is registered here. Holds taken without an explicit lease (watchdog holds) are
// renewed every watchdog_lease / 3 by batched scripts: up to `batch_size` locks per EVALSHA,
// pipelined, at most `max_inflight` batches in flight; the rest of the tick's batches go as
// answers come back (the connection keeps its two write buffers' capacity: 10,000 holds in one
// write would leave 1.2 MB in each, about a fifth of a KiB per held lock). A hold whose renewal
// answers 0 (gone or another owner) is lost at once; a hold whose renewals fail (timeouts, server
// down) is lost when its valid_until passes, measured on steady_clock from before the last
// successful send. Holds with a fixed lease are not renewed and are lost when their lease ends
// unreleased.
//
// The loss timer is core's deadline_watch (core/deadline_watch.hpp), shared with Redlock.
//
// Thread safety: add() and remove() from any thread. They take a short mutex and wake the I/O
// thread only when a new hold's deadline is earlier than the loss check already armed, so an
// acquire/release pair costs no extra hop to the I/O thread. Timers run on the I/O thread.
#pragma once

#include "core/deadline_watch.hpp"
#include "redis/hold.hpp"

#include <dlock/resp3.hpp>

#include <asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace dlock::detail {

class redis_client;

class renewal_service {
public:
    static constexpr std::size_t batch_size = 100;
    static constexpr std::size_t max_inflight = 8;

    explicit renewal_service(redis_client& c);
    /// Starts the periodic renewal tick (I/O thread).
    void start();
    void add(std::shared_ptr<redis_hold> h) { watch_.add(std::move(h)); }
    void remove(const std::shared_ptr<redis_hold>& h) { watch_.remove(h.get()); }
    /// I/O thread.
    void stop();
    /// I/O thread: renew every watchdog hold now, not at the next tick (the master changed:
    /// a hold the new master does not know is then signalled lost at once).
    void renew_now() { tick(); }

    /// Counters for tests and benchmarks (relaxed; any thread).
    std::uint64_t batches_sent() const noexcept { return batches_.load(std::memory_order_relaxed); }
    std::uint64_t ticks() const noexcept { return ticks_.load(std::memory_order_relaxed); }
    std::size_t size() const { return watch_.size(); }
    /// Not on the I/O thread (tests and benchmarks): (ticks, batches sent) read on the I/O
    /// thread between two rounds, waiting up to `limit` for one (a round's batches go as the
    /// answers to its first ones come back, so plain reads could split one); nullopt if none.
    std::optional<std::pair<std::uint64_t, std::uint64_t>>
    between_rounds(std::chrono::milliseconds limit);

private:
    /// A hold's loss when its deadline passed: server_error when the last renewal was refused
    /// by an error reply, else deadline.
    struct expiry {
        static bool releasing(const redis_hold& h) noexcept {
            return h.releasing.load(std::memory_order_acquire);
        }
        static void expire(redis_hold& h);
    };
    void arm_tick();
    void tick();
    /// Sends the round's next batches while fewer than max_inflight are unanswered.
    void send_due();
    /// I/O thread: a batch of the round is unsent or unanswered.
    bool round_open() const noexcept { return inflight_ != 0 || !due_.empty(); }
    /// A tick found the last round unanswered: "lock renewal failed", once per round.
    void stalled();
    /// A batch failed (transport error, error reply, malformed reply): metrics and a warning.
    void renewal_failed(const std::vector<std::shared_ptr<redis_hold>>& holds, std::error_code ec,
                        const resp3::value& v);

    redis_client& c_;
    asio::steady_timer tick_timer_; // I/O thread
    std::size_t inflight_ = 0;      // I/O thread: renewal batches awaiting replies
    /// One batch of a round not sent yet: its node, kind and holds (at most batch_size).
    struct due_batch {
        node* where;
        const lock_protocol* protocol;
        std::vector<std::shared_ptr<redis_hold>> holds;
    };
    std::vector<due_batch> due_; // I/O thread: the round's batches not sent yet (from the back)
    bool stopped_ = false;       // I/O thread: stop() ran; nothing more is sent
    bool stall_logged_ = false;  // I/O thread: the unanswered round was logged
    deadline_watch<redis_hold, expiry> watch_;
    std::atomic<std::uint64_t> batches_{0};
    std::atomic<std::uint64_t> ticks_{0};
};

} // namespace dlock::detail
