// Socket-free tests of core::wait_fsm: every transition of one acquisition's wait loop, driven
// by hand with a fake time that only moves when a test advances it (nothing sleeps). Each
// test checks the exact action (every field) and the state after it.
#include "core/wait_fsm.hpp"

#include <dlock/error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <sstream>
#include <string>
#include <system_error>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::detail::attempt_outcome;
using dlock::detail::handover_result;
using fsm = dlock::detail::wait_fsm;
using et = fsm::event_type;
using at = fsm::action_type;
using st = fsm::state;
using time_point = fsm::clock::time_point;

namespace {

/// The fake "now" every test starts at: far from the epoch (the shell reads a zero `now` as
/// "not given").
const time_point t0 = time_point{} + 1000h;

std::string show(time_point t) {
    if (t == time_point::max()) return "max";
    std::ostringstream s;
    s << "t0" << (t >= t0 ? "+" : "-")
      << std::chrono::duration_cast<std::chrono::milliseconds>(t >= t0 ? t - t0 : t0 - t).count()
      << "ms";
    return s.str();
}

/// Compares every field of an action.
testing::AssertionResult same(const fsm::action& got, const fsm::action& want) {
    std::ostringstream diff;
    auto check = [&](const char* field, auto g, auto w, auto print) {
        if (g != w) diff << "\n  " << field << ": got " << print(g) << ", want " << print(w);
    };
    auto plain = [](auto v) {
        std::ostringstream s;
        s << v;
        return s.str();
    };
    auto type_name = [](at t) -> std::string {
        switch (t) {
        case at::none:
            return "none";
        case at::send_attempt:
            return "send_attempt";
        case at::send_ttl_query:
            return "send_ttl_query";
        case at::subscribe:
            return "subscribe";
        case at::sleep:
            return "sleep";
        case at::wait_active:
            return "wait_active";
        case at::done:
            return "done";
        }
        return "?";
    };
    auto ec_name = [](const std::error_code& ec) { return ec ? ec.message() : "(clear)"; };
    check("type", got.type, want.type, type_name);
    check("until", got.until, want.until, show);
    check("on_channel", got.on_channel, want.on_channel, plain);
    check("join_channel", got.join_channel, want.join_channel, plain);
    check("stop_sleeping", got.stop_sleeping, want.stop_sleeping, plain);
    check("undo", got.undo, want.undo, plain);
    check("leave_channel", got.leave_channel, want.leave_channel, plain);
    check("ec", got.ec, want.ec, ec_name);
    check("acquired", got.acquired, want.acquired, plain);
    check("reentered", got.reentered, want.reentered, plain);
    check("token", got.token, want.token, plain);
    check("count", got.count, want.count, plain);
    check("sent_at", got.sent_at, want.sent_at, show);
    if (diff.str().empty()) return testing::AssertionSuccess();
    return testing::AssertionFailure() << "actions differ:" << diff.str();
}

// Expected actions (every other field at its default).
fsm::action none() {
    return {};
}
fsm::action send_attempt() {
    fsm::action a;
    a.type = at::send_attempt;
    return a;
}
fsm::action send_ttl_query() {
    fsm::action a;
    a.type = at::send_ttl_query;
    return a;
}
fsm::action subscribe() {
    fsm::action a;
    a.type = at::subscribe;
    return a;
}
fsm::action sleep_on_channel(time_point until) {
    fsm::action a;
    a.type = at::sleep;
    a.until = until;
    a.on_channel = true;
    return a;
}
fsm::action sleep_timer_only(time_point until) {
    fsm::action a;
    a.type = at::sleep;
    a.until = until;
    return a;
}
fsm::action wait_active(time_point until) {
    fsm::action a;
    a.type = at::wait_active;
    a.until = until;
    return a;
}
fsm::action not_acquired(bool leave_channel) {
    fsm::action a;
    a.type = at::done;
    a.leave_channel = leave_channel;
    return a;
}
fsm::action failed(errc e, bool leave_channel) {
    auto a = not_acquired(leave_channel);
    a.ec = make_error_code(e);
    return a;
}
fsm::action acquired(std::uint64_t token, time_point sent_at, bool leave_channel) {
    auto a = not_acquired(leave_channel);
    a.acquired = true;
    a.token = token;
    a.sent_at = sent_at;
    return a;
}
fsm::action with_undo(fsm::action a) {
    a.undo = true;
    return a;
}
fsm::action with_stop_sleeping(fsm::action a) {
    a.stop_sleeping = true;
    return a;
}

// Attempt outcomes.
attempt_outcome got_it(std::uint64_t token = 0) {
    attempt_outcome o;
    o.what = attempt_outcome::kind::acquired;
    o.token = token;
    return o;
}
attempt_outcome got_again(std::int64_t count) {
    attempt_outcome o;
    o.what = attempt_outcome::kind::reentered;
    o.count = count;
    return o;
}
attempt_outcome held(std::int64_t ttl_ms) {
    attempt_outcome o;
    o.what = attempt_outcome::kind::held;
    o.ttl_ms = ttl_ms;
    return o;
}
attempt_outcome failure(errc e) {
    attempt_outcome o;
    o.what = attempt_outcome::kind::error;
    o.ec = make_error_code(e);
    return o;
}

/// One machine and its fake clock. Every event carries the current fake `now`.
struct machine {
    explicit machine(fsm::params p = {})
        : f(p) {}

    fsm::action resume(fsm::event ev) {
        ev.now = now;
        return f.resume(ev);
    }
    fsm::action on(et type) {
        fsm::event ev;
        ev.type = type;
        return resume(ev);
    }
    fsm::action reply(const attempt_outcome& out) {
        fsm::event ev;
        ev.type = et::attempt_reply;
        ev.attempt = out;
        return resume(ev);
    }
    fsm::action ttl_reply(std::int64_t ttl_ms) {
        fsm::event ev;
        ev.type = et::ttl_reply;
        ev.ttl_ms = ttl_ms;
        return resume(ev);
    }
    fsm::action subscribed(bool covered) {
        fsm::event ev;
        ev.type = et::subscribed;
        ev.covered = covered;
        return resume(ev);
    }
    fsm::action start_queued(std::int64_t lease_ms) {
        fsm::event ev;
        ev.type = et::start_queued;
        ev.ttl_ms = lease_ms;
        return resume(ev);
    }
    fsm::action start_refused(std::int64_t ttl_ms, time_point sent_at) {
        fsm::event ev;
        ev.type = et::start_refused;
        ev.ttl_ms = ttl_ms;
        ev.sent_at = sent_at;
        return resume(ev);
    }
    fsm::action handover_done(handover_result r, std::uint64_t token = 0) {
        fsm::event ev;
        ev.type = et::handover_done;
        ev.handover = r;
        ev.token = token;
        return resume(ev);
    }
    void advance(std::chrono::milliseconds d) { now += d; }
    st state() const { return f.current(); }

    /// Refused once (the holder's TTL `ttl_ms`), subscribed (not covered), confirmed, refused
    /// again: asleep on the channel.
    void to_sleep(std::int64_t ttl_ms) {
        ASSERT_TRUE(same(on(et::start), send_attempt()));
        ASSERT_TRUE(same(reply(held(ttl_ms)), subscribe()));
        ASSERT_EQ(subscribed(false).type, at::wait_active);
        ASSERT_TRUE(same(on(et::active), send_attempt()));
        ASSERT_EQ(reply(held(ttl_ms)).type, at::sleep);
        ASSERT_EQ(state(), st::sleeping);
    }

    fsm f;
    time_point now = t0;
};

fsm::params with_deadline(std::chrono::milliseconds wait) {
    fsm::params p;
    p.deadline = t0 + wait;
    return p;
}

/// The spin policy (acquire_options::retry).
fsm::params spin(unsigned attempts, std::chrono::milliseconds delay,
                 std::chrono::milliseconds jitter) {
    fsm::params p;
    p.spin_attempts = attempts;
    p.spin_delay = delay;
    p.spin_jitter = jitter;
    return p;
}

} // namespace

// --- uncontended ---------------------------------------------------------------------------

TEST(wait_fsm, an_uncontended_attempt_acquires_with_its_token_and_the_time_it_was_sent) {
    machine m(with_deadline(10s));
    EXPECT_EQ(m.state(), st::idle);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_EQ(m.state(), st::trying);
    EXPECT_EQ(m.f.sent_at(), t0);
    m.advance(3ms); // the round trip
    EXPECT_TRUE(same(m.reply(got_it(7)), acquired(7, t0, false)));
    EXPECT_EQ(m.state(), st::finished);
}

TEST(wait_fsm, a_reentry_reports_the_new_hold_count) {
    machine m;
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    m.advance(2ms);
    auto want = acquired(0, t0, false);
    want.reentered = true;
    want.count = 3;
    EXPECT_TRUE(same(m.reply(got_again(3)), want));
    EXPECT_EQ(m.state(), st::finished);
}

TEST(wait_fsm, events_that_do_not_fit_the_state_are_ignored) {
    machine m(with_deadline(10s));
    // Idle: only a start moves it.
    EXPECT_TRUE(same(m.reply(got_it(1)), none()));
    EXPECT_TRUE(same(m.ttl_reply(100), none()));
    EXPECT_TRUE(same(m.subscribed(true), none()));
    EXPECT_TRUE(same(m.on(et::active), none()));
    EXPECT_TRUE(same(m.on(et::wake), none()));
    EXPECT_TRUE(same(m.on(et::timer), none()));
    EXPECT_TRUE(same(m.on(et::handover_begin), none()));
    EXPECT_TRUE(same(m.handover_done(handover_result::handed_over, 3), none()));
    EXPECT_EQ(m.state(), st::idle);
    // Trying: a second start, a stray TTL reply or confirmation change nothing.
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.on(et::start), none()));
    EXPECT_TRUE(same(m.start_queued(1000), none()));
    EXPECT_TRUE(same(m.start_refused(100, t0), none()));
    EXPECT_TRUE(same(m.ttl_reply(100), none()));
    EXPECT_TRUE(same(m.on(et::active), none()));
    EXPECT_TRUE(same(m.on(et::handover_begin), none()));
    EXPECT_EQ(m.state(), st::trying);
}

// --- refused, subscribe, last attempt, sleep ---------------------------------------------

TEST(wait_fsm, a_refusal_subscribes_and_waits_for_the_confirmation_then_makes_a_last_attempt) {
    machine m(with_deadline(10s));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(held(500)), subscribe()));
    EXPECT_EQ(m.state(), st::trying); // the shell answers at once with `subscribed`
    EXPECT_TRUE(same(m.subscribed(false), wait_active(t0 + 10s)));
    EXPECT_EQ(m.state(), st::subscribing);
    m.advance(2ms);
    // The confirmation came after the first attempt was sent: a release between the two could
    // have been missed, so one more attempt before sleeping.
    EXPECT_TRUE(same(m.on(et::active), send_attempt()));
    EXPECT_EQ(m.state(), st::trying);
    EXPECT_EQ(m.f.sent_at(), t0 + 3ms);
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(held(500)), sleep_on_channel(m.now + 500ms)));
    EXPECT_EQ(m.state(), st::sleeping);
    EXPECT_TRUE(m.f.may_take_handover());
}

TEST(wait_fsm, a_sleep_never_outlasts_the_deadline) {
    machine m(with_deadline(2s));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(30'000)), subscribe()));
    EXPECT_TRUE(same(m.subscribed(false), wait_active(t0 + 2s)));
    m.advance(5ms);
    EXPECT_TRUE(same(m.on(et::active), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(30'000)), sleep_on_channel(t0 + 2s)));
}

TEST(wait_fsm, without_a_deadline_or_a_holder_ttl_the_sleep_has_no_timer) {
    machine m; // wait forever
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(-1)), subscribe()));
    EXPECT_TRUE(same(m.subscribed(false), wait_active(time_point::max())));
    EXPECT_TRUE(same(m.on(et::active), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(-1)), sleep_on_channel(time_point::max())));
}

TEST(wait_fsm, a_subscription_confirmed_before_the_attempt_was_sent_skips_the_last_attempt) {
    machine m(with_deadline(10s));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(held(500)), subscribe()));
    // Covered: the channel was active before our attempt was sent; sleep on the refusal's TTL.
    EXPECT_TRUE(same(m.subscribed(true), sleep_on_channel(m.now + 500ms)));
    EXPECT_EQ(m.state(), st::sleeping);
}

TEST(wait_fsm, a_wake_while_asleep_makes_the_next_attempt) {
    machine m(with_deadline(10s));
    m.to_sleep(500);
    m.advance(100ms);
    // The channel already removed the waiter from its sleepers: no stop_sleeping.
    EXPECT_TRUE(same(m.on(et::wake), send_attempt()));
    EXPECT_EQ(m.state(), st::trying);
    EXPECT_EQ(m.f.sent_at(), m.now);
    const auto sent = m.now;
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(got_it(4)), acquired(4, sent, true)));
}

TEST(wait_fsm, a_refusal_after_a_wake_sleeps_again_without_subscribing_again) {
    machine m(with_deadline(10s));
    m.to_sleep(500);
    m.advance(100ms);
    EXPECT_TRUE(same(m.on(et::wake), send_attempt()));
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(held(800)), sleep_on_channel(m.now + 800ms)));
    EXPECT_EQ(m.state(), st::sleeping);
}

TEST(wait_fsm, a_lost_unlock_message_is_covered_by_the_holders_ttl) {
    machine m(with_deadline(10s));
    m.to_sleep(500);
    m.advance(500ms); // no wake came; the timer armed at the holder's expiry fires
    EXPECT_TRUE(same(m.on(et::timer), with_stop_sleeping(send_attempt())));
    EXPECT_EQ(m.state(), st::trying);
    const auto sent = m.now;
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(got_it(11)), acquired(11, sent, true)));
}

TEST(wait_fsm, a_wake_during_an_attempt_in_flight_is_ignored_and_the_reply_decides) {
    machine m(with_deadline(10s));
    m.to_sleep(500);
    EXPECT_TRUE(same(m.on(et::wake), send_attempt()));
    const auto sent = m.now;
    m.advance(1ms);
    EXPECT_TRUE(same(m.on(et::wake), none()));  // e.g. a permit or a reconnect
    EXPECT_TRUE(same(m.on(et::timer), none())); // a stale timer
    EXPECT_EQ(m.state(), st::trying);
    EXPECT_EQ(m.f.sent_at(), sent); // not a new attempt
    EXPECT_TRUE(same(m.reply(held(300)), sleep_on_channel(m.now + 300ms)));
}

TEST(wait_fsm, a_wake_during_the_first_attempt_is_ignored_too) {
    machine m;
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.on(et::wake), none()));
    EXPECT_TRUE(same(m.reply(got_it(2)), acquired(2, t0, false)));
}

TEST(wait_fsm, a_wake_while_waiting_for_the_confirmation_is_ignored) {
    machine m(with_deadline(10s));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(500)), subscribe()));
    EXPECT_TRUE(same(m.subscribed(false), wait_active(t0 + 10s)));
    EXPECT_TRUE(same(m.on(et::wake), none()));
    EXPECT_EQ(m.state(), st::subscribing);
}

// --- deadline ------------------------------------------------------------------------------

TEST(wait_fsm, a_deadline_during_the_subscription_finishes_not_acquired) {
    machine m(with_deadline(100ms));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(500)), subscribe()));
    EXPECT_TRUE(same(m.subscribed(false), wait_active(t0 + 100ms)));
    m.advance(50ms);
    EXPECT_TRUE(same(m.on(et::timer), none())); // early: keeps waiting for the confirmation
    EXPECT_EQ(m.state(), st::subscribing);
    m.advance(51ms);
    EXPECT_TRUE(same(m.on(et::timer), not_acquired(true)));
    EXPECT_EQ(m.state(), st::finished);
    EXPECT_TRUE(same(m.on(et::active), none())); // a late confirmation
}

TEST(wait_fsm, the_deadline_reached_while_asleep_finishes_not_acquired) {
    machine m(with_deadline(300ms));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(5000)), subscribe()));
    EXPECT_TRUE(same(m.subscribed(true), sleep_on_channel(t0 + 300ms)));
    m.advance(300ms);
    EXPECT_TRUE(same(m.on(et::timer), with_stop_sleeping(not_acquired(true))));
    EXPECT_EQ(m.state(), st::finished);
    EXPECT_TRUE(same(m.on(et::wake), none()));
}

TEST(wait_fsm, a_refusal_that_arrives_after_the_deadline_finishes_without_subscribing) {
    machine m(with_deadline(100ms));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    m.advance(150ms); // a slow reply
    EXPECT_TRUE(same(m.reply(held(500)), not_acquired(false)));
    EXPECT_EQ(m.state(), st::finished);
}

// --- cancel --------------------------------------------------------------------------------

TEST(wait_fsm, a_cancel_during_the_first_attempt_finishes_cancelled_and_undoes_a_late_success) {
    machine m(with_deadline(10s));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.on(et::cancel), failed(errc::cancelled, false))); // never joined
    EXPECT_EQ(m.state(), st::finished);
    m.advance(1ms);
    // The attempt acquired after all: release it; no second done.
    EXPECT_TRUE(same(m.reply(got_it(5)), with_undo(none())));
    EXPECT_EQ(m.state(), st::finished);
    EXPECT_TRUE(same(m.on(et::cancel), none()));
}

TEST(wait_fsm, a_cancel_during_the_last_attempt_leaves_the_channel) {
    machine m(with_deadline(10s));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(500)), subscribe()));
    EXPECT_TRUE(same(m.subscribed(false), wait_active(t0 + 10s)));
    EXPECT_TRUE(same(m.on(et::active), send_attempt()));
    EXPECT_TRUE(same(m.on(et::cancel), failed(errc::cancelled, true)));
    EXPECT_TRUE(same(m.reply(got_it(5)), with_undo(none())));
}

TEST(wait_fsm, a_late_reply_after_a_cancel_is_undone_only_when_it_may_have_given_the_lock) {
    {
        machine m;
        m.on(et::start);
        m.on(et::cancel);
        EXPECT_TRUE(same(m.reply(failure(errc::ambiguous)), with_undo(none())));
    }
    {
        machine m;
        m.on(et::start);
        m.on(et::cancel);
        EXPECT_TRUE(same(m.reply(held(500)), none()));
    }
    {
        machine m;
        m.on(et::start);
        m.on(et::cancel);
        EXPECT_TRUE(same(m.reply(failure(errc::unavailable)), none()));
    }
}

TEST(wait_fsm, a_late_success_after_a_cancel_is_kept_when_the_owner_held_the_lock_before) {
    fsm::params p;
    p.fresh_owner = false; // a re-entry: undoing would release the earlier hold
    machine m(p);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.on(et::cancel), failed(errc::cancelled, false)));
    EXPECT_TRUE(same(m.reply(got_it(5)), none()));
    EXPECT_TRUE(same(m.reply(failure(errc::ambiguous)), none()));
}

TEST(wait_fsm, a_cancel_while_waiting_for_the_confirmation_leaves_the_channel) {
    machine m(with_deadline(10s));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(500)), subscribe()));
    EXPECT_TRUE(same(m.subscribed(false), wait_active(t0 + 10s)));
    EXPECT_TRUE(same(m.on(et::cancel), failed(errc::cancelled, true)));
    EXPECT_TRUE(same(m.on(et::active), none()));
    EXPECT_TRUE(same(m.on(et::timer), none()));
}

TEST(wait_fsm, a_shutdown_while_asleep_finishes_cancelled_and_leaves_the_channel) {
    machine m(with_deadline(10s));
    m.to_sleep(500);
    EXPECT_TRUE(same(m.on(et::cancel), failed(errc::cancelled, true)));
    EXPECT_EQ(m.state(), st::finished);
    EXPECT_FALSE(m.f.may_take_handover());
    EXPECT_TRUE(same(m.on(et::cancel), none()));
    EXPECT_TRUE(same(m.on(et::wake), none()));
    EXPECT_TRUE(same(m.on(et::timer), none()));
}

// --- errors --------------------------------------------------------------------------------

TEST(wait_fsm, an_ambiguous_attempt_fails_closed_and_undoes_what_it_may_have_given) {
    machine m;
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(failure(errc::ambiguous)), with_undo(failed(errc::ambiguous, false))));
    EXPECT_EQ(m.state(), st::finished);
}

TEST(wait_fsm, an_ambiguous_last_attempt_leaves_the_channel_too) {
    machine m(with_deadline(10s));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(500)), subscribe()));
    EXPECT_TRUE(same(m.subscribed(false), wait_active(t0 + 10s)));
    EXPECT_TRUE(same(m.on(et::active), send_attempt()));
    EXPECT_TRUE(same(m.reply(failure(errc::ambiguous)), with_undo(failed(errc::ambiguous, true))));
}

TEST(wait_fsm, an_attempt_that_surely_did_not_run_fails_without_an_undo) {
    machine m;
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(failure(errc::unavailable)), failed(errc::unavailable, false)));
    EXPECT_EQ(m.state(), st::finished);
}

TEST(wait_fsm, an_ambiguous_reentry_is_not_undone) {
    fsm::params p;
    p.fresh_owner = false;
    machine m(p);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(failure(errc::ambiguous)), failed(errc::ambiguous, false)));
}

// --- single try ----------------------------------------------------------------------------

TEST(wait_fsm, a_single_try_that_is_refused_finishes_not_acquired_and_never_subscribes) {
    fsm::params p;
    p.single_try = true;
    p.deadline = t0; // wait == 0
    machine m(p);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(held(500)), not_acquired(false)));
    EXPECT_EQ(m.state(), st::finished);
}

TEST(wait_fsm, a_single_try_never_asks_the_holders_ttl) {
    fsm::params p;
    p.single_try = true;
    p.ttl_after_refusal = true;
    machine m(p);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(-1)), not_acquired(false)));
}

TEST(wait_fsm, a_single_try_that_succeeds_acquires) {
    fsm::params p;
    p.single_try = true;
    machine m(p);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(got_it(8)), acquired(8, t0, false)));
}

// --- TTL after refusal (simple lock) -------------------------------------------------------

TEST(wait_fsm, a_kind_whose_refusal_has_no_ttl_asks_for_it_before_subscribing) {
    fsm::params p = with_deadline(10s);
    p.ttl_after_refusal = true;
    machine m(p);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(held(-1)), send_ttl_query()));
    EXPECT_EQ(m.state(), st::ttl_query);
    EXPECT_TRUE(same(m.on(et::wake), none()));
    EXPECT_TRUE(same(m.reply(got_it(1)), none())); // no attempt is in flight
    m.advance(1ms);
    EXPECT_TRUE(same(m.ttl_reply(500), subscribe()));
    EXPECT_EQ(m.state(), st::trying);
    EXPECT_EQ(m.f.sent_at(), t0); // the attempt, not the TTL query
    EXPECT_TRUE(same(m.subscribed(false), wait_active(t0 + 10s)));
    EXPECT_TRUE(same(m.on(et::active), send_attempt()));
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(held(-1)), send_ttl_query()));
    EXPECT_TRUE(same(m.ttl_reply(400), sleep_on_channel(m.now + 400ms)));
    EXPECT_EQ(m.state(), st::sleeping);
}

TEST(wait_fsm, a_holder_that_vanished_before_the_ttl_query_is_tried_again_at_once) {
    fsm::params p = with_deadline(10s);
    p.ttl_after_refusal = true;
    machine m(p);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(-1)), send_ttl_query()));
    EXPECT_TRUE(same(m.ttl_reply(500), subscribe()));
    EXPECT_TRUE(same(m.subscribed(false), wait_active(t0 + 10s)));
    EXPECT_TRUE(same(m.on(et::active), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(-1)), send_ttl_query()));
    m.advance(1ms);
    EXPECT_TRUE(same(m.ttl_reply(-2), send_attempt()));
    EXPECT_EQ(m.state(), st::trying);
    EXPECT_EQ(m.f.sent_at(), m.now);
}

TEST(wait_fsm, a_holder_that_vanished_before_a_covered_subscription_is_tried_again_at_once) {
    fsm::params p = with_deadline(10s);
    p.ttl_after_refusal = true;
    machine m(p);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(-1)), send_ttl_query()));
    EXPECT_TRUE(same(m.ttl_reply(-2), subscribe()));
    m.advance(1ms);
    EXPECT_TRUE(same(m.subscribed(true), send_attempt()));
    EXPECT_EQ(m.f.sent_at(), m.now);
}

TEST(wait_fsm, a_cancel_during_the_ttl_query_finishes_and_ignores_its_reply) {
    fsm::params p;
    p.ttl_after_refusal = true;
    machine m(p);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(-1)), send_ttl_query()));
    EXPECT_TRUE(same(m.on(et::cancel), failed(errc::cancelled, false)));
    EXPECT_TRUE(same(m.ttl_reply(500), none()));
}

// --- queued and refused starts -------------------------------------------------------------

TEST(wait_fsm, a_queued_start_joins_the_channel_and_sleeps_for_at_most_the_holders_lease) {
    machine m(with_deadline(10s));
    auto want = sleep_on_channel(t0 + 2000ms);
    want.join_channel = true;
    EXPECT_TRUE(same(m.start_queued(2000), want));
    EXPECT_EQ(m.state(), st::sleeping);
    EXPECT_TRUE(m.f.may_take_handover());
    // Woken: attempt; a refusal sleeps again on the channel already joined.
    m.advance(10ms);
    EXPECT_TRUE(same(m.on(et::wake), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(700)), sleep_on_channel(m.now + 700ms)));
}

TEST(wait_fsm, a_queued_start_never_sleeps_past_the_deadline) {
    machine m(with_deadline(1s));
    auto want = sleep_on_channel(t0 + 1s);
    want.join_channel = true;
    EXPECT_TRUE(same(m.start_queued(30'000), want));
}

TEST(wait_fsm, a_queued_start_that_is_cancelled_leaves_the_channel_it_joined) {
    machine m;
    EXPECT_EQ(m.start_queued(2000).type, at::sleep);
    EXPECT_TRUE(same(m.on(et::cancel), failed(errc::cancelled, true)));
}

TEST(wait_fsm, a_start_after_the_callers_refused_attempt_subscribes_with_that_attempts_time) {
    machine m(with_deadline(10s));
    const auto sent = t0 - 5ms; // the caller's attempt on its own thread
    EXPECT_TRUE(same(m.start_refused(500, sent), subscribe()));
    EXPECT_EQ(m.state(), st::trying);
    EXPECT_EQ(m.f.sent_at(), sent);
    // Covered relative to that attempt: sleep on its TTL.
    EXPECT_TRUE(same(m.subscribed(true), sleep_on_channel(t0 + 500ms)));
}

TEST(wait_fsm, a_start_after_the_callers_refused_attempt_asks_the_ttl_when_the_kind_needs_it) {
    fsm::params p = with_deadline(10s);
    p.ttl_after_refusal = true;
    machine m(p);
    EXPECT_TRUE(same(m.start_refused(-1, t0 - 5ms), send_ttl_query()));
    EXPECT_EQ(m.state(), st::ttl_query);
    EXPECT_TRUE(same(m.ttl_reply(500), subscribe()));
    EXPECT_EQ(m.f.sent_at(), t0 - 5ms);
}

// --- hand-over -----------------------------------------------------------------------------

TEST(wait_fsm, a_hand_over_to_a_sleeping_waiter_acquires_with_the_handed_token) {
    machine m(with_deadline(10s));
    m.to_sleep(500);
    m.advance(20ms);
    const auto begun = m.now;
    EXPECT_TRUE(same(m.on(et::handover_begin), none()));
    EXPECT_EQ(m.state(), st::handover);
    EXPECT_EQ(m.f.sent_at(), begun);
    EXPECT_FALSE(m.f.may_take_handover()); // not twice
    m.advance(1ms);
    EXPECT_TRUE(same(m.on(et::timer), none()));
    EXPECT_TRUE(same(m.on(et::wake), none()));
    EXPECT_TRUE(same(m.on(et::handover_begin), none()));
    EXPECT_EQ(m.state(), st::handover);
    EXPECT_EQ(m.f.sent_at(), begun);
    EXPECT_TRUE(same(m.handover_done(handover_result::handed_over, 9), acquired(9, begun, true)));
    EXPECT_EQ(m.state(), st::finished);
}

TEST(wait_fsm, a_hand_over_that_published_instead_goes_back_to_sleep) {
    machine m(with_deadline(10s));
    m.to_sleep(500);
    EXPECT_TRUE(same(m.on(et::handover_begin), none()));
    m.advance(1ms);
    // The unlock message is on its way: sleep for it (no holder TTL left to wait for).
    EXPECT_TRUE(same(m.handover_done(handover_result::published), sleep_on_channel(t0 + 10s)));
    EXPECT_EQ(m.state(), st::sleeping);
    EXPECT_TRUE(same(m.on(et::wake), send_attempt()));
}

TEST(wait_fsm, a_hand_over_with_an_unknown_outcome_tries_again) {
    machine m(with_deadline(10s));
    m.to_sleep(500);
    EXPECT_TRUE(same(m.on(et::handover_begin), none()));
    m.advance(1ms);
    EXPECT_TRUE(same(m.handover_done(handover_result::unknown), send_attempt()));
    EXPECT_EQ(m.state(), st::trying);
    EXPECT_EQ(m.f.sent_at(), m.now);
}

TEST(wait_fsm, an_ambiguous_hand_over_is_undone_before_trying_again) {
    machine m(with_deadline(10s));
    m.to_sleep(500);
    EXPECT_TRUE(same(m.on(et::handover_begin), none()));
    m.advance(1ms);
    EXPECT_TRUE(same(m.handover_done(handover_result::ambiguous), with_undo(send_attempt())));
    EXPECT_EQ(m.state(), st::trying);
}

TEST(wait_fsm, a_hand_over_that_completes_after_a_cancel_is_undone) {
    const handover_result results[] = {handover_result::handed_over, handover_result::ambiguous,
                                       handover_result::published, handover_result::unknown};
    for (auto r : results) {
        SCOPED_TRACE(static_cast<int>(r));
        machine m(with_deadline(10s));
        m.to_sleep(500);
        EXPECT_TRUE(same(m.on(et::handover_begin), none()));
        EXPECT_TRUE(same(m.on(et::cancel), failed(errc::cancelled, true)));
        const bool may_be_ours =
            r == handover_result::handed_over || r == handover_result::ambiguous;
        EXPECT_TRUE(same(m.handover_done(r, 9), may_be_ours ? with_undo(none()) : none()));
        EXPECT_EQ(m.state(), st::finished);
    }
}

TEST(wait_fsm, only_a_waiter_asleep_on_the_channel_takes_a_hand_over) {
    machine m(with_deadline(10s));
    EXPECT_FALSE(m.f.may_take_handover());
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_FALSE(m.f.may_take_handover());
    EXPECT_TRUE(same(m.on(et::handover_begin), none()));
    EXPECT_EQ(m.state(), st::trying);
    EXPECT_TRUE(same(m.handover_done(handover_result::handed_over, 9), none()));
    EXPECT_EQ(m.state(), st::trying);
}

// --- spin policy ---------------------------------------------------------------------------

TEST(wait_fsm, the_spin_policy_polls_on_a_timer_and_gives_up_after_its_attempts) {
    machine m(spin(3, 50ms, 0ms));
    EXPECT_TRUE(same(m.on(et::start), send_attempt())); // 1
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(held(500)), sleep_timer_only(m.now + 50ms)));
    EXPECT_EQ(m.state(), st::sleeping);
    EXPECT_FALSE(m.f.may_take_handover()); // not on the channel
    EXPECT_TRUE(same(m.on(et::handover_begin), none()));
    m.advance(50ms);
    EXPECT_TRUE(same(m.on(et::timer), send_attempt())); // 2; never a sleeper: no stop_sleeping
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(held(500)), sleep_timer_only(m.now + 50ms)));
    m.advance(50ms);
    EXPECT_TRUE(same(m.on(et::timer), send_attempt())); // 3
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(held(500)), not_acquired(false)));
    EXPECT_EQ(m.state(), st::finished);
}

TEST(wait_fsm, the_spin_policy_never_subscribes_nor_asks_the_ttl) {
    fsm::params p = spin(2, 50ms, 0ms);
    p.ttl_after_refusal = true;
    p.deadline = t0 + 10s;
    machine m(p);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(-1)), sleep_timer_only(t0 + 50ms)));
    m.advance(50ms);
    EXPECT_TRUE(same(m.on(et::timer), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(-1)), not_acquired(false)));
}

TEST(wait_fsm, the_spin_policy_succeeds_on_a_later_attempt) {
    machine m(spin(3, 50ms, 0ms));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(500)), sleep_timer_only(t0 + 50ms)));
    m.advance(50ms);
    EXPECT_TRUE(same(m.on(et::timer), send_attempt()));
    m.advance(1ms);
    EXPECT_TRUE(same(m.reply(got_it(3)), acquired(3, t0 + 50ms, false)));
}

TEST(wait_fsm, a_spin_delay_is_cut_short_by_the_deadline) {
    fsm::params p = spin(5, 50ms, 0ms);
    p.deadline = t0 + 30ms;
    machine m(p);
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(500)), sleep_timer_only(t0 + 30ms)));
    m.advance(30ms);
    EXPECT_TRUE(same(m.on(et::timer), not_acquired(false)));
}

TEST(wait_fsm, a_single_spin_attempt_finishes_at_the_first_refusal) {
    machine m(spin(1, 50ms, 0ms));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(held(500)), not_acquired(false)));
}

TEST(wait_fsm, the_spin_jitter_stays_within_its_bound) {
    for (std::uint32_t seed = 1; seed <= 50; ++seed) {
        fsm::params p = spin(2, 50ms, 20ms);
        p.seed = seed;
        machine m(p);
        EXPECT_TRUE(same(m.on(et::start), send_attempt()));
        const auto a = m.reply(held(500));
        EXPECT_EQ(a.type, at::sleep);
        EXPECT_FALSE(a.on_channel);
        EXPECT_GE(a.until, t0 + 50ms) << seed;
        EXPECT_LE(a.until, t0 + 70ms) << seed;
    }
}

// --- sleep_until edge values not covered in redis_locks_protocol_test ----------------------------

TEST(wait_fsm, sleep_until_without_a_deadline_is_the_holders_expiry_or_never) {
    using dlock::detail::sleep_until;
    EXPECT_EQ(sleep_until(t0, time_point::max(), 200), t0 + 200ms);
    EXPECT_EQ(sleep_until(t0, time_point::max(), -1), time_point::max());
    EXPECT_EQ(sleep_until(t0, time_point::max(), -2), time_point::max());
    EXPECT_EQ(sleep_until(t0, t0 + 200ms, 200), t0 + 200ms); // both at once
    EXPECT_EQ(sleep_until(t0, t0 - 1ms, 200), t0 - 1ms);     // deadline already passed
}

// --- a master that moves (Sentinel): transient failures and the lock-delay ---------------------

namespace {

fsm::params moving_master(std::optional<std::chrono::milliseconds> wait) {
    fsm::params p;
    if (wait) p.deadline = t0 + *wait;
    p.retry_transient = true;
    p.transient_delay = 20ms;
    p.transient_budget = 100ms;
    return p;
}

fsm::action paused(std::int64_t ttl_ms, machine& m) {
    fsm::event ev;
    ev.type = et::paused;
    ev.ttl_ms = ttl_ms;
    return m.resume(ev);
}

} // namespace

TEST(wait_fsm, a_moving_master_retries_a_refused_or_unreachable_attempt_after_a_pause) {
    for (const auto e : {errc::unavailable, errc::readonly, errc::server_busy}) {
        machine m(moving_master(10s));
        EXPECT_TRUE(same(m.on(et::start), send_attempt()));
        EXPECT_TRUE(same(m.reply(failure(e)), sleep_timer_only(t0 + 20ms)));
        EXPECT_EQ(m.state(), st::paused);
        m.advance(20ms);
        EXPECT_TRUE(same(m.on(et::timer), send_attempt()));
        EXPECT_TRUE(same(m.reply(got_it(7)), acquired(7, t0 + 20ms, false)));
    }
}

TEST(wait_fsm, a_moving_master_undoes_an_ambiguous_attempt_before_retrying) {
    machine m(moving_master(10s));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(failure(errc::ambiguous)), with_undo(sleep_timer_only(t0 + 20ms))));
}

TEST(wait_fsm, a_moving_master_reports_the_last_failure_when_the_deadline_ends_the_pause) {
    machine m(moving_master(30ms));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(failure(errc::unavailable)), sleep_timer_only(t0 + 20ms)));
    m.advance(20ms);
    EXPECT_TRUE(same(m.on(et::timer), send_attempt()));
    EXPECT_TRUE(same(m.reply(failure(errc::readonly)), sleep_timer_only(t0 + 30ms)));
    m.advance(10ms);
    EXPECT_TRUE(same(m.on(et::timer), failed(errc::readonly, false)));
}

TEST(wait_fsm, a_moving_master_without_a_deadline_gives_up_after_the_transient_budget) {
    machine m(moving_master(std::nullopt));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(m.reply(failure(errc::unavailable)).type, at::sleep);
        m.advance(20ms);
        EXPECT_TRUE(same(m.on(et::timer), send_attempt()));
    }
    EXPECT_TRUE(same(m.reply(failure(errc::unavailable)), failed(errc::unavailable, false)));
}

TEST(wait_fsm, other_errors_and_a_single_try_are_not_retried_even_with_a_moving_master) {
    machine m(moving_master(std::nullopt));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(failure(errc::out_of_memory)), failed(errc::out_of_memory, false)));
    machine single(moving_master(0ms)); // a single try reports the failure as it is
    EXPECT_TRUE(same(single.on(et::start), send_attempt()));
    EXPECT_TRUE(same(single.reply(failure(errc::unavailable)), failed(errc::unavailable, false)));
}

TEST(wait_fsm, without_a_moving_master_a_transient_failure_finishes_as_before) {
    machine m(with_deadline(10s));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(m.reply(failure(errc::readonly)), failed(errc::readonly, false)));
}

TEST(wait_fsm, a_lock_delay_pauses_without_an_attempt_then_tries) {
    machine m(with_deadline(10s));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(paused(1500, m), sleep_timer_only(t0 + 1500ms)));
    EXPECT_TRUE(same(m.on(et::wake), none())); // an unlock message does not end the delay
    m.advance(1500ms);
    EXPECT_TRUE(same(m.on(et::timer), send_attempt()));
}

TEST(wait_fsm, a_lock_delay_refuses_a_single_try_and_is_cut_by_the_deadline) {
    fsm::params one;
    one.deadline = t0;
    one.single_try = true;
    machine single(one);
    EXPECT_TRUE(same(single.on(et::start), send_attempt()));
    EXPECT_TRUE(same(paused(1500, single), not_acquired(false)));

    machine m(with_deadline(500ms));
    EXPECT_TRUE(same(m.on(et::start), send_attempt()));
    EXPECT_TRUE(same(paused(1500, m), sleep_timer_only(t0 + 500ms)));
    m.advance(500ms);
    EXPECT_TRUE(same(m.on(et::timer), not_acquired(false)));
}
