// Metrics against a real redis-server: each counter of dlock::metrics_snapshot moves when the
// event it counts happens (acquire, contend, time out, release, loss by deletion and to another
// owner, deadline, renewal, NOSCRIPT, reconnect, server errors).
#include "core/metrics.hpp"
#include "redis/locks/lock_test_util.hpp"

#include <atomic>
#include <future>
#include <thread>

using namespace std::chrono_literals;
using dlock::error_class;
using dlock::loss_cause;
using dlock::metrics_snapshot;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_server;
using dlock::test::watchdog_options;

#define SKIP_WITHOUT_METRICS()                                                                     \
    if (!dlock::detail::metrics_enabled) GTEST_SKIP() << "built with DLOCK_METRICS=OFF"

namespace {

std::uint64_t errors(const metrics_snapshot& m, std::string_view kind, error_class e) {
    return m.kind(kind).errors[static_cast<std::size_t>(e)];
}
std::uint64_t losses(const metrics_snapshot& m, loss_cause c) {
    return m.losses[static_cast<std::size_t>(c)];
}

TEST(metrics, an_uncontended_acquire_and_release_count_once_each_with_wait_and_hold_times) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const auto before = c.metrics();
    EXPECT_TRUE(before.enabled);
    EXPECT_EQ(before.kind("reentrant").acquired, 0u);
    {
        dlock::mutex m = c.make_mutex("m1");
        m.lock();
        m.lock(); // a re-entry: one more acquisition (reentered), no new hold
        m.unlock();
        m.unlock();
    }
    auto l = c.acquire("m2", {.wait = 1s, .kind = dlock::lock_kind::simple});
    ASSERT_TRUE(l);
    l.release();
    const auto m = c.metrics();
    EXPECT_EQ(m.kind("reentrant").acquired, 1u);
    EXPECT_EQ(m.kind("reentrant").reentered, 1u);
    EXPECT_EQ(m.kind("simple").acquired, 1u);
    EXPECT_EQ(m.wait_time.count, 3u);
    EXPECT_EQ(m.hold_time.count, 2u);
    EXPECT_GT(m.hold_time.sum, 0.0);
    EXPECT_EQ(m.releases, 2u);
    EXPECT_EQ(m.releases_not_owner + m.releases_failed, 0u);
    EXPECT_GE(m.scripts, 5u); // three attempts, two releases (+ the re-entrant unlock)
    EXPECT_GE(m.commands, m.scripts);
    EXPECT_GE(m.connects, 1u);
    EXPECT_EQ(m.reconnects, 0u);
    EXPECT_EQ(m.losses_total(), 0u);
}

TEST(metrics, a_try_and_a_timed_wait_on_a_held_lock_count_as_not_acquired) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client holder(fast_options(s.url()));
    dlock::client c(fast_options(s.url()));
    auto held = holder.acquire("busy", {.wait = 1s});
    ASSERT_TRUE(held);
    EXPECT_FALSE(c.acquire("busy", {.wait = 0ms}));
    EXPECT_FALSE(c.acquire("busy", {.wait = 100ms}));
    const auto m = c.metrics();
    EXPECT_EQ(m.kind("reentrant").not_acquired, 2u);
    EXPECT_EQ(m.kind("reentrant").acquired, 0u);
    EXPECT_EQ(m.wait_time.count, 0u); // only granted acquisitions are timed
}

TEST(metrics, a_waiter_of_another_client_woken_by_the_release_records_a_wake_hand_off) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client holder(fast_options(s.url()));
    dlock::client waiter(fast_options(s.url()));
    auto held = holder.acquire("contended", {.wait = 1s});
    ASSERT_TRUE(held);
    auto got = std::async(std::launch::async, [&] {
        return static_cast<bool>(waiter.acquire("contended", {.wait = 5s}));
    });
    ASSERT_TRUE(eventually(
        [&] {
            return dlock::test::sleeping_waiters(waiter, "redisson_lock__channel:{contended}") == 1;
        },
        2s));
    held.release();
    ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(got.get());
    const auto m = waiter.metrics();
    EXPECT_EQ(m.kind("reentrant").acquired, 1u);
    EXPECT_EQ(m.handoff_wake.count, 1u);
    EXPECT_EQ(m.handoff_handover.count, 0u);
    EXPECT_GT(m.wait_time.sum, 0.0);
}

TEST(metrics, a_local_hand_over_between_two_threads_records_a_hand_over_latency) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::mutex m = c.make_mutex("local");
    m.lock();
    std::atomic<bool> done{false};
    std::thread t([&] {
        dlock::mutex m2 = c.make_mutex("local");
        m2.lock();
        m2.unlock();
        done = true;
    });
    ASSERT_TRUE(eventually(
        [&] { return dlock::test::sleeping_waiters(c, "redisson_lock__channel:{local}") == 1; },
        2s));
    m.unlock();
    t.join();
    ASSERT_TRUE(done.load());
    const auto snap = c.metrics();
    EXPECT_EQ(snap.kind("reentrant").acquired, 2u);
    EXPECT_EQ(snap.handoff_handover.count, 1u);
    EXPECT_EQ(snap.releases, 2u);
}

TEST(metrics, a_lock_deleted_on_the_server_is_counted_lost_as_gone) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client c(watchdog_options(s.url()));
    auto l = c.acquire("deleted", {.wait = 1s});
    ASSERT_TRUE(l);
    s.cli({"DEL", "deleted"});
    ASSERT_TRUE(eventually([&] { return l.lost(); }, 2s));
    EXPECT_TRUE(eventually([&] { return c.metrics().losses_total() == 1; }, 2s));
    const auto m = c.metrics();
    EXPECT_EQ(losses(m, loss_cause::gone), 1u);
    EXPECT_EQ(m.hold_time.count, 1u);
}

TEST(metrics, a_lock_taken_by_another_owner_is_counted_lost_as_taken) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client c(watchdog_options(s.url()));
    auto l = c.acquire("stolen", {.wait = 1s, .kind = dlock::lock_kind::simple});
    ASSERT_TRUE(l);
    s.cli({"SET", "stolen", "someone-else"});
    ASSERT_TRUE(eventually([&] { return l.lost(); }, 2s));
    EXPECT_TRUE(eventually([&] { return c.metrics().losses_total() == 1; }, 2s));
    EXPECT_EQ(losses(c.metrics(), loss_cause::taken), 1u);
    std::error_code ec;
    l.release(ec); // lost already: no release is sent
    EXPECT_EQ(c.metrics().releases, 0u);
}

TEST(metrics, an_unlock_answered_not_yours_counts_a_release_not_owner_and_a_loss) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto l = c.acquire("expired", {.wait = 1s, .lease = 60s});
    ASSERT_TRUE(l);
    s.cli({"DEL", "expired"});
    std::error_code ec;
    l.release(ec);
    EXPECT_EQ(ec, dlock::errc::not_owner);
    EXPECT_TRUE(eventually([&] { return c.metrics().losses_total() == 1; }, 2s));
    const auto m = c.metrics();
    EXPECT_EQ(m.releases_not_owner, 1u);
    EXPECT_EQ(losses(m, loss_cause::gone), 1u);
}

TEST(metrics, the_watchdog_counts_batches_renewed_locks_and_batch_sizes) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client c(watchdog_options(s.url())); // renewed every 100 ms
    auto a = c.acquire("w1", {.wait = 1s});
    auto b = c.acquire("w2", {.wait = 1s});
    ASSERT_TRUE(a && b);
    ASSERT_TRUE(eventually([&] { return c.metrics().renewals_ok >= 4; }, 3s));
    const auto m = c.metrics();
    EXPECT_GE(m.renewal_batches, 2u);
    EXPECT_EQ(m.renewal_batch_size.count, m.renewal_batches);
    // Both locks go in one batch per tick (one node, one kind).
    EXPECT_GE(m.renewal_batch_size.counts[1], 1u);
    EXPECT_EQ(m.renewals_failed, 0u);
    EXPECT_EQ(m.losses_total(), 0u);
}

TEST(metrics, renewals_record_their_slack_and_a_max_hold_counts_a_warning_and_its_loss) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client c(watchdog_options(s.url())); // a 300 ms lease renewed every 100 ms
    auto a = c.acquire("slack", {.wait = 1s});
    ASSERT_TRUE(a);
    ASSERT_TRUE(eventually([&] { return c.metrics().renewal_slack.count >= 3; }, 5s));
    auto m = c.metrics();
    // Each renewal lands with validity left, at most the lease: every observation is within
    // the buckets up to 0.3 s (rounded up to the next bound), and their sum is positive.
    EXPECT_GT(m.renewal_slack.sum, 0.0);
    EXPECT_EQ(m.renewal_slack.fraction_at_most(0.3), 1.0);
    EXPECT_EQ(m.warnings, 0u) << "healthy renewals never warn";
    a.release();

    auto b = c.acquire("capped", {.wait = 1s, .max_hold = 250ms});
    ASSERT_TRUE(b);
    ASSERT_TRUE(eventually([&] { return b.lost(); }, 5s));
    EXPECT_EQ(b.loss_cause(), loss_cause::max_hold);
    ASSERT_TRUE(eventually([&] { return losses(c.metrics(), loss_cause::max_hold) == 1; }, 5s));
    m = c.metrics();
    EXPECT_EQ(m.warnings, 1u) << "a lease with max_hold warns before it (unwatched too)";
    EXPECT_EQ(m.losses_total(), 1u);
}

TEST(metrics,
     a_stalled_server_counts_a_loss_by_deadline_failed_renewals_ambiguity_and_a_reconnect) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    auto o = watchdog_options(s.url()); // lease 300 ms, renewed every 100 ms
    o.command_timeout = 400ms;          // the stalled renewal fails after the lease ran out
    dlock::client c(o);
    auto l = c.acquire("stalled", {.wait = 1s});
    ASSERT_TRUE(l);
    std::thread sleeper([&] { s.cli({"DEBUG", "SLEEP", "1"}); });
    EXPECT_TRUE(eventually([&] { return l.lost(); }, 2s));
    sleeper.join();
    EXPECT_TRUE(eventually(
        [&] {
            const auto m = c.metrics();
            return m.renewals_failed >= 1 && m.reconnects >= 1;
        },
        3s));
    const auto m = c.metrics();
    EXPECT_EQ(losses(m, loss_cause::deadline), 1u);
    EXPECT_GE(m.ambiguous, 1u);
}

TEST(metrics, a_flushed_script_cache_counts_a_noscript_fallback) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    s.cli({"SCRIPT", "FLUSH"});
    auto l = c.acquire("cold", {.wait = 1s});
    ASSERT_TRUE(l);
    l.release();
    const auto m = c.metrics();
    EXPECT_GE(m.noscript_fallbacks, 2u); // the attempt and the release scripts
    EXPECT_EQ(m.kind("reentrant").acquired, 1u);
}

TEST(metrics, a_killed_connection_counts_a_reconnect) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    ASSERT_TRUE(dlock::test::ping_ok(c));
    s.cli({"CLIENT", "KILL", "TYPE", "normal"});
    EXPECT_TRUE(
        eventually([&] { return dlock::test::ping_ok(c) && c.metrics().reconnects >= 1; }, 3s));
}

TEST(metrics, a_key_of_the_wrong_type_counts_a_server_error_of_its_kind) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    s.cli({"SET", "notalock", "x"});
    std::error_code ec;
    auto l = c.acquire("notalock", {.wait = 0ms}, ec);
    EXPECT_TRUE(ec);
    EXPECT_EQ(errors(c.metrics(), "reentrant", error_class::server), 1u);
}

TEST(metrics, a_client_that_cannot_reach_its_server_counts_unavailable) {
    SKIP_WITHOUT_METRICS();
    auto o = fast_options("redis://127.0.0.1:1");
    o.command_timeout = 200ms;
    dlock::client c(o);
    std::error_code ec;
    auto l = c.acquire("nowhere", {.wait = 0ms}, ec);
    EXPECT_EQ(ec, dlock::errc::unavailable);
    EXPECT_EQ(errors(c.metrics(), "reentrant", error_class::unavailable), 1u);
    EXPECT_EQ(c.metrics().connects, 0u);
}

} // namespace

namespace {

TEST(metrics, a_redlock_counts_its_own_acquisitions_releases_and_losses) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    dlock::test::redis_masters masters(3);
    dlock::redlock_options o;
    for (std::size_t i = 0; i < masters.size(); ++i) {
        auto m = fast_options(masters[i].url());
        o.masters.push_back(m);
    }
    o.watchdog_lease = 300ms; // extended every 100 ms
    dlock::client r(o);       // a Redlock client
    constexpr auto simple = dlock::lock_kind::simple;
    auto a = r.acquire("rl", {.wait = 1s, .kind = simple});
    ASSERT_TRUE(a);
    EXPECT_FALSE(r.acquire("rl", {.wait = 0ms, .kind = simple}));
    a.release();
    auto b = r.acquire("rl-lost", {.wait = 1s, .kind = simple});
    ASSERT_TRUE(b);
    for (std::size_t i = 0; i < masters.size(); ++i)
        masters[i].cli({"SET", "rl-lost", "someone-else"});
    ASSERT_TRUE(eventually([&] { return b.lost(); }, 2s));
    const auto m = r.metrics();
    EXPECT_EQ(m.kind("simple").acquired, 2u);
    EXPECT_EQ(m.kind("simple").not_acquired, 1u);
    EXPECT_EQ(m.releases, 1u);
    EXPECT_EQ(losses(m, loss_cause::undetermined), 1u);
    EXPECT_EQ(m.hold_time.count, 2u);
    EXPECT_GE(m.connects, 3u);
    EXPECT_GE(m.scripts, 6u);
}

} // namespace

namespace {

TEST(metrics, a_topology_change_noted_by_the_router_is_counted_and_logged) {
    DLOCK_SKIP_WITHOUT_REDIS();
    SKIP_WITHOUT_METRICS();
    redis_server s;
    auto o = fast_options(s.url());
    std::atomic<int> warnings{0};
    o.log.sink = [&](const dlock::log_record& r) {
        if (r.level == dlock::log_level::warning && r.message.find("topology") != r.message.npos)
            ++warnings;
    };
    dlock::client c(o);
    dlock::detail::access::impl(c)->note_topology_change("127.0.0.1:6380");
    EXPECT_EQ(c.metrics().topology_changes, 1u);
    EXPECT_EQ(warnings.load(), 1);
}

} // namespace
