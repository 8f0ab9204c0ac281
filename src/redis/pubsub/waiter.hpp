// pubsub::waiter: what a waiting acquisition offers the subscriber (on_active, on_wake) and
// the release path of its own client (a local hand-over, redis/release.cpp).
#pragma once

#include "core/wait_fsm.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

namespace dlock::detail {
class redis_hold;
}

namespace dlock::pubsub {

class waiter {
public:
    /// The channel subscription is confirmed (the server processed the SUBSCRIBE).
    virtual void on_active() = 0;
    /// An unlock message, a stored permit or a reconnect woke this waiter.
    virtual void on_wake() = 0;
    /// The server dropped the channel (sharded pub/sub: its slot moved to another node); the
    /// waiter is no longer registered and should join the channel where the slot is now.
    virtual void on_dropped() {}
    /// Asleep on the lock `h` is finally releasing, as another owner, waiting by notification:
    /// the release may hand the lock over to this waiter.
    virtual bool takes_handover_of(const detail::redis_hold& h) const = 0;
    /// Who would hold the lock after a hand-over, and for how long.
    virtual std::string_view owner() const noexcept = 0;
    virtual std::chrono::milliseconds lease() const noexcept = 0;
    /// Keeps the waiter alive while a hand-over naming it is in flight.
    virtual std::shared_ptr<waiter> share() = 0;
    /// A hand-over script naming this waiter was sent at `sent_at`: nothing else may start an
    /// attempt until handover_done().
    virtual void handover_begin(std::chrono::steady_clock::time_point sent_at) = 0;
    virtual void handover_done(detail::handover_result r, std::uint64_t token) = 0;

protected:
    ~waiter() = default;
};

} // namespace dlock::pubsub
