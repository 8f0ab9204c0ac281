// Leader election (dlock/election.hpp) over every backend entry: what any backend that offers
// it promises, written once. One leader at a time among clients, with strictly increasing
// epochs; a resignation lets the next participant lead; proclaim changes the value and keeps
// the epoch; observe() reports the state at its start, then every change in order, vacancy
// included. Backends without elections answer errc::unsupported (so far Redlock).
// Backend-only behaviour (layouts and interop with Curator or
// etcdctl, session expiry) is in each backend's own election test.
#include "backends.hpp"
#include "process.hpp"

#include <dlock/election.hpp>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

namespace dlock::conformance {
namespace {

using clock = std::chrono::steady_clock;

bool elects(const backend_entry& b) {
    return b.label != "redlock";
}

class election : public ::testing::TestWithParam<const backend_entry*> {};

TEST_P(election, has_one_leader_at_a_time_with_increasing_epochs) {
    const auto& b = *GetParam();
    CONFORMANCE_START(b, url);
    auto c1 = b.connect(url), c2 = b.connect(url), c3 = b.connect(url);
    const auto name = fresh_name("elect");
    std::error_code ec;
    auto first = c1->campaign(name, "one", {.wait = 5s}, ec);
    if (!elects(b)) {
        EXPECT_EQ(ec, errc::unsupported) << b.label;
        EXPECT_FALSE(first);
        auto o = c1->observe(
            name, [](const std::optional<leader_info>&) {}, ec);
        EXPECT_FALSE(o) << b.label;
        EXPECT_EQ(ec, errc::unsupported) << b.label;
        return;
    }
    ASSERT_TRUE(first) << b.label << ": " << ec.message() << " " << c1->last_error_detail();
    EXPECT_EQ(first.name(), name);
    EXPECT_GT(first.epoch(), 0u);
    auto l = c2->leader(name);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->value, "one");
    EXPECT_EQ(l->epoch, first.epoch());

    // A second and third participant do not lead while the first does.
    EXPECT_FALSE(c2->campaign(name, "two", {.wait = 0ms}, ec)) << b.label;
    EXPECT_FALSE(ec) << ec.message();
    leadership second, third;
    std::atomic<bool> second_done{false}, third_done{false}; // set after the handle is
    std::thread t2([&] {
        second = c2->campaign(name, "two", {.wait = 20s});
        second_done = true;
    });
    std::thread t3([&] {
        third = c3->campaign(name, "three", {.wait = 20s});
        third_done = true;
    });

    // Proclaim: a new value, the same epoch.
    first.proclaim("one'");
    l = c3->leader(name);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->value, "one'");
    EXPECT_EQ(l->epoch, first.epoch());

    // Resign: one of the others leads, with a larger epoch; then the last one.
    const auto e1 = first.epoch();
    first.resign();
    EXPECT_FALSE(first);
    first.resign(); // twice: no error
    ASSERT_TRUE(eventually([&] { return second_done || third_done; }, 20s)) << b.label;
    const bool second_first = second_done;
    auto& next = second_first ? second : third;
    auto& last = second_first ? third : second;
    ASSERT_TRUE(next) << b.label;
    EXPECT_GT(next.epoch(), e1);
    EXPECT_FALSE(second_first ? third_done.load() : second_done.load()) << "one leader at a time";
    l = c1->leader(name);
    ASSERT_TRUE(l);
    EXPECT_EQ(l->epoch, next.epoch());
    EXPECT_EQ(l->value, second_first ? "two" : "three");
    const auto e2 = next.epoch();
    next.resign();
    t2.join();
    t3.join();
    ASSERT_TRUE(last) << b.label;
    EXPECT_GT(last.epoch(), e2);
    std::error_code pec;
    next.proclaim("resigned", pec);
    EXPECT_EQ(pec, errc::not_owner) << "a resigned leader cannot proclaim";
    last.resign();
    l = c1->leader(name, ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_FALSE(l) << "vacant after every participant resigned";
}

TEST_P(election, observe_reports_every_change_in_order) {
    const auto& b = *GetParam();
    CONFORMANCE_START(b, url);
    if (!elects(b)) GTEST_SKIP() << b.label << ": no elections (the test above checks that)";
    auto watcher = b.connect(url), c1 = b.connect(url), c2 = b.connect(url);
    const auto name = fresh_name("observe");
    std::mutex mu;
    std::vector<std::optional<leader_info>> seen;
    const auto count = [&] {
        std::lock_guard g(mu);
        return seen.size();
    };
    const auto last = [&]() -> std::optional<leader_info> {
        std::lock_guard g(mu);
        return seen.empty() ? std::nullopt : seen.back();
    };
    auto obs = watcher->observe(name, [&](const std::optional<leader_info>& li) {
        std::lock_guard g(mu);
        seen.push_back(li);
    });
    ASSERT_TRUE(obs);
    ASSERT_EQ(count(), 1u) << "observe() returns after the first state";
    auto a = c1->campaign(name, "a", {.wait = 5s});
    ASSERT_TRUE(a);
    ASSERT_TRUE(eventually([&] { return count() == 2; }, 10s)) << b.label;
    a.proclaim("a2");
    ASSERT_TRUE(eventually([&] { return count() == 3; }, 10s)) << b.label;
    leadership next;
    std::thread t([&] { next = c2->campaign(name, "b", {.wait = 20s}); });
    a.resign();
    t.join();
    ASSERT_TRUE(next) << b.label;
    ASSERT_TRUE(eventually([&] { return last() && last()->value == "b"; }, 10s)) << b.label;
    next.resign();
    ASSERT_TRUE(eventually([&] { return !last(); }, 10s)) << b.label;
    obs.stop();
    const auto stopped_at = count();
    auto again = c1->campaign(name, "c", {.wait = 5s});
    ASSERT_TRUE(again);
    EXPECT_EQ(c2->leader(name)->value, "c");
    EXPECT_EQ(count(), stopped_at) << "no callback after stop()";

    std::lock_guard g(mu);
    ASSERT_GE(seen.size(), 5u);
    EXPECT_FALSE(seen[0]) << "vacant at the start";
    ASSERT_TRUE(seen[1]);
    EXPECT_EQ(seen[1]->value, "a");
    ASSERT_TRUE(seen[2]);
    EXPECT_EQ(seen[2]->value, "a2");
    EXPECT_EQ(seen[2]->epoch, seen[1]->epoch) << "a proclaim keeps the epoch";
    // b leads next: at once when it was queued behind a, after a vacancy when its campaign
    // reached the server after a's resignation.
    std::size_t i = 3;
    if (!seen[i]) ++i;
    ASSERT_EQ(seen.size(), i + 2);
    ASSERT_TRUE(seen[i]);
    EXPECT_EQ(seen[i]->value, "b");
    EXPECT_GT(seen[i]->epoch, seen[2]->epoch);
    EXPECT_FALSE(seen[i + 1]) << "vacant after b resigned";
}

// The completion-token form: observe(name) keeps the states and async_next() takes them, the
// state at the start first; states not taken in time are coalesced (the latest wins, consecutive
// results differ); one async_next() at a time; stop() cancels a waiting one.
TEST_P(election, observe_in_the_completion_token_form) {
    const auto& b = *GetParam();
    CONFORMANCE_START(b, url);
    auto watcher = b.connect(url), c1 = b.connect(url);
    const auto name = fresh_name("observe-next");
    std::error_code ec;
    if (!elects(b)) {
        auto o = watcher->observe(name, ec);
        EXPECT_FALSE(o) << b.label;
        EXPECT_EQ(ec, errc::unsupported) << b.label;
        return;
    }
    using state = std::optional<leader_info>;
    using result = std::pair<std::error_code, state>;
    // async_next() with a plain callback (no associated executor: it runs on the client's).
    const auto next = [](observation& o) {
        auto p = std::make_shared<std::promise<result>>();
        auto f = p->get_future();
        o.async_next([p](std::error_code e, state s) { p->set_value({e, std::move(s)}); });
        return f;
    };
    const auto take = [](std::future<result>& f) {
        EXPECT_EQ(f.wait_for(10s), std::future_status::ready) << "async_next() never completed";
        return f.get();
    };

    auto obs = watcher->observe(name);
    ASSERT_TRUE(obs);
    auto first = next(obs);
    auto r = take(first);
    EXPECT_FALSE(r.first) << r.first.message();
    EXPECT_FALSE(r.second) << "vacant at the start";

    auto waiting = next(obs); // nothing new yet: it waits
    EXPECT_EQ(waiting.wait_for(50ms), std::future_status::timeout);
    auto second = next(obs);
    r = take(second);
    EXPECT_EQ(r.first, errc::invalid_argument) << "one async_next() at a time";

    auto a = c1->campaign(name, "a", {.wait = 5s});
    ASSERT_TRUE(a);
    r = take(waiting);
    ASSERT_FALSE(r.first) << r.first.message();
    ASSERT_TRUE(r.second);
    EXPECT_EQ(r.second->value, "a");
    EXPECT_EQ(r.second->epoch, a.epoch());

    // Two changes while nobody waits: the results that follow end with the vacancy, each
    // different from the one before, in the order they happened.
    a.proclaim("a2");
    a.resign();
    state previous = r.second;
    std::vector<state> after;
    const auto deadline = clock::now() + 10s;
    while (clock::now() < deadline && (after.empty() || after.back())) {
        auto f = next(obs);
        r = take(f);
        ASSERT_FALSE(r.first) << r.first.message();
        EXPECT_NE(r.second, previous) << "consecutive results differ";
        previous = r.second;
        after.push_back(r.second);
    }
    ASSERT_FALSE(after.empty());
    EXPECT_FALSE(after.back()) << b.label << ": the vacancy came last";
    ASSERT_LE(after.size(), 2u);
    if (after.size() == 2) {
        ASSERT_TRUE(after[0]);
        EXPECT_EQ(after[0]->value, "a2");
    }

    // stop() completes a waiting async_next() with errc::cancelled, and every later one.
    auto cancelled = next(obs);
    EXPECT_EQ(cancelled.wait_for(50ms), std::future_status::timeout);
    obs.stop();
    r = take(cancelled);
    EXPECT_EQ(r.first, errc::cancelled);
    auto later = next(obs);
    r = take(later);
    EXPECT_EQ(r.first, errc::cancelled);

    // An observation made with a callback gives its states to the callback, not to async_next().
    auto with_cb = watcher->observe(name, [](const state&) {});
    ASSERT_TRUE(with_cb);
    auto refused = next(with_cb);
    r = take(refused);
    EXPECT_EQ(r.first, errc::invalid_argument);
}

// A leader whose process dies (SIGKILL: no resignation; here a `dlock elect` child) is replaced,
// once the server ends its session or lease (these URLs: 4 or 5 s), by the participant waiting
// in campaign(), with a larger epoch. On Redis the leader's lease is the client's watchdog lease
// (`--watchdog 3s` here; the other backends ignore it).
TEST_P(election, a_killed_leaders_successor_leads_with_a_larger_epoch) {
    const auto& b = *GetParam();
    CONFORMANCE_START(b, url);
    if (!elects(b)) GTEST_SKIP() << b.label << ": no elections";
#ifndef DLOCK_CLI_BINARY
    GTEST_SKIP() << "the dlock command is not built";
#else
    const auto name = fresh_name("killed");
    const auto log = std::filesystem::temp_directory_path() /
                     ("dlock-conformance-" + std::to_string(::getpid()) + "-" + name + ".log");
    const pid_t pid = test::spawn_child({DLOCK_CLI_BINARY, "--url", url, "elect", "--watchdog",
                                         "3s", "--value", "victim", name, "--", "sleep", "30"},
                                        log);
    auto c = b.connect(url);
    const bool led = eventually(
        [&] {
            std::error_code ec;
            const auto li = c->leader(name, ec);
            return li && li->value == "victim";
        },
        20s);
    if (!led) {
        ::kill(pid, SIGKILL);
        test::reap_child(pid, 5s);
        FAIL() << b.label << ": the dlock elect child did not lead";
    }
    const auto victim_epoch = c->leader(name)->epoch;
    leadership next;
    std::thread waiter([&] { next = c->campaign(name, "successor", {.wait = 30s}); });
    const auto killed = clock::now();
    ::kill(pid, SIGKILL);
    test::reap_child(pid, 5s);
    waiter.join();
    const auto took = clock::now() - killed;
    std::filesystem::remove(log);
    ASSERT_TRUE(next) << b.label;
    EXPECT_GT(next.epoch(), victim_epoch) << b.label;
    EXPECT_LT(took, 20s) << b.label << ": the server ends a dead leader's session or lease";
    EXPECT_EQ(c->leader(name)->value, "successor");
    next.resign();
#endif
}

INSTANTIATE_TEST_SUITE_P(conformance, election, ::testing::ValuesIn(backend_params()),
                         [](const auto& i) { return param_name(i); });

} // namespace
} // namespace dlock::conformance
