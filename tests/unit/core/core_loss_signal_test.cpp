// core/loss_signal.hpp: how a held lock tells its holder that it is gone, for every backend:
// valid_until, the lost and released flags, the stop token and the callbacks.
#include "core/loss_signal.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stop_token>
#include <thread>

using namespace std::chrono_literals;

namespace {

struct test_signal : dlock::detail::loss_signal {
    bool lose() { return mark_lost(); }
    bool release() { return mark_released(); }
};

TEST(loss_signal, loss_requests_stop_runs_each_callback_once_and_ends_validity) {
    test_signal s;
    s.set_valid_until(std::chrono::steady_clock::now() + 1h);
    int a = 0, b = 0;
    s.on_lost([&] { ++a; });
    s.on_lost([&] { ++b; });
    const auto token = s.stop_token();
    EXPECT_FALSE(token.stop_requested());
    EXPECT_TRUE(s.lose());
    EXPECT_FALSE(s.lose()) << "a second loss is not a loss";
    EXPECT_TRUE(s.lost());
    EXPECT_TRUE(token.stop_requested());
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, 1);
    EXPECT_LT(s.valid_until(), std::chrono::steady_clock::now());
}

TEST(loss_signal, a_callback_added_after_the_loss_runs_at_once_on_the_caller_thread) {
    test_signal s;
    s.lose();
    std::thread::id ran_on;
    s.on_lost([&] { ran_on = std::this_thread::get_id(); });
    EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(loss_signal, a_release_ends_validity_without_stop_or_callbacks) {
    test_signal s;
    s.set_valid_until(std::chrono::steady_clock::now() + 1h);
    bool called = false;
    s.on_lost([&] { called = true; });
    EXPECT_TRUE(s.release());
    EXPECT_FALSE(s.release()) << "released once";
    EXPECT_TRUE(s.released());
    EXPECT_FALSE(s.lost());
    EXPECT_FALSE(s.stop_token().stop_requested());
    EXPECT_FALSE(called);
    EXPECT_LT(s.valid_until(), std::chrono::steady_clock::now());
}

TEST(loss_signal, a_token_asked_for_after_the_loss_is_stopped) {
    // The stop source is made by the first stop_token(): a loss before it must still show.
    test_signal s;
    s.lose();
    EXPECT_TRUE(s.stop_token().stop_requested());
}

TEST(loss_signal, a_token_or_callback_asked_for_while_the_loss_is_marked_is_never_missed) {
    // The stop source and the callbacks are made by whoever asks first, racing the loss on
    // another thread: every token must end stopped and every callback run exactly once.
    for (int round = 0; round < 2000; ++round) {
        test_signal s;
        std::atomic<int> ran{0};
        std::stop_token token;
        std::thread asker([&] {
            token = s.stop_token();
            s.on_lost([&] { ran.fetch_add(1); });
        });
        std::thread loser([&] { s.lose(); });
        asker.join();
        loser.join();
        ASSERT_TRUE(token.stop_requested()) << "round " << round;
        ASSERT_EQ(ran.load(), 1) << "round " << round;
    }
}

TEST(loss_signal, validity_is_what_was_set_last) {
    test_signal s;
    const auto t = std::chrono::steady_clock::now() + 5s;
    s.set_valid_until(t);
    EXPECT_EQ(s.valid_until(), t);
    s.set_valid_until(t - 1s);
    EXPECT_EQ(s.valid_until(), t - 1s);
}

} // namespace
