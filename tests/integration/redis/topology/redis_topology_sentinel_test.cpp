// Sentinel deployments against real processes: one master, two replicas, three sentinels
// (tests/support, redis_sentinel_group). Discovery, failovers while locks are held and waited
// for, the lock-delay, replication safety (WAIT) and sentinel authentication.
#include "redis/client.hpp"
#include "redis/topology/router.hpp"
#include "test_util.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::redis_sentinel_group;

#define SKIP_WITHOUT_SENTINEL()                                                                    \
    if (!dlock::test::sentinel_available()) GTEST_SKIP() << "redis-sentinel not installed"

/// Options for the group's URL with short bounds and the given lock-delay.
dlock::client_options sentinel_options(const redis_sentinel_group& g,
                                       std::chrono::milliseconds lock_delay = 0ms) {
    auto o = dlock::test::fast_options(g.url());
    o.failover_lock_delay = lock_delay;
    return o;
}

std::uint64_t master_changes(const dlock::client& c) {
    return dlock::detail::access::impl(c)->router().master_changes();
}

/// The group's node that is master now (by the sentinels' answer).
dlock::test::redis_server& master_now(redis_sentinel_group& g) {
    const auto port = g.current_master().second;
    if (g.master().port() == port) return g.master();
    for (std::size_t i = 0; i < 2; ++i)
        if (g.replica(i).port() == port) return g.replica(i);
    throw std::runtime_error("no node of the group is the master");
}

TEST(sentinel, locks_and_waits_through_the_sentinels_on_the_master) {
    SKIP_WITHOUT_SENTINEL();
    redis_sentinel_group g;
    dlock::client a(sentinel_options(g));
    dlock::client b(sentinel_options(g));
    auto held = a.acquire("s-basic");
    EXPECT_EQ(g.master().cli({"EXISTS", "s-basic"}), "1"); // on the master the sentinels name

    auto waiter =
        std::async(std::launch::async, [&] { return b.acquire("s-basic", {.wait = 10s}); });
    // The waiter is subscribed on the master before the release (no lost wake-up to test).
    ASSERT_TRUE(eventually(
        [&] { return dlock::test::one_subscriber(g.master(), "redisson_lock__channel:{s-basic}"); },
        5s));
    held.release();
    auto got = waiter.get();
    EXPECT_TRUE(got);
    EXPECT_FALSE(b.make_mutex("s-basic").try_lock()); // held by the lease of b
}

TEST(sentinel, a_failover_moves_holds_and_waiters_to_the_new_master) {
    SKIP_WITHOUT_SENTINEL();
    redis_sentinel_group g;
    auto opts = sentinel_options(g, 300ms);
    opts.watchdog_lease = 3s;
    dlock::client a(opts);
    dlock::client b(opts);
    auto held = a.acquire("s-move");
    const auto token = held.token();
    ASSERT_TRUE(eventually(
        [&] {
            return g.replica(0).cli({"EXISTS", "s-move"}) == "1" &&
                   g.replica(1).cli({"EXISTS", "s-move"}) == "1";
        },
        5s)); // replicated: the failover keeps it
    auto waiter =
        std::async(std::launch::async, [&] { return b.acquire("s-move", {.wait = 30s}); });
    ASSERT_TRUE(eventually(
        [&] { return dlock::test::one_subscriber(g.master(), "redisson_lock__channel:{s-move}"); },
        5s));

    g.failover_and_wait(20s);
    auto& now = master_now(g);
    ASSERT_NE(now.port(), g.master().port());
    // Both clients follow (+switch-master): the waiter re-subscribes on the new master.
    ASSERT_TRUE(eventually([&] { return master_changes(a) >= 1 && master_changes(b) >= 1; }, 10s));
    ASSERT_TRUE(eventually(
        [&] { return dlock::test::one_subscriber(now, "redisson_lock__channel:{s-move}"); }, 10s));
    // The hold renews on the new master: it outlives two leases there.
    ASSERT_TRUE(eventually(
        [&] {
            const auto pttl = std::stoll(now.cli({"PTTL", "s-move"}));
            return pttl > 2000; // renewed after the move (lease 3 s, renewed every second)
        },
        5s));
    EXPECT_FALSE(held.lost());
    held.release();
    auto got = waiter.get();
    ASSERT_TRUE(got);
    EXPECT_GT(*got.token(), *token); // the counter moved with the data
    EXPECT_EQ(now.cli({"EXISTS", "s-move"}), "1");
}

TEST(sentinel, a_hold_the_new_master_does_not_know_is_signalled_lost_and_not_recreated) {
    SKIP_WITHOUT_SENTINEL();
    redis_sentinel_group g;
    auto opts = sentinel_options(g, 0ms);
    opts.watchdog_lease = 1500ms;
    dlock::client a(opts);
    auto held = a.acquire("s-lost");
    std::atomic<bool> lost{false};
    held.on_lost([&] { lost = true; });
    g.failover_and_wait(20s);
    auto& now = master_now(g);
    // What an unreplicated lock looks like after the failover: the new master lacks it.
    now.cli({"DEL", "s-lost"});
    ASSERT_TRUE(eventually([&] { return lost.load(); }, 5s)); // within one renewal period
    EXPECT_TRUE(held.lost());
    EXPECT_EQ(now.cli({"EXISTS", "s-lost"}), "0"); // never silently re-acquired
}

TEST(sentinel, new_acquisitions_wait_out_the_lock_delay_after_a_master_change) {
    SKIP_WITHOUT_SENTINEL();
    redis_sentinel_group g;
    dlock::client a(sentinel_options(g, 1500ms));
    a.acquire("s-delay").release(); // the client knows its first master
    g.failover_and_wait(20s);
    ASSERT_TRUE(eventually([&] { return master_changes(a) >= 1; }, 10s));
    const auto paused_until = dlock::detail::access::impl(a)->router().any().paused_until();
    auto m = a.make_mutex("s-delay");
    if (std::chrono::steady_clock::now() + 200ms < paused_until) {
        EXPECT_FALSE(m.try_lock()); // free on the server, refused by the delay
    }
    auto lease = a.acquire("s-delay", {.wait = 10s});
    EXPECT_TRUE(lease);
    EXPECT_GE(std::chrono::steady_clock::now(), paused_until);
}

TEST(sentinel, an_attempt_queued_across_the_failover_still_waits_out_the_lock_delay) {
    SKIP_WITHOUT_SENTINEL();
    redis_sentinel_group g;
    dlock::client a(sentinel_options(g, 2000ms));
    a.acquire("s-queued").release(); // the client knows its first master
    std::error_code ec;
    const std::string_view shutdown[] = {"SHUTDOWN", "NOSAVE"};
    (void)dlock::redis::command(a, shutdown,
                                ec); // the master dies now; the attempt below queues meanwhile
    auto l = a.acquire("s-queued", {.wait = 30s}, ec);
    ASSERT_TRUE(l) << ec.message();
    const auto acquired_at = std::chrono::steady_clock::now();
    const auto paused_until = dlock::detail::access::impl(a)->router().any().paused_until();
    EXPECT_GT(paused_until, std::chrono::steady_clock::time_point{}); // the change was seen
    EXPECT_GE(acquired_at, paused_until); // not granted during the delay
}

TEST(sentinel, a_killed_master_is_replaced_and_waiters_are_served_within_their_wait) {
    SKIP_WITHOUT_SENTINEL();
    redis_sentinel_group g;
    auto opts = sentinel_options(g, 200ms);
    opts.watchdog_lease = 3s;
    dlock::client a(opts);
    dlock::client b(opts);
    auto held = a.acquire("s-kill");
    ASSERT_TRUE(eventually(
        [&] {
            return g.replica(0).cli({"EXISTS", "s-kill"}) == "1" &&
                   g.replica(1).cli({"EXISTS", "s-kill"}) == "1";
        },
        5s));
    auto waiter =
        std::async(std::launch::async, [&] { return b.acquire("s-kill", {.wait = 40s}); });
    ASSERT_TRUE(eventually(
        [&] { return dlock::test::one_subscriber(g.master(), "redisson_lock__channel:{s-kill}"); },
        5s));
    const auto old_port = g.master().port();
    g.master().kill();
    ASSERT_TRUE(eventually(
        [&] {
            const auto m = g.current_master().second;
            return m != 0 && m != old_port;
        },
        30s));
    ASSERT_TRUE(eventually([&] { return master_changes(a) >= 1 && master_changes(b) >= 1; }, 15s));
    // On the new master: the hold moved with the data, or it was lost (its 3 s lease ran out
    // while the failover took longer, on a busy machine) and the release says so.
    std::error_code ec;
    held.release(ec);
    EXPECT_TRUE(!ec || ec == dlock::errc::not_owner) << ec.message();
    auto got = waiter.get();
    EXPECT_TRUE(got);
}

TEST(sentinel, wait_replicas_refuses_and_undoes_an_acquisition_no_replica_acknowledged) {
    SKIP_WITHOUT_SENTINEL();
    redis_sentinel_group g;
    auto opts = sentinel_options(g);
    opts.wait_replicas = {.replicas = 2, .timeout = 200ms};
    dlock::client c(opts);
    {
        auto ok = c.acquire("s-wait-ok"); // both replicas alive: acknowledged
        EXPECT_TRUE(ok);
    }
    g.replica(0).kill();
    g.replica(1).kill();
    std::error_code ec;
    auto l = c.acquire("s-wait", {.wait = 0ms}, ec);
    EXPECT_EQ(ec, dlock::errc::not_replicated);
    EXPECT_FALSE(l);
    EXPECT_TRUE(eventually([&] { return g.master().cli({"EXISTS", "s-wait"}) == "0"; }, 2s));
    // The same through the URL parameter.
    auto from_url = dlock::parse_url(g.url() + "?wait=1:100");
    EXPECT_EQ(from_url.wait_replicas.replicas, 1);
    EXPECT_EQ(from_url.wait_replicas.timeout, 100ms);
}

TEST(sentinel, sentinels_with_their_own_password_are_asked_with_it) {
    SKIP_WITHOUT_SENTINEL();
    redis_sentinel_group g({.password = "data-secret"}, "sentinel-secret");
    {
        auto o = dlock::test::fast_options(g.url() + "?sentinel_password=sentinel-secret");
        o.password = "data-secret";
        dlock::client c(o);
        EXPECT_TRUE(c.acquire("s-auth"));
    }
    {
        auto o = dlock::test::fast_options(g.url() + "?sentinel_password=wrong");
        o.password = "data-secret";
        dlock::client c(o);
        std::error_code ec;
        auto l = c.acquire("s-auth2", {.wait = 2s}, ec);
        EXPECT_FALSE(l);
        EXPECT_TRUE(ec == dlock::errc::auth_failed || ec == dlock::errc::unavailable)
            << ec.message();
    }
}

TEST(sentinel, no_reachable_sentinel_is_unavailable_within_the_wait_never_not_acquired) {
    SKIP_WITHOUT_SENTINEL();
    const auto port = dlock::test::free_port();
    dlock::client c(dlock::test::fast_options("redis-sentinel://127.0.0.1:" + std::to_string(port) +
                                              "/mymaster"));
    std::error_code ec;
    const auto start = std::chrono::steady_clock::now();
    auto l = c.acquire("s-none", {.wait = 1500ms}, ec);
    EXPECT_FALSE(l);
    EXPECT_EQ(ec, dlock::errc::unavailable);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(sentinel, an_unknown_master_name_is_a_configuration_error) {
    SKIP_WITHOUT_SENTINEL();
    redis_sentinel_group g;
    auto url = g.url();
    url.replace(url.rfind('/'), std::string::npos, "/nosuchmaster");
    dlock::client c(dlock::test::fast_options(url));
    std::error_code ec;
    auto l = c.acquire("s-name", {.wait = 2s}, ec);
    EXPECT_FALSE(l);
    EXPECT_EQ(ec, dlock::errc::configuration_error);
}

} // namespace
