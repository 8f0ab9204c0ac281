// core/deadline_watch.hpp: the loss timer of holds renewed one by one (Redis, Redlock), over
// an io_context run on the test's thread and holds built on core::loss_signal.
#include "core/deadline_watch.hpp"
#include "core/loss_signal.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

using namespace std::chrono_literals;
using dlock::detail::loss_signal;

namespace {

using clock_type = std::chrono::steady_clock;

struct test_hold : loss_signal {
    explicit test_hold(clock_type::time_point until) { set_valid_until(until); }
    bool releasing = false;
    int expired = 0;
    clock_type::time_point expired_at{};
    void release() { mark_released(); }
};

struct test_policy {
    static bool releasing(const test_hold& h) { return h.releasing; }
    static void expire(test_hold& h) {
        ++h.expired;
        h.expired_at = clock_type::now();
    }
};

using watch_type = dlock::detail::deadline_watch<test_hold, test_policy>;

TEST(deadline_watch, ends_a_hold_once_when_its_deadline_passes_and_not_before) {
    asio::io_context io;
    watch_type w(io);
    const auto until = clock_type::now() + 20ms;
    auto h = std::make_shared<test_hold>(until);
    w.add(h);
    EXPECT_EQ(w.size(), 1u);
    io.run(); // returns when nothing is armed any more: after the expiry
    EXPECT_EQ(h->expired, 1);
    EXPECT_GE(h->expired_at, until);
    EXPECT_EQ(w.size(), 0u);
}

TEST(deadline_watch, a_removed_or_released_hold_is_never_ended) {
    asio::io_context io;
    watch_type w(io);
    auto removed = std::make_shared<test_hold>(clock_type::now() + 5ms);
    auto released = std::make_shared<test_hold>(clock_type::now() + 5ms);
    w.add(removed);
    w.add(released);
    w.remove(removed.get());
    released->release();
    io.run();
    EXPECT_EQ(removed->expired, 0);
    EXPECT_EQ(released->expired, 0);
    EXPECT_EQ(w.size(), 0u);
}

TEST(deadline_watch, an_earlier_deadline_added_later_is_ended_first) {
    asio::io_context io;
    watch_type w(io);
    auto late = std::make_shared<test_hold>(clock_type::now() + 1h);
    auto early = std::make_shared<test_hold>(clock_type::now() + 10ms);
    w.add(late);
    w.add(early); // earlier than the armed deadline: re-arms
    while (early->expired == 0)
        ASSERT_EQ(io.run_one_for(5s), 1u) << "the earlier deadline never fired";
    EXPECT_EQ(late->expired, 0);
    EXPECT_EQ(w.size(), 1u);
    w.stop(); // forgets the late hold without ending it and cancels the timer
    io.run();
    EXPECT_EQ(late->expired, 0);
    EXPECT_EQ(w.size(), 0u);
}

TEST(deadline_watch, a_releasing_hold_past_its_deadline_is_left_to_its_release) {
    asio::io_context io;
    watch_type w(io);
    auto h = std::make_shared<test_hold>(clock_type::now() - 1ms); // already past
    h->releasing = true;
    w.add(h);
    // The check keeps the hold (a release is in flight) and arms nothing for it: run() returns
    // instead of firing a timer at a past deadline again and again.
    io.run();
    EXPECT_EQ(h->expired, 0);
    EXPECT_EQ(w.size(), 1u);
    h->release(); // the release ends it; the next check drops it
    w.check();
    EXPECT_EQ(h->expired, 0);
    EXPECT_EQ(w.size(), 0u);
}

TEST(deadline_watch, a_release_that_gives_the_hold_back_re_arms_its_deadline) {
    asio::io_context io;
    watch_type w(io);
    auto h = std::make_shared<test_hold>(clock_type::now() - 1ms);
    h->releasing = true;
    w.add(h);
    io.run(); // kept, nothing armed
    ASSERT_EQ(h->expired, 0);
    h->releasing = false; // the release failed: still held, and past its deadline
    w.add(h);             // as the backend does
    io.restart();
    io.run();
    EXPECT_EQ(h->expired, 1);
    EXPECT_EQ(w.size(), 0u);
}

TEST(deadline_watch, check_after_a_renewal_round_ends_what_is_due) {
    asio::io_context io;
    watch_type w(io);
    auto h = std::make_shared<test_hold>(clock_type::now() + 1h);
    w.add(h);
    h->set_valid_until(clock_type::now() - 1ms); // a round that failed left it past due
    w.check();
    EXPECT_EQ(h->expired, 1);
    EXPECT_EQ(w.size(), 0u);
    w.stop();
    io.run();
}

TEST(deadline_watch, ignores_holds_after_stop) {
    asio::io_context io;
    watch_type w(io);
    w.stop();
    auto h = std::make_shared<test_hold>(clock_type::now());
    w.add(h);
    EXPECT_EQ(w.size(), 0u);
    EXPECT_FALSE(w.for_each([](const std::shared_ptr<test_hold>&) {}));
    io.run();
    EXPECT_EQ(h->expired, 0);
}

} // namespace
