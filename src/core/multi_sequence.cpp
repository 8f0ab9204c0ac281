#include "core/multi_sequence.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::detail {

multi_sequence::multi_sequence(std::size_t members, std::optional<ms> wait, std::optional<ms> lease,
                               clock::time_point now)
    : n_(members)
    , lease_(lease) {
    if (wait) deadline_ = now + std::max(*wait, ms{0});
}

std::optional<multi_sequence::ms> multi_sequence::remaining(clock::time_point now) const {
    if (!deadline_) return std::nullopt;
    if (*deadline_ <= now) return ms{0};
    return std::chrono::ceil<ms>(*deadline_ - now); // the set waits at least its wait
}

bool multi_sequence::expired(clock::time_point now) const {
    return deadline_ && now >= *deadline_;
}

multi_sequence::action multi_sequence::start(clock::time_point now) {
    return next_acquire(now);
}

multi_sequence::action multi_sequence::next_acquire(clock::time_point now) {
    action a;
    a.what = action_type::acquire;
    a.member = held_;
    a.wait = remaining(now);
    a.lease = lease_;
    // A member taken before the last outlives the wait (fixed lease: L + what is left of it),
    // so it cannot expire while the later ones are awaited; it is cut to L at completion.
    if (lease_ && a.wait && a.member + 1 < n_) a.lease = *lease_ + *a.wait;
    capped_ = false;
    if (lease_ && held_ > 0) {
        // The held members must not expire while this one waits (only a wait without bound
        // can reach that far): wake up for a refresh when a third of the earliest one's lease
        // is left, as the watchdog would.
        const auto refresh_at = earliest_valid_ - *lease_ / 3;
        if (refresh_at <= now) {
            action r;
            r.what = action_type::refresh;
            r.count = held_;
            r.lease = lease_;
            return r;
        }
        const auto cap = std::chrono::duration_cast<ms>(refresh_at - now);
        if (!a.wait || cap < *a.wait) {
            a.wait = cap;
            capped_ = true;
        }
    }
    return a;
}

multi_sequence::action multi_sequence::release_then(after_release what, std::error_code ec) {
    after_ = what;
    after_ec_ = ec;
    completing_ = false;
    action a;
    a.what = action_type::release;
    return a;
}

multi_sequence::action multi_sequence::acquired(clock::time_point now, bool any_lost,
                                                clock::time_point earliest_valid) {
    ++held_;
    earliest_valid_ = earliest_valid;
    if (any_lost) return release_then(after_release::restart);
    if (held_ < n_) return next_acquire(now);
    if (lease_ && n_ > 1) {
        // Complete: every member but the last (just taken with lease L) is extended to L, so
        // the set's validity starts now.
        completing_ = true;
        action r;
        r.what = action_type::refresh;
        r.count = n_ - 1;
        r.lease = lease_;
        return r;
    }
    action d;
    d.acquired = true;
    return d;
}

multi_sequence::action multi_sequence::not_acquired(clock::time_point now) {
    if (capped_ && !expired(now)) {
        action r;
        r.what = action_type::refresh;
        r.count = held_;
        r.lease = lease_;
        return r;
    }
    return release_then(after_release::not_acquired);
}

multi_sequence::action multi_sequence::failed(std::error_code ec) {
    return release_then(after_release::error, ec);
}

multi_sequence::action multi_sequence::refreshed(clock::time_point now, std::error_code ec,
                                                 clock::time_point earliest_valid) {
    earliest_valid_ = earliest_valid;
    if (ec == errc::not_owner) return release_then(after_release::restart);
    if (ec) return release_then(after_release::error, ec);
    if (completing_) {
        completing_ = false;
        action d;
        d.acquired = true;
        return d;
    }
    return next_acquire(now);
}

multi_sequence::action multi_sequence::released(clock::time_point now) {
    held_ = 0;
    action d;
    switch (after_) {
    case after_release::restart:
        if (expired(now)) return d;
        ++restarts_;
        return next_acquire(now);
    case after_release::not_acquired:
        return d;
    case after_release::error:
        d.ec = after_ec_;
        return d;
    }
    return d;
}

} // namespace dlock::detail
