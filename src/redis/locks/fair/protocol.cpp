// The fair lock: Redisson's RFairLock layout. The lock is the RLock hash (so re-entry, renewal,
// hold counts and the reply shapes are the reentrant lock's), plus the waiter queue
// redisson_lock_queue:{N} (LIST, arrival order) and the waiters' deadlines
// redisson_lock_timeout:{N} (ZSET, epoch ms). Each waiter sleeps on a channel of its own,
// redisson_lock__channel:{N}:<owner>, and a release wakes exactly the head of the queue.
//
// Where it differs from Redisson (wire format kept; the scripts say why in their headers):
// deadlines come from the server's clock, not the client's; a live waiter refreshes its place
// on every attempt (at least every third of the place timeout) instead of Redisson's
// "previous waiter's deadline + wait, lowered on every acquisition"; a waiter that gives up
// leaves at once and wakes the new head if the lock is free; a release of a lock that expired
// answers "not the owner" (Redisson answers 1). No local queueing, and a local hand-over only
// to a waiter of this client that is the head of the server's queue: the order is the
// server's, for the waiters of one process as for all others.
#include "redis/locks/reentrant/protocol.hpp"

namespace dlock::detail {
namespace {

class fair_lock final : public reentrant_lock {
public:
    std::string_view name() const noexcept override { return "fair"; }

    /// Try once: never joins the queue (Redisson's tryLock() without a wait).
    void attempt(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease) const override {
        acquire(c, k, owner, lease, std::chrono::milliseconds(1), "0");
    }
    void waiting_attempt(command& c, const lock_keys& k, std::string_view owner,
                         std::chrono::milliseconds lease,
                         std::chrono::milliseconds place_timeout) const override {
        acquire(c, k, owner, lease, place_timeout, "1");
    }

    bool queues_on_server() const noexcept override { return true; }
    /// Only to this client's waiter at the head of the server's queue (fair/handover.lua);
    /// `check_others` does not apply: the queue decides.
    bool has_handover() const noexcept override { return true; }
    void handover(command& c, const lock_holder& from, std::string_view to_owner,
                  std::chrono::milliseconds to_lease, bool /*check_others*/,
                  pubsub::mode m) const override {
        const auto& k = from.keys;
        c.script(script_id::fair_handover).arg("5").arg(k.key);
        queue_keys(c, k).arg(k.channel).arg(k.token_key).arg(from.owner);
        c.arg(pubsub::publish_command(m)).arg(to_owner).number(to_lease.count());
    }
    /// As the reentrant reading, except that a release that woke the head tells our waiter
    /// nothing is coming to it ("published" would make it sleep for a message on its own
    /// channel): it tries again at once, which also refreshes its place.
    handover_reading read_handover(std::error_code ec, const resp3::value& r) const override {
        auto h = reentrant_lock::read_handover(ec, r);
        if (h.waiter == handover_result::published) h.waiter = handover_result::unknown;
        return h;
    }

    bool abandon(command& c, const lock_keys& k, std::string_view owner,
                 pubsub::mode m) const override {
        queue_keys(c.script(script_id::fair_leave).arg("4").arg(k.key), k)
            .arg(k.channel)
            .arg(owner)
            .arg(pubsub::publish_command(m));
        return true;
    }

    std::string waiter_channel(const lock_keys& k, std::string_view owner) const override {
        std::string ch;
        ch.reserve(k.channel.size() + 1 + owner.size());
        ch.append(k.channel).append(":").append(owner);
        return ch;
    }

    void release(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease, pubsub::mode m) const override {
        queue_keys(c.script(script_id::fair_release).arg("4").arg(k.key), k)
            .arg(k.channel)
            .arg("0")
            .number(lease.count())
            .arg(owner)
            .arg(pubsub::publish_command(m));
    }

    void force_unlock(command& c, const lock_keys& k, pubsub::mode m) const override {
        queue_keys(c.script(script_id::fair_force_unlock).arg("4").arg(k.key), k)
            .arg(k.channel)
            .arg(pubsub::publish_command(m));
    }

protected:
    std::string_view queue_prefix() const noexcept override { return "redisson_lock_queue"; }
    std::string_view deadline_prefix() const noexcept override { return "redisson_lock_timeout"; }

private:
    /// Appends the queue and deadline keys of N (kept by the command: not stored per hold).
    command& queue_keys(command& c, const lock_keys& k) const {
        return c.own(queue_key(k)).own(timeout_key(k));
    }

    void acquire(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease, std::chrono::milliseconds place,
                 std::string_view enqueue) const {
        queue_keys(c.script(script_id::fair_acquire).arg("4").arg(k.key), k)
            .arg(k.token_key)
            .number(lease.count())
            .arg(owner)
            .number(place.count())
            .arg(enqueue);
    }
};

} // namespace

lock_protocol& fair_protocol() noexcept {
    static fair_lock p;
    return p;
}

} // namespace dlock::detail
