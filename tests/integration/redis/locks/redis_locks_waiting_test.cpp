// Waiting without polling against a real redis-server: the unlock message, shared and
// lingering subscriptions, waiters that give up, resubscription after a pub/sub kill,
// shutdown while waiting, and an unreachable server.
#include "lock_test_util.hpp"

#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::command_calls;
using dlock::test::commands_processed;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::one_subscriber;
using dlock::test::redis_server;
using dlock::test::sleeping_waiters;

TEST(lock, a_waiter_is_woken_by_the_unlock_message_without_polling) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("wake");
    ma.lock(dlock::fixed_lease{30s});
    dlock::test::blocked_waiter waiter(b, "wake");
    // The waiter subscribes; while the holder keeps a 30 s lease it must not poll.
    ASSERT_TRUE(eventually([&] { return one_subscriber(s, "redisson_lock__channel:{wake}"); }, 2s));
    const auto before = commands_processed(s);
    std::this_thread::sleep_for(500ms); // a window in which a poller would send commands
    const auto during = commands_processed(s) - before;
    EXPECT_LE(during, 3); // INFO itself and at most a health check
    const auto released = std::chrono::steady_clock::now();
    ma.unlock();
    waiter.join();
    EXPECT_TRUE(waiter.acquired.load());
    EXPECT_LT(waiter.acquired_at - released, 200ms);
    EXPECT_TRUE(eventually([&] { return s.cli({"PUBSUB", "CHANNELS", "*"}).empty(); }, 2s));
}

TEST(lock, a_second_local_waiter_reuses_the_active_subscription_with_one_attempt) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client holder(fast_options(s.url()));
    dlock::client c(fast_options(s.url()));
    { // load the scripts into the server's cache, then count from zero
        dlock::mutex warm = holder.make_mutex("warm");
        warm.lock(dlock::fixed_lease{30s});
        warm.unlock();
    }
    s.cli({"CONFIG", "RESETSTAT"});
    const auto evalsha_calls = [&] { return command_calls(s, "evalsha"); };
    dlock::mutex m = holder.make_mutex("shared-sub");
    m.lock(dlock::fixed_lease{30s});                    // 1 script
    dlock::test::blocked_waiter first(c, "shared-sub"); // attempt, subscribe, last attempt: 2
    ASSERT_TRUE(
        eventually([&] { return one_subscriber(s, "redisson_lock__channel:{shared-sub}"); }, 2s));
    ASSERT_TRUE(eventually([&] { return evalsha_calls() == 3; }, 2s));
    // The subscription of `first` was confirmed before this waiter's attempt was sent: that
    // attempt is its last one before sleeping.
    dlock::test::blocked_waiter second(c, "shared-sub");
    ASSERT_TRUE(eventually([&] { return evalsha_calls() == 4; }, 2s));
    m.unlock();    // 1: wakes `first`
    first.join();  // 1 attempt + 1 hand-over to `second` (a waiter of the same client)
    second.join(); // 1 release
    EXPECT_TRUE(first.acquired.load());
    EXPECT_TRUE(second.acquired.load());
    EXPECT_EQ(evalsha_calls(), 8); // 9 if the second waiter had tried twice before sleeping
}

TEST(lock, a_subscription_outlives_its_last_waiter_briefly_and_then_goes) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client holder(fast_options(s.url()));
    dlock::client c(fast_options(s.url()));
    const std::string channel = "redisson_lock__channel:{linger}";
    dlock::mutex m = holder.make_mutex("linger");
    m.lock();
    // The first waiter gives up rather than acquiring: an acquisition would end in a release
    // whose unlock message reaches c's lingering subscription at a time the test cannot see,
    // and would wake the second waiter into a second attempt.
    std::thread first([&] {
        dlock::mutex w = c.make_mutex("linger");
        EXPECT_FALSE(w.try_lock_for(1s));
    });
    ASSERT_TRUE(eventually([&] { return sleeping_waiters(c, channel) == 1; }, 2s));
    first.join();
    // No waiter is left, but the subscription stays for subscriber::linger (100 ms)... (asked
    // through a client, not redis-cli: a process start would use up the linger under TSan)
    const auto numsub = dlock::redis::command(holder, {"PUBSUB", "NUMSUB", channel});
    ASSERT_EQ(numsub.elements.size(), 2u);
    EXPECT_EQ(numsub.elements[1].integer, 1);
    // ... so a waiter that comes back at once reuses it: no second SUBSCRIBE, one attempt.
    dlock::redis::command(holder, {"CONFIG", "RESETSTAT"});
    dlock::test::blocked_waiter second(c, "linger");
    ASSERT_TRUE(eventually([&] { return sleeping_waiters(c, channel) == 1; }, 2s));
    EXPECT_EQ(command_calls(s, "subscribe"), 0);
    EXPECT_EQ(command_calls(s, "evalsha"), 1);
    m.unlock();
    second.join();
    EXPECT_TRUE(eventually([&] { return s.cli({"PUBSUB", "CHANNELS", "*"}).empty(); }, 2s));
}

TEST(lock, waiters_that_give_up_leave_no_subscription_behind) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("giveup");
    ma.lock();
    std::vector<std::thread> ws;
    for (int i = 0; i < 4; ++i)
        ws.emplace_back([&] {
            dlock::mutex m = b.make_mutex("giveup");
            EXPECT_FALSE(m.try_lock_for(100ms));
        });
    for (auto& w : ws)
        w.join();
    EXPECT_TRUE(eventually([&] { return s.cli({"PUBSUB", "CHANNELS", "*"}).empty(); }, 2s));
    ma.unlock();
}

TEST(lock, an_unreachable_server_fails_lock_within_bounds) {
    const auto port = dlock::test::free_port();
    auto o = fast_options("redis://127.0.0.1:" + std::to_string(port));
    o.command_timeout = 300ms;
    dlock::client c(o);
    dlock::mutex m = c.make_mutex("nowhere");
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    m.lock(ec);
    EXPECT_TRUE(ec == errc::timeout || ec == errc::unavailable) << ec.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

TEST(lock, a_waiter_resubscribes_after_its_pubsub_connection_is_killed) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("resub");
    ma.lock(dlock::fixed_lease{30s});
    dlock::test::blocked_waiter waiter(b, "resub");
    const auto subscribed = [&] { return one_subscriber(s, "redisson_lock__channel:{resub}"); };
    ASSERT_TRUE(eventually(subscribed, 2s));
    const auto before = s.cli({"CLIENT", "LIST", "TYPE", "pubsub"});
    ASSERT_FALSE(before.empty());
    s.cli({"CLIENT", "KILL", "TYPE", "pubsub"});
    // The subscriber reconnects (a new client id) and subscribes again by itself.
    ASSERT_TRUE(eventually(
        [&] {
            const auto now = s.cli({"CLIENT", "LIST", "TYPE", "pubsub"});
            return !now.empty() &&
                   now.substr(0, now.find(' ')) != before.substr(0, before.find(' ')) &&
                   subscribed();
        },
        3s));
    const auto released = std::chrono::steady_clock::now();
    ma.unlock();
    waiter.join();
    EXPECT_TRUE(waiter.acquired.load());
    EXPECT_LT(waiter.acquired_at - released, 500ms); // woken by the message, not the 30 s TTL
}

TEST(lock, a_waiter_ends_with_cancelled_when_its_client_shuts_down) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("shutdown");
    ma.lock(dlock::fixed_lease{30s});
    auto b = std::make_unique<dlock::client>(fast_options(s.url()));
    dlock::mutex mb = b->make_mutex("shutdown"); // keeps b's internals alive past b
    std::error_code ec;
    std::thread waiter([&] { mb.lock(ec); });
    ASSERT_TRUE(
        eventually([&] { return one_subscriber(s, "redisson_lock__channel:{shutdown}"); }, 2s));
    b.reset(); // the waiter must not sleep for the holder's 30 s lease
    waiter.join();
    EXPECT_EQ(ec, errc::cancelled);
    ma.unlock();
}

TEST(lock, a_client_that_releases_and_locks_again_lets_another_clients_waiter_in_first) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    for (const auto kind : {dlock::lock_kind::reentrant, dlock::lock_kind::simple}) {
        const std::string name = "polite-" + std::to_string(static_cast<int>(kind));
        dlock::client a(fast_options(s.url()));
        dlock::client b(fast_options(s.url()));
        dlock::test::either_mutex ma(a, name, kind);
        ma->lock(dlock::fixed_lease{30s});
        std::atomic<bool> b_got{false};
        std::thread waiter([&] {
            dlock::test::either_mutex mb(b, name, kind);
            if (mb->try_lock_for(20s)) {
                b_got = true;
                mb->unlock();
            }
        });
        ASSERT_TRUE(
            eventually([&] { return one_subscriber(s, dlock::test::channel_of(kind, name)); }, 5s));
        // The release reaches the other client's waiter, so this client gives it a head start
        // on the lock: its next acquisition waits before trying (white-box: the registry).
        auto& reg = dlock::detail::access::impl(a)->registry();
        const auto& proto = dlock::detail::protocol_of(kind);
        EXPECT_FALSE(reg.polite_until(proto, name, std::chrono::steady_clock::now()));
        const auto before = std::chrono::steady_clock::now(); // (no timing in the check)
        ma->unlock();
        EXPECT_TRUE(reg.polite_until(proto, name, before));
        ma->lock(dlock::fixed_lease{30s});
        // A busy loop of release-and-lock by one client still lets the waiter in.
        int rounds = 0;
        while (!b_got && rounds < 200) {
            ma->unlock();
            ma->lock(dlock::fixed_lease{30s});
            ++rounds;
        }
        ma->unlock();
        waiter.join();
        EXPECT_TRUE(b_got) << static_cast<int>(kind);
        EXPECT_LT(rounds, 200) << static_cast<int>(kind);
        // With nobody listening (the lingering subscriptions of both clients gone), a release
        // gives no head start (the uncontended path stays one round trip).
        const auto channel = dlock::test::channel_of(kind, name);
        ASSERT_TRUE(eventually(
            [&] {
                const auto numsub = s.cli({"PUBSUB", "NUMSUB", channel});
                return numsub.size() >= 2 && numsub.compare(numsub.size() - 2, 2, "\n0") == 0;
            },
            5s));
        ma->lock(dlock::fixed_lease{30s});
        const auto alone = std::chrono::steady_clock::now();
        ma->unlock();
        EXPECT_FALSE(reg.polite_until(proto, name, alone));
    }
}

TEST(lock, a_waiter_whose_subscription_is_refused_joins_again_and_is_not_stranded) {
    // The server answers the waiter's SUBSCRIBE with an error (here NOPERM: its ACL user may
    // not use the lock's channel; on a Cluster, MOVED or CLUSTERDOWN to an SSUBSCRIBE during a
    // migration or failover). The error names no channel; every unconfirmed channel's waiters
    // leave it and join again after a pause, trying once more each time, so a release is seen
    // within that pause instead of at the waiter's deadline.
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s({.acl_lines = {"user nosub on >pw ~* &* +@all -subscribe "
                                  "-ssubscribe"}});
    dlock::client holder(fast_options(s.url()));
    auto url = s.url();
    url.insert(url.find("//") + 2, "nosub:pw@");
    dlock::client c(fast_options(url));
    dlock::mutex m = holder.make_mutex("refused");
    m.lock(dlock::fixed_lease{60s});
    bool got = false;
    std::chrono::steady_clock::duration waited{};
    std::thread waiter([&] {
        dlock::mutex w = c.make_mutex("refused");
        const auto t0 = std::chrono::steady_clock::now();
        got = w.try_lock_for(20s, dlock::fixed_lease{10s});
        waited = std::chrono::steady_clock::now() - t0;
        if (got) w.unlock();
    });
    // Released once the server refused the waiter's SUBSCRIBE (the ACL log says so).
    EXPECT_TRUE(eventually(
        [&] {
            return s.cli({"ACL", "LOG"}).find("subscribe") != std::string::npos;
        },
        5s));
    m.unlock();
    waiter.join();
    EXPECT_TRUE(got);
    EXPECT_LT(waited, 10s); // not its deadline (20 s), nor the holder's lease (60 s)
}
