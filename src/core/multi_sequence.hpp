// core::multi_sequence: the decisions of one multi-lock acquisition, without sockets or clocks.
//
// The members are taken one after another in the caller's (already sorted) order, each waiting
// only for what is left of the one deadline of the set. The shell (src/multi_lock.cpp, blocking
// and async) does what an action says and reports the outcome with the time it happened:
//
//   acquire{member, wait, lease}  take member `member` with that wait and lease (a lease handle)
//   refresh{count, lease}         extend members [0, count) to `lease` (fixed leases only)
//   release{}                     release every member held, [0, held()), in reverse order
//   done{acquired, ec}            report; on success members [0, held()) are the multi-lock
//
// Rules:
// - Not acquired within the wait, an error, or a held member lost (a later release or refresh
//   says so): the members held are released first, then the outcome is reported; a loss
//   restarts from the first member when time is left (the "retry").
// - Fixed lease L: every member but the last is taken with lease L + what is left of the wait,
//   so it outlives the wait; the last with L. With no bound on the wait, members are taken with
//   L and, while a later member waits, its wait is cut so that the held members are refreshed
//   (extended to L again) when a third of the earliest one's lease is left; then the member
//   waits again. Once the set is complete every member but the last is extended to L, so the
//   set's validity is measured from completion.
// - Watchdog lease: members are taken with the watchdog; nothing is refreshed.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <system_error>

namespace dlock::detail {

class multi_sequence {
public:
    using clock = std::chrono::steady_clock;
    using ms = std::chrono::milliseconds;

    enum class action_type { acquire, refresh, release, done };
    struct action {
        action_type what = action_type::done;
        std::size_t member = 0;  ///< acquire: which member
        std::optional<ms> wait;  ///< acquire: the member's wait (nullopt: forever)
        std::optional<ms> lease; ///< acquire, refresh: the fixed lease (nullopt: watchdog)
        std::size_t count = 0;   ///< refresh: members [0, count)
        bool acquired = false;   ///< done
        std::error_code ec;      ///< done
    };

    /// `members` >= 1; `wait` nullopt waits forever (negative is zero); `lease` nullopt: the
    /// watchdog. The deadline is `now + wait`.
    multi_sequence(std::size_t members, std::optional<ms> wait, std::optional<ms> lease,
                   clock::time_point now);

    action start(clock::time_point now);
    /// The member of the last acquire action was acquired. `any_lost`: a member held before
    /// reports lost. `earliest_valid`: the minimum valid_until over every held member.
    action acquired(clock::time_point now, bool any_lost, clock::time_point earliest_valid);
    /// The member of the last acquire action was not acquired within its wait.
    action not_acquired(clock::time_point now);
    /// The last acquire action failed with `ec` (not "not acquired").
    action failed(std::error_code ec);
    /// The last refresh ended: `ec` clear, errc::not_owner (a member was lost) or another
    /// error. `earliest_valid` as in acquired().
    action refreshed(clock::time_point now, std::error_code ec, clock::time_point earliest_valid);
    /// The release action completed (every member handed back; errors do not matter here).
    action released(clock::time_point now);

    /// Members [0, held()) are held.
    std::size_t held() const noexcept { return held_; }
    /// How many times the sequence started over from the first member.
    unsigned restarts() const noexcept { return restarts_; }

private:
    enum class after_release { restart, not_acquired, error };
    action next_acquire(clock::time_point now);
    action release_then(after_release what, std::error_code ec = {});
    std::optional<ms> remaining(clock::time_point now) const;
    bool expired(clock::time_point now) const;

    std::size_t n_;
    std::optional<clock::time_point> deadline_;
    std::optional<ms> lease_;
    std::size_t held_ = 0;
    bool capped_ = false;     ///< the member's wait was cut for a refresh
    bool completing_ = false; ///< the final refresh is in flight
    clock::time_point earliest_valid_{};
    after_release after_ = after_release::not_acquired;
    std::error_code after_ec_;
    unsigned restarts_ = 0;
};

} // namespace dlock::detail
