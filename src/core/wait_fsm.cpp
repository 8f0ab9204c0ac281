#include "core/wait_fsm.hpp"

#include <dlock/error.hpp>

#include <algorithm>

namespace dlock::detail {

std::chrono::steady_clock::time_point sleep_until(std::chrono::steady_clock::time_point now,
                                                  std::chrono::steady_clock::time_point deadline,
                                                  std::int64_t ttl_ms) {
    if (ttl_ms < 0) return deadline;
    return std::min(deadline, now + std::chrono::milliseconds(ttl_ms));
}

wait_fsm::wait_fsm(params p)
    : p_(std::move(p))
    , rng_(p_.seed) {}

wait_fsm::action wait_fsm::resume(const event& ev) {
    const auto now = ev.now;
    switch (ev.type) {
    case event_type::start:
        if (state_ != state::idle) return {};
        return attempt(now);
    case event_type::start_queued: {
        if (state_ != state::idle) return {};
        // Another owner of this client holds the lock and the channel is subscribed here: its
        // release hands the lock over or publishes to us. Bounded by that holder's lease.
        subscribed_ = true;
        state_ = state::sleeping;
        sent_at_ = now; // messages before this belong to earlier releases (see channel_table)
        action a{.type = action_type::sleep};
        a.until = sleep_until(now, deadline_or_max(), ev.ttl_ms);
        a.on_channel = true;
        a.join_channel = true;
        return a;
    }
    case event_type::start_refused:
        if (state_ != state::idle) return {};
        state_ = state::trying;
        sent_at_ = ev.sent_at;
        return refused(ev.ttl_ms, now);
    case event_type::attempt_reply: {
        const auto& out = ev.attempt;
        const bool ambiguous =
            out.what == attempt_outcome::kind::error && out.ec == errc::ambiguous;
        if (state_ == state::finished) {
            // Cancelled while the attempt was in flight: do not keep what it may have given.
            action a;
            a.undo = p_.fresh_owner && (out.what == attempt_outcome::kind::acquired || ambiguous);
            return a;
        }
        if (state_ != state::trying) return {};
        if (out.what != attempt_outcome::kind::error) {
            first_transient_.reset();
            transient_ec_.clear();
        }
        switch (out.what) {
        case attempt_outcome::kind::error: {
            if (p_.retry_transient && transient_error(out.ec) && !p_.single_try) {
                if (!first_transient_) first_transient_ = now;
                transient_ec_ = out.ec;
                const bool left =
                    p_.deadline ? !expired(now) : now - *first_transient_ < p_.transient_budget;
                if (left) {
                    auto a = pause_until(now + p_.transient_delay);
                    a.undo = p_.fresh_owner && ambiguous; // released before the next attempt
                    return a;
                }
            }
            auto a = finish(out.ec);
            a.undo = p_.fresh_owner && ambiguous; // it may be ours: fail closed, release it
            return a;
        }
        case attempt_outcome::kind::held:
            return refused(out.ttl_ms, now);
        case attempt_outcome::kind::acquired:
        case attempt_outcome::kind::reentered:
            return finish(out);
        }
        return {};
    }
    case event_type::ttl_reply:
        if (state_ != state::ttl_query) return {};
        state_ = state::trying;
        return not_acquired(ev.ttl_ms, now);
    case event_type::subscribed:
        if (state_ != state::trying) return {};
        subscribed_ = true;
        if (!ev.covered) {
            state_ = state::subscribing;
            action a{.type = action_type::wait_active};
            a.until = deadline_or_max();
            return a;
        }
        // The channel was confirmed before our attempt was sent: that attempt already was the
        // last one, and every later release publishes to a channel we listen on.
        return after_subscribed(pending_ttl_, now);
    case event_type::active:
        if (state_ != state::subscribing) return {};
        return attempt(now); // the last attempt before sleeping: a later release cannot be missed
    case event_type::wake:
        if (state_ != state::sleeping) return {}; // e.g. during an attempt: it decides
        return attempt(now);
    case event_type::timer:
        if (state_ == state::sleeping) {
            const bool was_on_channel = !p_.spin_attempts;
            action a = expired(now) ? finish(std::error_code{}) : attempt(now);
            a.stop_sleeping = was_on_channel;
            return a;
        }
        if (state_ == state::subscribing && expired(now)) return finish(std::error_code{});
        // A pause that ran into the deadline after failures reports the last failure.
        if (state_ == state::paused) return expired(now) ? finish(transient_ec_) : attempt(now);
        return {};
    case event_type::paused:
        if (state_ != state::trying) return {};
        if (p_.single_try || expired(now)) return finish(std::error_code{});
        return pause_until(now + std::chrono::milliseconds(std::max<std::int64_t>(1, ev.ttl_ms)));
    case event_type::cancel:
        if (state_ == state::finished) return {};
        return finish(make_error_code(errc::cancelled));
    case event_type::handover_begin:
        if (!may_take_handover()) return {};
        state_ = state::handover;
        sent_at_ = now;
        return {};
    case event_type::handover_done: {
        if (state_ == state::finished) {
            action a;
            a.undo = p_.fresh_owner && (ev.handover == handover_result::handed_over ||
                                        ev.handover == handover_result::ambiguous);
            return a;
        }
        if (state_ != state::handover) return {};
        switch (ev.handover) {
        case handover_result::handed_over: {
            attempt_outcome out;
            out.what = attempt_outcome::kind::acquired;
            out.token = ev.token;
            return finish(out);
        }
        case handover_result::published:
            state_ = state::trying;
            return not_acquired(-1, now); // the unlock message is on its way to us
        case handover_result::ambiguous: {
            auto a = attempt(now); // it may be ours now: the undo goes out before the attempt
            a.undo = p_.fresh_owner;
            return a;
        }
        case handover_result::unknown:
            return attempt(now);
        }
        return {};
    }
    }
    return {};
}

wait_fsm::action wait_fsm::attempt(clock::time_point now) {
    state_ = state::trying;
    sent_at_ = now;
    return action{.type = action_type::send_attempt};
}

wait_fsm::action wait_fsm::refused(std::int64_t ttl, clock::time_point now) {
    if (p_.ttl_after_refusal && !p_.spin_attempts && !p_.single_try) {
        state_ = state::ttl_query;
        return action{.type = action_type::send_ttl_query};
    }
    return not_acquired(ttl, now);
}

wait_fsm::action wait_fsm::not_acquired(std::int64_t ttl, clock::time_point now) {
    if (p_.single_try || expired(now)) return finish(std::error_code{});
    if (p_.spin_attempts) {
        if (++tries_ >= *p_.spin_attempts) return finish(std::error_code{});
        std::uniform_int_distribution<long long> jitter(0, p_.spin_jitter.count());
        state_ = state::sleeping;
        action a{.type = action_type::sleep};
        a.until = std::min(deadline_or_max(),
                           now + p_.spin_delay + std::chrono::milliseconds(jitter(rng_)));
        return a;
    }
    if (!subscribed_) {
        pending_ttl_ = ttl;
        return action{.type = action_type::subscribe};
    }
    return after_subscribed(ttl, now);
}

wait_fsm::action wait_fsm::after_subscribed(std::int64_t ttl, clock::time_point now) {
    if (ttl == -2) return attempt(now); // vanished between our commands: try again now
    state_ = state::sleeping;
    action a{.type = action_type::sleep};
    a.until = sleep_until(now, deadline_or_max(), ttl);
    a.on_channel = true;
    return a;
}

wait_fsm::action wait_fsm::pause_until(clock::time_point until) {
    state_ = state::paused;
    action a{.type = action_type::sleep};
    a.until = std::min(deadline_or_max(), until);
    return a;
}

bool transient_error(std::error_code ec) noexcept {
    return ec == errc::unavailable || ec == errc::ambiguous || ec == errc::readonly ||
           ec == errc::server_busy;
}

wait_fsm::action wait_fsm::finish(std::error_code ec) {
    state_ = state::finished;
    action a{.type = action_type::done};
    a.ec = ec;
    a.leave_channel = subscribed_;
    return a;
}

wait_fsm::action wait_fsm::finish(const attempt_outcome& out) {
    auto a = finish(std::error_code{});
    a.acquired = true;
    a.reentered = out.what == attempt_outcome::kind::reentered;
    a.token = out.token;
    a.count = out.count;
    a.sent_at = sent_at_;
    return a;
}

} // namespace dlock::detail
