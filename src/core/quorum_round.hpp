// core::quorum_round: one Redlock round over N independent nodes, without sockets or timers.
//
// A round is one fan-out: an acquisition (SET NX PX on every node), an extension (compare-and-
// pexpire on every node) or a release (compare-and-delete on every node). The shell sends the
// commands, then feeds each node's answer (on_vote) and, when the per-node timeout passes, the
// deadline (on_deadline); every call carries `now`, the machine never reads a clock. The round
// decides as early as the votes allow:
//   won   yes votes >= quorum = floor(N/2)+1, and (rounds with a lease) the validity
//         lease - (now - started) - drift is still positive, drift = lease * 1% + 2 ms;
//   lost  the quorum cannot be reached any more (too few nodes left to answer), or it was
//         reached too late: the validity is used up;
//   open  otherwise.
// `started` is taken before the first command is sent, so the validity is a lower bound of how
// long the majority holds the lock. Votes that arrive after the verdict are recorded (the
// caller may show them) but never change it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace dlock::detail {

class quorum_round {
public:
    using clock = std::chrono::steady_clock;

    /// One node's answer. `refused`: the node answered and said no (held by another owner, or
    /// for an extension or release: not ours any more). `failed`: an error reply or transport
    /// failure. `timed_out`: no answer by the round's deadline.
    enum class vote : std::uint8_t { pending, yes, refused, failed, timed_out };
    enum class verdict : std::uint8_t { open, won, lost };
    enum class reason : std::uint8_t { none, quorum_unreachable, validity_used_up };

    static constexpr std::size_t quorum_of(std::size_t nodes) noexcept { return nodes / 2 + 1; }

    /// `lease`: the lease every node was asked for (acquisition, extension); nullopt for a
    /// release, which has no validity rule. `node_timeout`: how long the round waits for the
    /// nodes; the deadline is started + node_timeout, and never later than the end of the
    /// validity. Edge values: nodes == 0 is lost at once.
    quorum_round(std::size_t nodes, clock::time_point started,
                 std::chrono::milliseconds node_timeout,
                 std::optional<std::chrono::milliseconds> lease) noexcept;

    /// Node `i` answered `v` (not pending). A node's second vote and votes for unknown nodes
    /// are ignored; a vote after the verdict is recorded but changes nothing.
    verdict on_vote(std::size_t i, vote v, clock::time_point now);
    /// The deadline passed: every pending node becomes timed_out, and the round is decided.
    verdict on_deadline(clock::time_point now);

    verdict state() const noexcept { return verdict_; }
    reason why() const noexcept { return why_; }
    clock::time_point started() const noexcept { return started_; }
    clock::time_point deadline() const noexcept { return deadline_; }
    /// started + lease - drift: until when a won round's holder may believe it holds the lock
    /// (the time point of a lease-less round is started).
    clock::time_point valid_until() const noexcept { return valid_until_; }
    std::size_t nodes() const noexcept { return votes_.size(); }
    std::size_t quorum() const noexcept { return quorum_of(votes_.size()); }
    std::size_t count(vote v) const noexcept;
    /// So many nodes said "not yours" that no quorum of them can say "yours": an extension or a
    /// release that sees this means the lock is lost, whatever the other nodes answer.
    bool refused_by_quorum() const noexcept { return count(vote::refused) > nodes() - quorum(); }
    std::span<const vote> votes() const noexcept { return votes_; }

private:
    verdict decide(clock::time_point now);

    std::vector<vote> votes_;
    clock::time_point started_;
    clock::time_point deadline_;
    clock::time_point valid_until_;
    bool has_lease_ = false;
    verdict verdict_ = verdict::open;
    reason why_ = reason::none;
};

/// When to start the next acquisition round after a lost one, or nullopt to give up: a pause
/// of `delay` plus `random % (jitter + 1)` ms, while the pause ends before `wait_deadline`
/// (nullopt: no deadline) and the attempts (rounds in total, 0 = unlimited) are not used up.
struct retry_schedule {
    std::optional<quorum_round::clock::time_point> wait_deadline;
    unsigned attempts = 0;
    std::chrono::milliseconds delay{};
    std::chrono::milliseconds jitter{};

    std::optional<quorum_round::clock::time_point> next(unsigned rounds_done,
                                                        quorum_round::clock::time_point now,
                                                        std::uint32_t random) const noexcept;
};

} // namespace dlock::detail
