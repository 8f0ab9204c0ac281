#include "core/quorum_round.hpp"

#include "core/drift.hpp"

#include <algorithm>

namespace dlock::detail {

quorum_round::quorum_round(std::size_t nodes, clock::time_point started,
                           std::chrono::milliseconds node_timeout,
                           std::optional<std::chrono::milliseconds> lease) noexcept
    : votes_(nodes, vote::pending)
    , started_(started)
    , deadline_(started + node_timeout)
    , valid_until_(started)
    , has_lease_(lease.has_value()) {
    if (lease) {
        valid_until_ = started + *lease - drift_for(*lease);
        deadline_ = std::min(deadline_, std::max(started, valid_until_));
    }
    if (nodes == 0) {
        verdict_ = verdict::lost;
        why_ = reason::quorum_unreachable;
    }
}

std::size_t quorum_round::count(vote v) const noexcept {
    return static_cast<std::size_t>(std::count(votes_.begin(), votes_.end(), v));
}

quorum_round::verdict quorum_round::on_vote(std::size_t i, vote v, clock::time_point now) {
    if (i >= votes_.size() || v == vote::pending || votes_[i] != vote::pending) return verdict_;
    votes_[i] = v;
    return decide(now);
}

quorum_round::verdict quorum_round::on_deadline(clock::time_point now) {
    if (verdict_ != verdict::open) return verdict_;
    for (auto& v : votes_)
        if (v == vote::pending) v = vote::timed_out;
    return decide(now);
}

quorum_round::verdict quorum_round::decide(clock::time_point now) {
    if (verdict_ != verdict::open) return verdict_;
    const auto yes = count(vote::yes);
    if (yes >= quorum()) {
        if (has_lease_ && now >= valid_until_) {
            verdict_ = verdict::lost;
            why_ = reason::validity_used_up;
        } else {
            verdict_ = verdict::won;
        }
    } else if (yes + count(vote::pending) < quorum()) {
        verdict_ = verdict::lost;
        why_ = reason::quorum_unreachable;
    }
    return verdict_;
}

std::optional<quorum_round::clock::time_point>
retry_schedule::next(unsigned rounds_done, quorum_round::clock::time_point now,
                     std::uint32_t random) const noexcept {
    if (attempts != 0 && rounds_done >= attempts) return std::nullopt;
    const auto j =
        jitter.count() > 0
            ? std::chrono::milliseconds(random % (static_cast<std::uint64_t>(jitter.count()) + 1))
            : std::chrono::milliseconds(0);
    const auto at = now + delay + j;
    if (wait_deadline && at >= *wait_deadline) return std::nullopt;
    return at;
}

} // namespace dlock::detail
