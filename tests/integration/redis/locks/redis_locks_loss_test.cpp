// Loss of a held lock against a real redis-server: by deletion, to another owner, by the
// validity deadline when the server stalls, and at the end of a fixed lease.
#include "lock_test_util.hpp"

#include <atomic>
#include <system_error>
#include <thread>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_server;
using dlock::test::watchdog_options;

TEST(lock, loss_by_deletion_requests_stop_runs_callbacks_and_ends_validity) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(watchdog_options(s.url()));
    dlock::mutex m = a.make_mutex("deleted");
    m.lock();
    std::atomic<bool> called{false};
    m.on_lost([&] { called = true; });
    const auto token = m.stop_token();
    s.cli({"DEL", "deleted"});
    // The stop is requested before the callbacks run (on the I/O thread): wait for both.
    EXPECT_TRUE(eventually([&] { return token.stop_requested() && called.load(); }, 1s));
    EXPECT_LT(m.valid_until(), std::chrono::steady_clock::now());
    std::error_code ec;
    m.unlock(ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_EQ(s.cli({"EXISTS", "deleted"}), "0"); // never silently re-acquired
}

TEST(lock, loss_to_another_owner_is_signalled) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(watchdog_options(s.url()));
    dlock::mutex m = a.make_mutex("stolen");
    m.lock();
    const auto token = m.stop_token();
    s.cli({"DEL", "stolen"});
    s.cli({"HSET", "stolen", "00000000-0000-0000-0000-000000000000:1", "1"});
    EXPECT_TRUE(eventually([&] { return token.stop_requested(); }, 1s));
    std::error_code ec;
    m.unlock(ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_EQ(s.cli({"HGET", "stolen", "00000000-0000-0000-0000-000000000000:1"}), "1");
}

TEST(lock, loss_by_deadline_when_the_server_stalls_past_the_lease) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    auto o = watchdog_options(s.url());
    o.command_timeout = 3s; // renewals stay in flight; only the validity deadline can fire
    dlock::client a(o);
    dlock::lease l = a.acquire("stalled");
    ASSERT_TRUE(l);
    std::thread sleeper([&] { s.cli({"DEBUG", "SLEEP", "1"}); });
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(eventually([&] { return l.stop_token().stop_requested(); }, 2s));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 900ms);
    sleeper.join();
    EXPECT_TRUE(l.lost());
}

TEST(lock, a_fixed_lease_that_ends_unreleased_is_signalled_as_lost) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    auto l = a.acquire("fixed", {.lease = 150ms});
    ASSERT_TRUE(l);
    EXPECT_TRUE(eventually([&] { return l.lost(); }, 1s));
    EXPECT_TRUE(l.stop_token().stop_requested());
    std::error_code ec;
    l.release(ec);
    EXPECT_EQ(ec, errc::not_owner);
}

// reliability.md F03/F04: the reply to an acquisition arrives after the lease it asked for has
// run out, counted from before the send (here the server is paused for longer than the lease;
// a delayed reply or a paused client look the same to the client). Such a grant is valid
// nowhere any more: it is not reported as acquired, and the client deletes its own token.
TEST(lock, a_grant_whose_reply_comes_after_its_lease_is_not_an_acquisition) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    for (const auto kind : {dlock::lock_kind::reentrant, dlock::lock_kind::simple}) {
        SCOPED_TRACE(static_cast<int>(kind));
        c.acquire("warm", {.wait = 0ms, .kind = kind}).release(); // connected, scripts loaded
        s.cli({"CLIENT", "PAUSE", "700"});
        std::error_code ec;
        auto once = c.acquire("late", {.wait = 0ms, .lease = 300ms, .kind = kind}, ec);
        EXPECT_FALSE(ec) << ec.message();
        EXPECT_FALSE(once); // one try, its grant came too late: not acquired
        // Deleted by the client, not expired: the key would live 300 ms after the grant.
        EXPECT_TRUE(eventually([&] { return s.cli({"EXISTS", "late"}) == "0"; }, 150ms));

        // With a wait, the late grant is given back and the next attempt acquires.
        s.cli({"CLIENT", "PAUSE", "700"});
        auto waited = c.acquire("late", {.wait = 3s, .lease = 300ms, .kind = kind}, ec);
        EXPECT_FALSE(ec) << ec.message();
        ASSERT_TRUE(waited);
        EXPECT_GT(waited.valid_until(), std::chrono::steady_clock::now());
        waited.release();
    }
}
