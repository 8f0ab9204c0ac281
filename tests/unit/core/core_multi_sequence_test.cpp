// Socket-free tests of core::multi_sequence: the decisions of one multi-lock acquisition,
// driven by hand with a fake time that moves only when a test says so.
#include "core/multi_sequence.hpp"

#include <dlock/error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <optional>

using namespace std::chrono_literals;
using dlock::errc;
using seq = dlock::detail::multi_sequence;
using at = seq::action_type;
using time_point = seq::clock::time_point;
using ms = std::chrono::milliseconds;

namespace {

const time_point t0 = time_point{} + 1000h;

void expect_acquire(const seq::action& a, std::size_t member, std::optional<ms> wait,
                    std::optional<ms> lease) {
    EXPECT_EQ(a.what, at::acquire);
    EXPECT_EQ(a.member, member);
    EXPECT_EQ(a.wait, wait);
    EXPECT_EQ(a.lease, lease);
}

void expect_refresh(const seq::action& a, std::size_t count, ms lease) {
    EXPECT_EQ(a.what, at::refresh);
    EXPECT_EQ(a.count, count);
    EXPECT_EQ(a.lease, std::optional<ms>(lease));
}

void expect_done(const seq::action& a, bool acquired, std::error_code ec = {}) {
    EXPECT_EQ(a.what, at::done);
    EXPECT_EQ(a.acquired, acquired);
    EXPECT_EQ(a.ec, ec);
}

} // namespace

TEST(multi_sequence, takes_every_member_in_order_with_what_is_left_of_one_wait) {
    seq s(3, 1000ms, std::nullopt, t0);
    expect_acquire(s.start(t0), 0, 1000ms, std::nullopt);
    expect_acquire(s.acquired(t0 + 100ms, false, t0 + 30s), 1, 900ms, std::nullopt);
    expect_acquire(s.acquired(t0 + 350ms, false, t0 + 30s), 2, 650ms, std::nullopt);
    expect_done(s.acquired(t0 + 400ms, false, t0 + 30s), true);
    EXPECT_EQ(s.held(), 3u);
}

TEST(multi_sequence, waits_forever_per_member_when_the_set_has_no_wait) {
    seq s(2, std::nullopt, std::nullopt, t0);
    expect_acquire(s.start(t0), 0, std::nullopt, std::nullopt);
    expect_acquire(s.acquired(t0 + 10s, false, t0 + 40s), 1, std::nullopt, std::nullopt);
}

TEST(multi_sequence, a_zero_wait_tries_each_member_once) {
    seq s(2, 0ms, std::nullopt, t0);
    expect_acquire(s.start(t0), 0, 0ms, std::nullopt);
    expect_acquire(s.acquired(t0 + 1ms, false, t0 + 30s), 1, 0ms, std::nullopt);
}

TEST(multi_sequence, a_negative_wait_is_zero) {
    seq s(1, -5ms, std::nullopt, t0);
    expect_acquire(s.start(t0), 0, 0ms, std::nullopt);
}

TEST(multi_sequence, a_member_not_acquired_releases_the_held_ones_before_reporting) {
    seq s(3, 500ms, std::nullopt, t0);
    s.start(t0);
    s.acquired(t0 + 1ms, false, t0 + 30s);
    const auto r = s.not_acquired(t0 + 500ms);
    EXPECT_EQ(r.what, at::release);
    EXPECT_EQ(s.held(), 1u);
    expect_done(s.released(t0 + 501ms), false);
    EXPECT_EQ(s.held(), 0u);
}

TEST(multi_sequence, an_error_releases_the_held_ones_then_reports_it) {
    seq s(2, 500ms, std::nullopt, t0);
    s.start(t0);
    s.acquired(t0, false, t0 + 30s);
    EXPECT_EQ(s.failed(make_error_code(errc::unavailable)).what, at::release);
    expect_done(s.released(t0 + 1ms), false, make_error_code(errc::unavailable));
}

TEST(multi_sequence, an_error_on_the_first_member_still_passes_through_release) {
    seq s(2, 500ms, std::nullopt, t0);
    s.start(t0);
    EXPECT_EQ(s.failed(make_error_code(errc::invalid_argument)).what, at::release);
    EXPECT_EQ(s.held(), 0u);
    expect_done(s.released(t0), false, make_error_code(errc::invalid_argument));
}

TEST(multi_sequence, a_held_member_lost_meanwhile_restarts_from_the_first_within_the_wait) {
    seq s(3, 1000ms, std::nullopt, t0);
    s.start(t0);
    s.acquired(t0 + 10ms, false, t0 + 30s);
    EXPECT_EQ(s.acquired(t0 + 20ms, true, t0 + 30s).what, at::release);
    expect_acquire(s.released(t0 + 30ms), 0, 970ms, std::nullopt);
    EXPECT_EQ(s.restarts(), 1u);
    EXPECT_EQ(s.held(), 0u);
}

TEST(multi_sequence, a_loss_after_the_deadline_reports_not_acquired) {
    seq s(2, 100ms, std::nullopt, t0);
    s.start(t0);
    s.acquired(t0 + 10ms, false, t0 + 30s);
    EXPECT_EQ(s.acquired(t0 + 100ms, true, t0 + 30s).what, at::release);
    expect_done(s.released(t0 + 101ms), false);
    EXPECT_EQ(s.restarts(), 0u);
}

TEST(multi_sequence, a_fixed_lease_is_extended_on_every_member_but_the_last_at_completion) {
    seq s(3, 5000ms, 9000ms, t0);
    // Members before the last outlive the wait: lease L + what is left of it.
    expect_acquire(s.start(t0), 0, 5000ms, 14000ms);
    expect_acquire(s.acquired(t0, false, t0 + 14000ms), 1, 5000ms, 14000ms);
    // The last one: lease L (the set is complete once it is taken).
    expect_acquire(s.acquired(t0 + 1000ms, false, t0 + 14000ms), 2, 4000ms, 9000ms);
    expect_refresh(s.acquired(t0 + 2000ms, false, t0 + 11000ms), 2, 9000ms);
    expect_done(s.refreshed(t0 + 2001ms, {}, t0 + 11000ms), true);
}

TEST(multi_sequence, a_single_member_with_a_fixed_lease_needs_no_extension) {
    seq s(1, 100ms, 1000ms, t0);
    s.start(t0);
    expect_done(s.acquired(t0, false, t0 + 1000ms), true);
}

TEST(multi_sequence, a_long_wait_is_cut_so_held_members_are_refreshed_before_they_expire) {
    seq s(2, std::nullopt, 900ms, t0);
    expect_acquire(s.start(t0), 0, std::nullopt, 900ms);
    // Member 0 valid until t0+900 ms: refresh at t0+600 ms, so member 1 waits 600 ms.
    expect_acquire(s.acquired(t0, false, t0 + 900ms), 1, 600ms, 900ms);
    expect_refresh(s.not_acquired(t0 + 600ms), 1, 900ms);
    // Refreshed until t0+1500 ms: wait again until t0+1200 ms.
    expect_acquire(s.refreshed(t0 + 600ms, {}, t0 + 1500ms), 1, 600ms, 900ms);
    expect_refresh(s.acquired(t0 + 700ms, false, t0 + 1500ms), 1, 900ms);
    expect_done(s.refreshed(t0 + 701ms, {}, t0 + 1600ms), true);
}

TEST(multi_sequence, a_bounded_wait_is_never_cut_because_early_members_outlive_it) {
    seq s(2, 650ms, 900ms, t0);
    expect_acquire(s.start(t0), 0, 650ms, 1550ms);
    expect_acquire(s.acquired(t0, false, t0 + 1550ms), 1, 650ms, 900ms);
    EXPECT_EQ(s.not_acquired(t0 + 650ms).what, at::release);
    expect_done(s.released(t0 + 651ms), false);
}

TEST(multi_sequence, a_refresh_that_finds_a_member_lost_restarts) {
    seq s(2, std::nullopt, 900ms, t0);
    s.start(t0);
    s.acquired(t0, false, t0 + 900ms);
    s.not_acquired(t0 + 600ms);
    EXPECT_EQ(s.refreshed(t0 + 601ms, make_error_code(errc::not_owner), t0).what, at::release);
    expect_acquire(s.released(t0 + 602ms), 0, std::nullopt, 900ms);
    EXPECT_EQ(s.restarts(), 1u);
}

TEST(multi_sequence, a_refresh_that_fails_otherwise_reports_the_error) {
    seq s(2, std::nullopt, 900ms, t0);
    s.start(t0);
    s.acquired(t0, false, t0 + 900ms);
    s.not_acquired(t0 + 600ms);
    EXPECT_EQ(s.refreshed(t0 + 601ms, make_error_code(errc::ambiguous), t0 + 900ms).what,
              at::release);
    expect_done(s.released(t0 + 602ms), false, make_error_code(errc::ambiguous));
}

TEST(multi_sequence, held_members_already_due_are_refreshed_before_the_next_attempt) {
    seq s(3, std::nullopt, 300ms, t0);
    s.start(t0);
    s.acquired(t0, false, t0 + 300ms);
    // The second member took 250 ms: the first is due for its refresh (t0+200 ms).
    expect_refresh(s.acquired(t0 + 250ms, false, t0 + 300ms), 2, 300ms);
    expect_acquire(s.refreshed(t0 + 251ms, {}, t0 + 550ms), 2, 199ms, 300ms);
}

TEST(multi_sequence, a_watchdog_set_never_cuts_a_wait_or_refreshes) {
    seq s(2, std::nullopt, std::nullopt, t0);
    s.start(t0);
    expect_acquire(s.acquired(t0, false, t0 + 1ms), 1, std::nullopt, std::nullopt);
    EXPECT_EQ(s.not_acquired(t0 + 1h).what, at::release);
}
