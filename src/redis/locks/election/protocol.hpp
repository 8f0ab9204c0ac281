// The election's protocol on Redis (dlock's own layout; docs/design/election.md): a kind of its
// own over the reentrant lock's keys. Leading is holding the election's lock N (Redisson RLock's
// hash, its fencing counter redisson_lock_token:{N} giving the epoch), and the grant writes the
// leader's record dlock_election:{N} (HASH owner, epoch, value) in the same script and publishes
// on dlock_election__channel:{N}, which observers subscribe to. The record has no TTL: it is
// current only while its owner holds N, so a leader that died (N expired) reads as vacant and
// the next grant overwrites it. Renewal, waiting and loss are the reentrant lock's; a release
// (resign) also deletes the record and tells observers. No local hand-over: every grant must
// write the record.
#pragma once

#include "redis/locks/reentrant/protocol.hpp"

#include <dlock/election.hpp>

#include <optional>

namespace dlock::detail {

/// What leader.lua answered: the leader (nullopt: vacant) and the PTTL of N (-2: free, -1: no
/// TTL), after which an observer reads again (a leader that dies publishes nothing).
struct leader_reading {
    std::optional<leader_info> leader;
    std::int64_t pttl = -2;
};

class election_lock final : public reentrant_lock {
public:
    std::string_view name() const noexcept override { return "election"; }
    bool has_handover() const noexcept override { return false; }

    void attempt(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease) const override {
        // Only a campaign acquires this kind, and it carries its value (payload_attempt).
        payload_attempt(c, k, owner, lease, {}, pubsub::mode::classic);
    }
    void payload_attempt(command& c, const lock_keys& k, std::string_view owner,
                         std::chrono::milliseconds lease, std::string_view value,
                         pubsub::mode m) const override;
    void release(command& c, const lock_keys& k, std::string_view owner,
                 std::chrono::milliseconds lease, pubsub::mode m) const override;
    release_outcome read_release(std::error_code ec, const resp3::value& r) const override;

    /// The leader's new value, by its holder; read_proclaim: true when set, false when the
    /// holder no longer leads, errors in `ec`.
    void proclaim(command& c, const lock_holder& h, std::string_view value, pubsub::mode m) const;
    static bool read_proclaim(const resp3::value& r, std::error_code& ec);
    /// The current leader of the election whose keys are `k`.
    void leader_query(command& c, const lock_keys& k) const;
    static leader_reading read_leader(const resp3::value& r, std::error_code& ec);

    /// The channel observers of the election `k` subscribe to.
    static std::string observer_channel(const lock_keys& k);
};

/// The one election protocol (registered after the public kinds: no lock_kind names it).
election_lock& election_protocol() noexcept;

} // namespace dlock::detail
