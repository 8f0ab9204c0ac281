// zookeeper/touches.hpp: what answered requests prove the ensemble's leader saw of a session
// (the lease rule behind Z09, docs/design/zookeeper.md).
#include "zookeeper/touches.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace dlock::detail::zk {
namespace {

using namespace std::chrono_literals;
using clock = touches::clock;

const clock::time_point t0 = clock::time_point{} + 1000s;

// A standalone server expires its sessions itself: every answer counts at its send time.
TEST(zk_touches, without_a_lag_an_answer_counts_at_its_send_time) {
    touches t(0ms, t0);
    EXPECT_EQ(t.answered(t0 + 100ms), t0 + 100ms);
    EXPECT_EQ(t.answered(t0 + 700ms), t0 + 700ms);
    EXPECT_EQ(t.answered(t0 + 300ms), t0 + 700ms) << "a late answer never moves it back";
}

// With a lag, an answer proves only requests sent at least the lag before it; until one
// exists the session's creation counts.
TEST(zk_touches, an_answer_proves_only_requests_a_lag_older) {
    touches t(2000ms, t0);
    EXPECT_EQ(t.answered(t0 + 500ms), t0);
    EXPECT_EQ(t.answered(t0 + 1000ms), t0);
    EXPECT_EQ(t.answered(t0 + 1999ms), t0);
    EXPECT_EQ(t.answered(t0 + 2500ms), t0 + 500ms); // 500 <= 2500 - 2000
    EXPECT_EQ(t.answered(t0 + 3100ms), t0 + 1000ms);
    EXPECT_EQ(t.answered(t0 + 3100ms), t0 + 1000ms);
    EXPECT_EQ(t.answered(t0 + 4000ms), t0 + 1999ms);
}

// The Z09 case: answers keep coming from a follower cut off from its leader; the bound moves
// only as far as requests sent a lag before the latest answer (or the creation), never up to
// the answers.
TEST(zk_touches, answers_of_a_cut_off_follower_move_the_bound_a_lag_behind) {
    const auto lag = 2000ms;
    touches t(lag, t0);
    for (auto at = t0; at <= t0 + 10s; at += 100ms) {
        const auto proven = t.answered(at);
        EXPECT_LE(proven, std::max(t0, at - lag)) << "at " << (at - t0).count();
    }
}

// Many answers keep little: one send time per lag / 8, and the bound is at most that much
// older than the exact one.
TEST(zk_touches, many_answers_keep_a_bounded_history) {
    const auto lag = 800ms;
    touches t(lag, t0);
    clock::time_point proven{};
    for (auto at = t0; at <= t0 + 5s; at += 1ms)
        proven = t.answered(at);
    const auto newest = t0 + 5s;
    EXPECT_LE(proven, newest - lag);
    EXPECT_GE(proven, newest - lag - lag / 8);
}

} // namespace
} // namespace dlock::detail::zk
