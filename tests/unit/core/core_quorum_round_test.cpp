// Socket-free tests of core::quorum_round and retry_schedule: the Redlock rules driven by hand
// with a fake clock (votes arriving, timeouts, validity used up, extension and release rounds).
#include "core/quorum_round.hpp"

#include <gtest/gtest.h>

#include <chrono>

using namespace std::chrono_literals;
using round_t = dlock::detail::quorum_round;
using vote = round_t::vote;
using verdict = round_t::verdict;
using reason = round_t::reason;
using dlock::detail::retry_schedule;

namespace {

const round_t::clock::time_point t0 = round_t::clock::time_point{} + 1000h;

TEST(quorum_round, quorum_is_a_strict_majority) {
    EXPECT_EQ(round_t::quorum_of(1), 1u);
    EXPECT_EQ(round_t::quorum_of(2), 2u);
    EXPECT_EQ(round_t::quorum_of(3), 2u);
    EXPECT_EQ(round_t::quorum_of(4), 3u);
    EXPECT_EQ(round_t::quorum_of(5), 3u);
}

TEST(quorum_round, three_yes_votes_of_five_win_at_once_with_the_validity_from_the_start) {
    round_t r(5, t0, 50ms, 10s);
    EXPECT_EQ(r.on_vote(0, vote::yes, t0 + 1ms), verdict::open);
    EXPECT_EQ(r.on_vote(3, vote::yes, t0 + 2ms), verdict::open);
    EXPECT_EQ(r.on_vote(4, vote::yes, t0 + 3ms), verdict::won);
    EXPECT_EQ(r.why(), reason::none);
    // valid_until is measured from before the first send, not from the deciding vote.
    EXPECT_EQ(r.valid_until(), t0 + 10s - 102ms);
    EXPECT_EQ(r.count(vote::pending), 2u);
}

TEST(quorum_round, two_masters_down_still_leave_a_quorum_of_five) {
    round_t r(5, t0, 50ms, 10s);
    r.on_vote(0, vote::failed, t0 + 1ms);
    r.on_vote(1, vote::failed, t0 + 1ms);
    r.on_vote(2, vote::yes, t0 + 2ms);
    r.on_vote(3, vote::yes, t0 + 2ms);
    EXPECT_EQ(r.on_vote(4, vote::yes, t0 + 3ms), verdict::won);
}

TEST(quorum_round, three_masters_down_lose_the_round_as_soon_as_the_third_fails) {
    round_t r(5, t0, 50ms, 10s);
    r.on_vote(0, vote::failed, t0 + 1ms);
    r.on_vote(1, vote::yes, t0 + 1ms);
    EXPECT_EQ(r.on_vote(2, vote::refused, t0 + 1ms), verdict::open);
    EXPECT_EQ(r.on_vote(3, vote::failed, t0 + 2ms), verdict::lost);
    EXPECT_EQ(r.why(), reason::quorum_unreachable);
}

TEST(quorum_round, a_quorum_reached_after_the_validity_is_used_up_is_lost) {
    // 100 ms lease: validity ends at t0 + 100 - 3 ms. The round's deadline is capped there.
    round_t r(3, t0, 500ms, 100ms);
    EXPECT_EQ(r.deadline(), t0 + 97ms);
    r.on_vote(0, vote::yes, t0 + 1ms);
    EXPECT_EQ(r.on_vote(1, vote::yes, t0 + 97ms), verdict::lost);
    EXPECT_EQ(r.why(), reason::validity_used_up);
}

TEST(quorum_round, a_quorum_one_moment_before_the_validity_ends_wins) {
    round_t r(3, t0, 500ms, 100ms);
    r.on_vote(0, vote::yes, t0 + 1ms);
    EXPECT_EQ(r.on_vote(1, vote::yes, t0 + 96ms), verdict::won);
}

TEST(quorum_round, the_deadline_times_out_the_silent_masters_and_decides) {
    round_t r(5, t0, 50ms, 10s);
    EXPECT_EQ(r.deadline(), t0 + 50ms);
    r.on_vote(0, vote::yes, t0 + 1ms);
    r.on_vote(1, vote::yes, t0 + 1ms);
    EXPECT_EQ(r.on_deadline(t0 + 50ms), verdict::lost);
    EXPECT_EQ(r.count(vote::timed_out), 3u);
    EXPECT_EQ(r.why(), reason::quorum_unreachable);
}

TEST(quorum_round, votes_after_the_verdict_are_recorded_but_change_nothing) {
    round_t r(3, t0, 50ms, 10s);
    r.on_vote(0, vote::refused, t0 + 1ms);
    EXPECT_EQ(r.on_vote(1, vote::refused, t0 + 1ms), verdict::lost);
    EXPECT_EQ(r.on_vote(2, vote::yes, t0 + 2ms), verdict::lost);
    EXPECT_EQ(r.votes()[2], vote::yes);
}

TEST(quorum_round, a_second_vote_of_one_master_and_unknown_masters_are_ignored) {
    round_t r(3, t0, 50ms, 10s);
    r.on_vote(0, vote::yes, t0);
    EXPECT_EQ(r.on_vote(0, vote::yes, t0), verdict::open);
    EXPECT_EQ(r.on_vote(7, vote::yes, t0), verdict::open);
    EXPECT_EQ(r.on_vote(1, vote::pending, t0), verdict::open);
    EXPECT_EQ(r.count(vote::yes), 1u);
}

TEST(quorum_round, an_extension_refused_by_a_quorum_means_the_lock_is_lost) {
    round_t r(5, t0, 50ms, 300ms);
    r.on_vote(0, vote::refused, t0);
    r.on_vote(1, vote::refused, t0);
    EXPECT_FALSE(r.refused_by_quorum()); // 3 may still say yes
    r.on_vote(2, vote::refused, t0);
    EXPECT_TRUE(r.refused_by_quorum());
    EXPECT_EQ(r.state(), verdict::lost);
}

TEST(quorum_round, an_extension_that_times_out_is_lost_but_not_refused) {
    round_t r(5, t0, 50ms, 300ms);
    r.on_vote(0, vote::yes, t0);
    r.on_vote(1, vote::yes, t0);
    EXPECT_EQ(r.on_deadline(t0 + 50ms), verdict::lost);
    EXPECT_FALSE(r.refused_by_quorum());
}

TEST(quorum_round, a_release_round_has_no_validity_rule) {
    round_t r(3, t0, 50ms, std::nullopt);
    r.on_vote(0, vote::yes, t0 + 1h);
    EXPECT_EQ(r.on_vote(1, vote::yes, t0 + 1h), verdict::won);
}

TEST(quorum_round, no_masters_is_lost_at_once) {
    round_t r(0, t0, 50ms, 10s);
    EXPECT_EQ(r.state(), verdict::lost);
}

TEST(retry_schedule, pauses_by_the_delay_plus_a_jitter_bounded_by_the_setting) {
    retry_schedule s{.wait_deadline = t0 + 10s, .attempts = 0, .delay = 50ms, .jitter = 100ms};
    EXPECT_EQ(s.next(1, t0, 0), t0 + 50ms);
    EXPECT_EQ(s.next(1, t0, 100), t0 + 150ms);
    EXPECT_EQ(s.next(1, t0, 101), t0 + 50ms); // random % (jitter + 1)
}

TEST(retry_schedule, gives_up_when_the_next_round_would_start_after_the_wait) {
    retry_schedule s{.wait_deadline = t0 + 100ms, .attempts = 0, .delay = 50ms, .jitter = 0ms};
    EXPECT_TRUE(s.next(1, t0 + 40ms, 0));
    EXPECT_FALSE(s.next(1, t0 + 50ms, 0));
}

TEST(retry_schedule, gives_up_after_the_attempts_and_never_without_a_deadline_otherwise) {
    retry_schedule s{.wait_deadline = std::nullopt, .attempts = 3, .delay = 10ms, .jitter = 0ms};
    EXPECT_TRUE(s.next(2, t0, 0));
    EXPECT_FALSE(s.next(3, t0, 0));
    s.attempts = 0;
    EXPECT_TRUE(s.next(1000000, t0 + 1000h, 0));
}

} // namespace
