// core/warning.cpp: the warning stage every backend's hold has (hold::warning_token(),
// on_warning()), driven here by a hold whose validity the test sets, on an io_context of its
// own: no server, no renewals but the test's.
#include "core/hold.hpp"
#include "core/metrics.hpp"

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

/// A hold whose valid_until, lease and loss the test sets; its executor is the test's.
class test_hold final : public dlock::detail::hold {
public:
    test_hold(asio::io_context& io, std::chrono::milliseconds lease)
        : io_(io)
        , lease_(lease) {}
    const std::string& name() const noexcept override { return name_; }
    std::optional<std::uint64_t> fencing_token() const noexcept override { return 1; }
    void release_blocking(std::error_code& ec) override {
        ec.clear();
        mark_released();
    }
    void release_async(std::function<void(std::error_code)> done) override {
        mark_released();
        done({});
    }
    void extend(std::chrono::milliseconds, std::error_code& ec) override { ec.clear(); }
    void extend_async(std::chrono::milliseconds,
                      std::function<void(std::error_code)> done) override {
        done({});
    }
    asio::any_io_executor executor() const override { return io_.get_executor(); }
    std::chrono::milliseconds lease_length() const noexcept override { return lease_; }
    void with_metrics(const std::function<void(dlock::detail::client_metrics&)>& f) const override {
        f(metrics);
    }
    void lose() { mark_lost(); }

    mutable dlock::detail::client_metrics metrics; ///< what the core counts for this hold

private:
    asio::io_context& io_;
    std::chrono::milliseconds lease_;
    std::string name_ = "job";
};

/// An io_context running on a thread of its own while the object lives.
struct io_thread {
    asio::io_context io;
    asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
    std::thread t{[this] { io.run(); }};
    ~io_thread() {
        work.reset();
        io.stop();
        t.join();
    }
};

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds budget) {
    const auto end = clock_type::now() + budget;
    while (!pred()) {
        if (clock_type::now() > end) return false;
        std::this_thread::sleep_for(2ms);
    }
    return true;
}

TEST(warning, a_hold_already_within_its_margin_warns_once_without_being_lost) {
    io_thread t;
    auto h = std::make_shared<test_hold>(t.io, 3000ms); // margin: a third, 1 s
    h->set_valid_until(clock_type::now() + 200ms);
    std::atomic<int> calls{0};
    h->on_warning([&] { ++calls; });
    const auto token = h->warning_token();
    // The warning token is stopped before the callbacks run: wait for both.
    ASSERT_TRUE(eventually([&] { return token.stop_requested() && calls.load() == 1; }, 5s));
    EXPECT_TRUE(h->warned());
    EXPECT_FALSE(h->lost());
    EXPECT_FALSE(h->stop_token().stop_requested()) << "a warning is not the loss";
    std::atomic<int> late{0};
    h->on_warning([&] { ++late; });
    EXPECT_EQ(late.load(), 1) << "a callback added after the warning runs at once";
}

TEST(warning, an_unrenewed_hold_warns_no_earlier_than_its_margin_before_the_end) {
    io_thread t;
    auto h = std::make_shared<test_hold>(t.io, 3000ms);
    h->set_warn_margin(300ms);
    const auto until = clock_type::now() + 600ms;
    h->set_valid_until(until);
    std::atomic<clock_type::rep> warned_at{0};
    h->on_warning([&] { warned_at = clock_type::now().time_since_epoch().count(); });
    ASSERT_TRUE(eventually([&] { return warned_at.load() != 0; }, 5s));
    EXPECT_GE(clock_type::time_point(clock_type::duration(warned_at.load())), until - 300ms);
}

TEST(warning, a_renewal_before_the_margin_moves_the_warning) {
    io_thread t;
    auto h = std::make_shared<test_hold>(t.io, 3000ms);
    h->set_warn_margin(300ms);
    h->set_valid_until(clock_type::now() + 500ms);
    const auto token = h->warning_token();
    h->set_valid_until(clock_type::now() + 1h); // renewed before the timer (at +200 ms) fires
    // The timer fires, finds the new validity and sets itself again.
    std::this_thread::sleep_for(400ms); // an observation window, not synchronisation
    EXPECT_FALSE(token.stop_requested());
}

TEST(warning, a_loss_warns_first_when_the_timer_has_not) {
    io_thread t;
    auto h = std::make_shared<test_hold>(t.io, 3000ms);
    h->set_valid_until(clock_type::now() + 1h);
    std::vector<std::string> order;
    std::mutex mu;
    h->on_lost([&] {
        std::lock_guard lk(mu);
        order.emplace_back("lost");
    });
    h->on_warning([&] {
        std::lock_guard lk(mu);
        order.emplace_back("warning");
    });
    h->lose();
    std::lock_guard lk(mu);
    EXPECT_EQ(order, (std::vector<std::string>{"warning", "lost"}));
    EXPECT_TRUE(h->warned());
}

TEST(warning, a_hold_watched_after_its_loss_warns) {
    io_thread t;
    auto h = std::make_shared<test_hold>(t.io, 3000ms);
    h->lose();
    const auto token = h->warning_token();
    EXPECT_TRUE(eventually([&] { return token.stop_requested(); }, 5s));
}

TEST(warning, a_release_never_warns) {
    io_thread t;
    auto h = std::make_shared<test_hold>(t.io, 3000ms);
    h->set_warn_margin(100ms);
    h->set_valid_until(clock_type::now() + 1h);
    const auto token = h->warning_token();
    std::error_code ec;
    h->release_blocking(ec); // valid_until is now in the past: a watch would see it "near"
    // Let the I/O thread run whatever the watch posted.
    std::atomic<bool> drained{false};
    asio::post(t.io, [&] { drained = true; });
    ASSERT_TRUE(eventually([&] { return drained.load(); }, 5s));
    EXPECT_FALSE(token.stop_requested());
    EXPECT_FALSE(h->warned());
}

TEST(max_hold, caps_held_until_warns_a_margin_before_then_releases_and_is_lost_with_its_cause) {
    io_thread t;
    auto h = std::make_shared<test_hold>(t.io, 3000ms);
    h->set_valid_until(clock_type::now() + 1h); // renewed far beyond max_hold
    h->set_warn_margin(100ms);
    const auto granted = clock_type::now();
    h->set_max_hold(300ms);
    EXPECT_LE(h->held_until(), clock_type::now() + 300ms);
    EXPECT_GT(h->valid_until(), clock_type::now() + 30min) << "the backend's view is unchanged";
    std::vector<std::string> order;
    std::mutex mu;
    h->on_warning([&] {
        std::lock_guard lk(mu);
        order.emplace_back("warning");
    });
    h->on_lost([&] {
        std::lock_guard lk(mu);
        order.emplace_back("lost");
    });
    ASSERT_TRUE(eventually(
        [&] {
            std::lock_guard lk(mu);
            return order.size() == 2;
        },
        5s));
    EXPECT_GE(clock_type::now(), granted + 300ms);
    EXPECT_EQ(order, (std::vector<std::string>{"warning", "lost"}));
    EXPECT_TRUE(h->released()) << "the backend's release was started";
    EXPECT_EQ(h->cause(), dlock::loss_cause::max_hold);
    EXPECT_LT(h->held_until(), clock_type::now());
    const auto m = h->metrics.snapshot();
    EXPECT_EQ(m.losses[static_cast<std::size_t>(dlock::loss_cause::max_hold)], 1u);
    EXPECT_EQ(m.warnings, 1u);
}

TEST(max_hold, a_hold_released_before_its_max_hold_is_not_lost) {
    io_thread t;
    auto h = std::make_shared<test_hold>(t.io, 3000ms);
    h->set_valid_until(clock_type::now() + 1h);
    h->set_max_hold(100ms);
    std::error_code ec;
    h->release_blocking(ec);
    std::this_thread::sleep_for(300ms); // an observation window past max_hold, not synchronisation
    std::atomic<bool> drained{false};
    asio::post(t.io, [&] { drained = true; });
    ASSERT_TRUE(eventually([&] { return drained.load(); }, 5s));
    EXPECT_FALSE(h->lost());
    EXPECT_EQ(h->cause(), std::nullopt);
    EXPECT_EQ(h->metrics.snapshot().losses_total(), 0u);
}

TEST(max_hold, a_lost_hold_keeps_its_first_cause) {
    io_thread t;
    auto h = std::make_shared<test_hold>(t.io, 3000ms);
    h->lose();
    EXPECT_EQ(h->cause(), std::nullopt) << "lost without a known cause";
    h->set_cause(dlock::loss_cause::taken);
    h->set_cause(dlock::loss_cause::gone);
    EXPECT_EQ(h->cause(), dlock::loss_cause::taken);
}

} // namespace

// A lease may outlive its client: a watched hold whose io_context is destroyed first (its
// timer armed) is still safe to drop, and its warning stage answers without the context. The
// sanitizer builds check that the timer is not touched after the context is gone.
TEST(warning, a_watched_hold_outlives_its_io_context) {
    std::shared_ptr<test_hold> h;
    {
        io_thread t;
        h = std::make_shared<test_hold>(t.io, 30000ms);
        h->set_valid_until(clock_type::now() + 30s);
        std::atomic<bool> armed{false};
        (void)h->warning_token();
        asio::post(t.io, [&] { armed = true; }); // after the stage's own arming
        ASSERT_TRUE(eventually([&] { return armed.load(); }, 5s));
    }
    EXPECT_FALSE(h->warned());
    h->lose(); // a loss after the context went still warns, without a timer
    EXPECT_TRUE(h->warned());
    EXPECT_TRUE(h->warning_token().stop_requested());
    h.reset();
}
