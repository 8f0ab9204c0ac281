// redis/acquire_impl.hpp: the helpers acquire.cpp (the front-end, the first attempt on the
// sync lane) and acquire_op.cpp (the acquire operation) share.
#pragma once

#include "redis/acquire.hpp"

#include <chrono>
#include <optional>

namespace dlock::detail {

using clock = std::chrono::steady_clock;

inline bool single_try(const acquire_request& req) noexcept {
    return req.wait && req.wait->count() == 0;
}

/// May wait for the lock without asking the server first: another owner of this client holds
/// it, so its release will hand the lock over or publish. Not for a re-entry, a single try or
/// the spin policy.
inline bool may_queue(redis_client& c, const acquire_request& req) {
    return req.fresh_owner && !req.retry && !single_try(req) && !req.protocol->queues_on_server() &&
           !req.protocol->shared_holds() && c.registry().held_here(*req.protocol, req.keys.key);
}

/// A polite release of this client just gave waiters of other clients a head start on the
/// lock (see release.cpp): until when this acquisition waits on the channel before trying.
inline std::optional<clock::time_point> polite_wait(redis_client& c, const acquire_request& req) {
    if (!req.fresh_owner || req.retry || single_try(req) || req.protocol->queues_on_server())
        return std::nullopt;
    return c.registry().polite_until(*req.protocol, req.keys.key, clock::now());
}

/// The attempt command of `req`: a single try, or one that may wait (and then joins the
/// server's queue for a kind that has one).
inline void build_attempt(const redis_client& c, const acquire_request& req, command& cmd) {
    if (req.payload)
        req.protocol->payload_attempt(cmd, req.keys, req.owner, req.lease, *req.payload,
                                      req.where->pubsub_mode());
    else if (single_try(req))
        req.protocol->attempt(cmd, req.keys, req.owner, req.lease);
    else
        req.protocol->waiting_attempt(cmd, req.keys, req.owner, req.lease,
                                      c.options().fair_waiter_timeout);
}

/// The result of a successful acquisition (either path), counted as this client's local hold
/// when fresh (see hold_registry::local_begin) before its caller wakes.
inline acquire_result acquired(redis_client& c, const acquire_request& req, bool reentered,
                               std::int64_t count, std::uint64_t token, clock::time_point sent_at) {
    if (!reentered) c.registry().local_begin(*req.protocol, req.keys.key, req.lease);
    return {true, reentered, count, token, sent_at};
}

/// A fresh grant whose lease ended before its reply was read (the reply was delayed, or this
/// process paused between the request and the reply, for longer than the lease; reliability.md
/// F03/F04): measured from before the send, as the hold's valid_until would be, it is valid
/// nowhere any more, so it is no acquisition. The caller deletes its own token
/// (compare-and-delete: harmless when the key expired and another owner holds it now) and
/// treats the lock as found gone (`held`, PTTL -2: try again within the wait).
inline bool late_grant(const acquire_request& req, clock::time_point sent_at) {
    return req.fresh_owner && sent_at + req.lease - drift_for(req.lease) <= clock::now();
}

/// Counts one acquisition's end in the client's metrics (both paths, exactly once each).
inline void count(redis_client& c, const acquire_request& req, std::error_code ec,
                  const acquire_result& r) noexcept {
    if constexpr (metrics_enabled)
        c.metrics().acquisition(metrics_slot_of(*req.protocol), ec, r.acquired, r.reentered,
                                clock::now() - req.started_at);
}

/// Lock-delay: how long acquisitions on the request's node still wait (zero: not paused).
/// The clock is read only when a delay was ever set (after a master change): not on every
/// acquisition of the hot path.
inline std::chrono::milliseconds paused_for(const acquire_request& req) {
    const auto until = req.where->paused_until();
    if (until == clock::time_point{}) return std::chrono::milliseconds(0);
    const auto now = clock::now();
    if (now >= until) return std::chrono::milliseconds(0);
    return std::chrono::ceil<std::chrono::milliseconds>(until - now);
}

/// Replication safety is on: every attempt is followed by WAIT on the same connection.
inline bool waits_for_replicas(const redis_client& c) noexcept {
    return c.options().wait_replicas.replicas > 0;
}

} // namespace dlock::detail
