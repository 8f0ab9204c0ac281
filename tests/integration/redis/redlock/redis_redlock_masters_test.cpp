// Redlock over five (or three) real, independent redis-server masters: quorum with masters
// stopped, refusal, validity used up by stalled masters, partial acquisitions deleted,
// mutual exclusion between two Redlock clients, loss when an extension misses the quorum,
// votes, release on every master (also a master slower than the quorum, and a client destroyed
// right after an async release), configuration errors and the redlock:// URL, the queries
// across the masters (is_locked, inspect, force_unlock, list) and the behaviours of Redisson's
// deleted RedissonRedLockTest (redisson.md §8.5) that apply. Every Redlock client is a
// dlock::client (redlock_options or a redlock:// URL); its own calls are dlock::redlock's.
#include "test_util.hpp"

#include <asio/use_future.hpp>

#include <atomic>
#include <functional>
#include <future>
#include <optional>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::redlock_vote;
using dlock::redlock::acquire_with_votes;
using dlock::redlock::votes;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_masters;
constexpr auto simple = dlock::lock_kind::simple;

namespace {

/// Options with bounds a loaded test machine keeps: a round waits 200 ms at most.
dlock::redlock_options options_for(redis_masters& m) {
    dlock::redlock_options o;
    for (const auto& u : m.urls())
        o.masters.push_back(fast_options(u));
    o.node_timeout = 200ms;
    o.retry_delay = 5ms;
    o.retry_jitter = 10ms;
    o.watchdog_lease = 3s;
    return o;
}

bool exists(redis_masters& m, std::size_t i, const std::string& key) {
    return m[i].cli({"EXISTS", key}) == "1";
}

std::size_t holders(redis_masters& m, const std::string& key) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < m.size(); ++i)
        if (m[i].running() && exists(m, i, key)) ++n;
    return n;
}

/// True when no running master has `key`.
bool gone_everywhere(redis_masters& m, const std::string& key) {
    return holders(m, key) == 0;
}

std::size_t count(const std::vector<redlock_vote>& v, redlock_vote::kind k) {
    std::size_t n = 0;
    for (const auto& x : v)
        if (x.what == k) ++n;
    return n;
}

} // namespace

TEST(redlock, five_masters_with_two_stopped_still_grant_the_lock) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(5);
    m[1].stop();
    m[3].stop();
    dlock::client r(options_for(m));
    EXPECT_EQ(dlock::redlock::masters(r), 5u);
    EXPECT_EQ(dlock::redlock::quorum(r), 3u);
    std::error_code ec;
    auto a = acquire_with_votes(r, "job", {.wait = 0ms, .kind = simple}, ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(a.held);
    EXPECT_EQ(a.rounds, 1u);
    EXPECT_EQ(count(a.votes, redlock_vote::kind::yes), 3u);
    EXPECT_EQ(holders(m, "job"), 3u);
    EXPECT_GT(a.held.valid_until(), std::chrono::steady_clock::now() + 2s);
    a.held.release();
    EXPECT_TRUE(eventually([&] { return gone_everywhere(m, "job"); }, 2s));
}

// acquire_with_votes hands its hold out with max_hold (and warn_margin) too, blocking and async.
TEST(redlock, acquire_with_votes_takes_max_hold) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    dlock::client r(options_for(m));
    std::error_code ec;
    EXPECT_FALSE(
        acquire_with_votes(r, "mh", {.wait = 0ms, .kind = simple, .max_hold = 0ms}, ec).held);
    EXPECT_EQ(ec, errc::invalid_argument);
    auto a = acquire_with_votes(r, "mh", {.wait = 1s, .kind = simple, .max_hold = 200ms}, ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(a.held);
    ASSERT_TRUE(eventually([&] { return a.held.lost(); }, 5s));
    EXPECT_EQ(a.held.loss_cause(), dlock::loss_cause::max_hold);
    EXPECT_TRUE(a.held.warned());
    EXPECT_TRUE(eventually([&] { return gone_everywhere(m, "mh"); }, 2s)) << "not released";
    auto b = dlock::redlock::async_acquire_with_votes(
                 r, "mh2", {.wait = 1s, .kind = simple, .max_hold = 200ms}, asio::use_future)
                 .get();
    ASSERT_TRUE(b.held);
    ASSERT_TRUE(eventually([&] { return b.held.lost(); }, 5s));
    EXPECT_EQ(b.held.loss_cause(), dlock::loss_cause::max_hold);
}

TEST(redlock, five_masters_with_three_stopped_refuse_the_lock_and_keep_no_key) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(5);
    m[0].stop();
    m[2].stop();
    m[4].stop();
    dlock::client r(options_for(m));
    std::error_code ec;
    auto a = acquire_with_votes(r, "job", {.wait = 300ms, .kind = simple}, ec);
    EXPECT_FALSE(ec) << ec.message(); // masters down are votes, not errors
    EXPECT_FALSE(a.held);
    EXPECT_GE(a.rounds, 1u);
    EXPECT_LE(count(a.votes, redlock_vote::kind::yes), 2u);
    for (std::size_t i : {0u, 2u, 4u}) {
        EXPECT_NE(a.votes[i].what, redlock_vote::kind::yes);
        EXPECT_NE(a.votes[i].what, redlock_vote::kind::refused);
    }
    // The two running masters said yes in every round; each lost round deleted the token.
    EXPECT_TRUE(eventually([&] { return gone_everywhere(m, "job"); }, 2s));
}

TEST(redlock, a_refused_round_deletes_its_partial_acquisitions_on_every_master) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(5);
    for (std::size_t i : {0u, 1u, 2u})
        m[i].cli({"SET", "job", "someone-else", "PX", "30000"});
    dlock::client r(options_for(m));
    std::error_code ec;
    auto a = acquire_with_votes(r, "job", {.wait = 0ms, .kind = simple}, ec);
    ASSERT_FALSE(ec);
    EXPECT_FALSE(a.held);
    EXPECT_EQ(a.rounds, 1u);
    EXPECT_EQ(count(a.votes, redlock_vote::kind::refused), 3u);
    // Masters 3 and 4 granted the key and must not keep it; the others keep the holder's.
    EXPECT_TRUE(eventually([&] { return !exists(m, 3, "job") && !exists(m, 4, "job"); }, 2s));
    for (std::size_t i : {0u, 1u, 2u})
        EXPECT_EQ(m[i].cli({"GET", "job"}), "someone-else");
}

TEST(redlock, stalled_masters_use_up_the_validity_and_the_lock_is_refused) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(5);
    auto o = options_for(m);
    // The lease below is 2100 ms, its validity 2100 - 23 = 2077 ms: a node_timeout between the
    // two lets only the validity end the round.
    o.node_timeout = 2090ms;
    for (auto& c : o.masters)
        c.command_timeout = 10s; // the stalled connections are kept, not recycled
    dlock::client r(o);
    ASSERT_TRUE(r.acquire("warm-up", {.wait = 0ms, .lease = 5s, .kind = simple})); // connections up
    for (std::size_t i : {0u, 1u, 2u})
        m[i].pause(); // SIGSTOP: the SET is written and never answered while stopped
    const auto t0 = std::chrono::steady_clock::now();
    std::error_code ec;
    auto a = acquire_with_votes(r, "job", {.wait = 0ms, .lease = 2100ms, .kind = simple}, ec);
    const auto spent = std::chrono::steady_clock::now() - t0;
    for (std::size_t i : {0u, 1u, 2u})
        m[i].resume();
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_FALSE(a.held);
    // The round ended when the validity was used up, not after node_timeout.
    EXPECT_GE(spent, 2077ms);
    EXPECT_LT(spent, 2100ms + 500ms);
    for (std::size_t i : {0u, 1u, 2u})
        EXPECT_EQ(a.votes[i].what, redlock_vote::kind::timed_out);
    // The stalled masters execute the SET when they resume, then the delete queued behind it.
    EXPECT_TRUE(eventually([&] { return gone_everywhere(m, "job"); }, 3s));
}

TEST(redlock, a_lease_shorter_than_the_node_timeout_is_an_invalid_argument) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    dlock::client r(options_for(m));
    std::error_code ec;
    auto l = r.acquire("job", {.wait = 0ms, .lease = 100ms, .kind = simple}, ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_FALSE(l);
    r.acquire("", {.wait = 0ms, .kind = simple}, ec);
    EXPECT_EQ(ec, errc::invalid_argument);
}

TEST(redlock, two_redlock_clients_never_hold_the_lock_at_once) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(5);
    dlock::client a(options_for(m));
    dlock::client b(options_for(m));
    std::atomic<int> inside{0};
    std::atomic<int> overlaps{0};
    int counter = 0; // incremented non-atomically, as in RedissonRedLockTest
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            dlock::client& r = t % 2 == 0 ? a : b;
            for (int i = 0; i < 5; ++i) {
                auto l = r.acquire("counter", {.wait = 20s, .lease = 5s, .kind = simple});
                ASSERT_TRUE(l);
                if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
                const int seen = counter;
                std::this_thread::yield();
                counter = seen + 1;
                inside.fetch_sub(1);
                l.release();
            }
        });
    for (auto& t : threads)
        t.join();
    EXPECT_EQ(overlaps.load(), 0);
    EXPECT_EQ(counter, 20);
}

TEST(redlock, an_extension_that_misses_the_quorum_signals_loss) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(5);
    auto o = options_for(m);
    o.node_timeout = 150ms;
    o.watchdog_lease = 600ms; // extended every 200 ms
    dlock::client r(o);
    auto l = r.acquire("job",
                       {.wait = 2s, .kind = simple}); // a first round slowed by connecting may miss
    ASSERT_TRUE(l);
    std::atomic<int> calls{0};
    l.on_lost([&] { calls.fetch_add(1); });
    // The watchdog keeps it past its first lease while all masters run.
    const auto first = l.valid_until();
    ASSERT_TRUE(eventually([&] { return l.valid_until() > first; }, 2s));
    EXPECT_FALSE(l.lost());
    m[0].stop();
    m[1].stop();
    m[2].stop();
    const auto stopped = std::chrono::steady_clock::now();
    ASSERT_TRUE(eventually([&] { return l.stop_token().stop_requested(); }, 3s));
    // Lost no later than the validity of the last successful extension (600 ms lease).
    EXPECT_LT(std::chrono::steady_clock::now() - stopped, 600ms + 300ms);
    EXPECT_TRUE(l.lost());
    EXPECT_EQ(calls.load(), 1);
    EXPECT_LT(l.valid_until(), std::chrono::steady_clock::now());
    std::error_code ec;
    l.release(ec);
    EXPECT_EQ(ec, errc::not_owner);
}

TEST(redlock, an_extension_refused_by_a_quorum_is_lost_at_once) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(5);
    auto o = options_for(m);
    o.watchdog_lease = 3s; // extended every second; valid for about 3 s
    dlock::client r(o);
    auto l = r.acquire("job", {.wait = 0ms, .kind = simple});
    ASSERT_TRUE(l);
    std::string deletes; // what each DEL answered, for the failure message
    for (std::size_t i : {0u, 1u, 2u})
        deletes += m[i].cli({"DEL", "job"}) + ";";
    const auto deleted = std::chrono::steady_clock::now();
    ASSERT_TRUE(eventually([&] { return l.lost(); }, 3s)) << "DEL answered: " << deletes;
    // Found at the next extension (about 1 s), long before the 3 s validity ends.
    EXPECT_LT(std::chrono::steady_clock::now() - deleted, 2s);
    EXPECT_EQ(count(votes(l), redlock_vote::kind::refused), 3u);
}

TEST(redlock, votes_say_which_masters_said_yes_and_why_the_others_did_not) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(5);
    m[0].stop();
    m[1].cli({"SET", "job", "someone-else", "PX", "30000"});
    dlock::client r(options_for(m));
    std::error_code ec;
    // A fixed lease: no extension round replaces the acquisition's votes meanwhile.
    auto a = acquire_with_votes(r, "job", {.wait = 0ms, .lease = 10s, .kind = simple}, ec);
    ASSERT_FALSE(ec);
    ASSERT_TRUE(a.held);
    ASSERT_EQ(a.votes.size(), 5u);
    for (std::size_t i = 0; i < 5; ++i) {
        EXPECT_EQ(a.votes[i].master, i);
        EXPECT_EQ(a.votes[i].address, "redis://127.0.0.1:" + std::to_string(m[i].port()));
    }
    // The round was decided at the third yes: master 0 (down) had not answered then.
    EXPECT_NE(a.votes[0].what, redlock_vote::kind::yes);
    // Its command fails when its command_timeout (1 s) passes; the late answer is added to the
    // lease's votes, with the reason. Master 1 answered: held by someone else.
    ASSERT_TRUE(
        eventually([&] { return count(votes(a.held), redlock_vote::kind::pending) == 0; }, 3s));
    const auto v = votes(a.held);
    EXPECT_EQ(v[0].what, redlock_vote::kind::failed);
    EXPECT_EQ(v[0].ec, errc::unavailable);
    EXPECT_EQ(v[1].what, redlock_vote::kind::refused);
    for (std::size_t i : {2u, 3u, 4u})
        EXPECT_EQ(v[i].what, redlock_vote::kind::yes);
    EXPECT_FALSE(a.held.token().has_value()); // no fencing number across independent masters
    dlock::lease other;
    EXPECT_TRUE(votes(other).empty());
}

TEST(redlock, release_deletes_the_token_on_every_master) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(5);
    dlock::client r(options_for(m));
    auto l = r.acquire("job", {.wait = 0ms, .kind = simple});
    ASSERT_TRUE(l);
    EXPECT_EQ(l.name(), "job");
    ASSERT_TRUE(eventually([&] { return holders(m, "job") == 5; }, 2s));
    const auto token = m[0].cli({"GET", "job"});
    EXPECT_EQ(token.size(), 32u);
    for (std::size_t i = 1; i < 5; ++i)
        EXPECT_EQ(m[i].cli({"GET", "job"}), token); // one token for the whole acquisition
    l.release();
    EXPECT_FALSE(l);
    EXPECT_TRUE(eventually([&] { return gone_everywhere(m, "job"); }, 2s));
}

TEST(redlock, a_bad_url_in_the_list_is_a_configuration_error) {
    const auto refused = [](const std::function<void()>& make, const std::string& what) {
        try {
            make();
            ADD_FAILURE() << "accepted " << what;
        } catch (const dlock::error& e) {
            EXPECT_EQ(e.code(), errc::configuration_error) << what << ": " << e.what();
        }
    };
    refused([] { dlock::client r("redlock://127.0.0.1:1,127.0.0.1:notaport,127.0.0.1:2"); },
            "a bad master in the URL");
    refused([] { dlock::client r("redlock://127.0.0.1:1,,127.0.0.1:2"); }, "an empty master");
    refused([] { dlock::client r("redlock://127.0.0.1:1?node_timeout=soon"); },
            "a bad node_timeout");
    refused([] { dlock::client r("redlock://127.0.0.1:1?wait=1"); }, "an unknown parameter");
    refused(
        [] {
            dlock::redlock_options o;
            o.masters = {dlock::parse_url("redis://127.0.0.1:1"),
                         dlock::parse_url("redis-cluster://127.0.0.1:2")};
            dlock::client r(o);
        },
        "a cluster master");
    refused([] { dlock::client r(dlock::redlock_options{}); }, "no masters");
}

TEST(redlock, a_url_sets_every_master_and_every_redlock_option) {
    const auto o = dlock::redlock::parse_url(
        "rediss-redlock://u:p%2Cw@h1:7001,h2,:secret@h3:7003/2?node_timeout=70&retry_delay=5"
        "&retry_jitter=9&watchdog_lease=4000");
    ASSERT_EQ(o.masters.size(), 3u);
    EXPECT_EQ(o.masters[0].endpoints.at(0).host, "h1");
    EXPECT_EQ(o.masters[0].endpoints.at(0).port, 7001);
    EXPECT_EQ(o.masters[0].username, "u");
    EXPECT_EQ(o.masters[0].password, "p,w");
    EXPECT_EQ(o.masters[1].endpoints.at(0).port, 6379);
    EXPECT_TRUE(o.masters[1].password.empty());
    EXPECT_EQ(o.masters[2].password, "secret");
    for (const auto& m : o.masters) {
        EXPECT_TRUE(m.tls.enabled);
        EXPECT_EQ(m.db, 2);
        EXPECT_EQ(m.kind, dlock::topology::standalone);
    }
    EXPECT_EQ(o.node_timeout, 70ms);
    EXPECT_EQ(o.retry_delay, 5ms);
    EXPECT_EQ(o.retry_jitter, 9ms);
    EXPECT_EQ(o.watchdog_lease, 4000ms);
    const auto plain = dlock::redlock::parse_url("redlock://a,b");
    EXPECT_FALSE(plain.masters.at(0).tls.enabled);
    EXPECT_EQ(plain.node_timeout, dlock::redlock_options{}.node_timeout);
}

TEST(redlock, the_redlock_only_calls_need_a_redlock_client) {
    DLOCK_SKIP_WITHOUT_REDIS();
    dlock::test::redis_server s;
    dlock::client c(fast_options(s.url()));
    try {
        (void)dlock::redlock::masters(c);
        FAIL() << "masters() on a Redis client";
    } catch (const dlock::error& e) {
        const std::string text = e.what();
        EXPECT_EQ(e.code(), errc::unsupported);
        EXPECT_NE(text.find("dlock::redlock::masters needs a Redlock client (redlock://"),
                  std::string::npos)
            << text;
        EXPECT_NE(text.find("this client's backend is redis"), std::string::npos) << text;
    }
    std::error_code ec;
    EXPECT_EQ(dlock::redlock::masters(c, ec), 0u);
    EXPECT_EQ(ec, errc::unsupported);
    EXPECT_FALSE(acquire_with_votes(c, "job", {.wait = 0ms, .kind = simple}, ec).held);
    EXPECT_EQ(ec, errc::unsupported);
    std::promise<std::error_code> p;
    dlock::redlock::async_acquire_with_votes(
        c, "job", {.wait = 0ms, .kind = simple},
        [&](std::error_code e, dlock::redlock_acquisition) { p.set_value(e); });
    EXPECT_EQ(p.get_future().get(), errc::unsupported);
    auto l = c.acquire("job", {.wait = 0ms, .kind = simple});
    ASSERT_TRUE(l);
    EXPECT_TRUE(votes(l).empty()); // a lease of another backend has no votes
}

TEST(redlock, async_acquire_completes_with_a_lease_through_use_future_and_a_callback) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    dlock::client r(options_for(m));
    auto f = r.async_acquire("job", {.wait = 0ms, .kind = simple}, asio::use_future);
    auto l = f.get();
    ASSERT_TRUE(l);
    std::promise<std::pair<std::error_code, bool>> p;
    dlock::redlock::async_acquire_with_votes(r, "job", {.wait = 0ms, .kind = simple},
                                             [&](std::error_code ec, dlock::redlock_acquisition a) {
                                                 p.set_value({ec, static_cast<bool>(a.held)});
                                             });
    const auto [ec, held] = p.get_future().get();
    EXPECT_FALSE(ec);
    EXPECT_FALSE(held); // held by the first lease
    std::promise<std::error_code> released;
    l.async_release([&](std::error_code e) { released.set_value(e); });
    EXPECT_FALSE(released.get_future().get());
    EXPECT_TRUE(eventually([&] { return gone_everywhere(m, "job"); }, 2s));
}

TEST(redlock, a_fixed_lease_is_not_extended_and_is_lost_when_it_ends) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    dlock::client r(options_for(m));
    auto l = r.acquire("job", {.wait = 0ms, .lease = 400ms, .kind = simple});
    ASSERT_TRUE(l);
    ASSERT_TRUE(eventually([&] { return l.lost(); }, 2s));
    EXPECT_TRUE(eventually([&] { return gone_everywhere(m, "job"); }, 2s)); // expired
    // A second acquisition gets it, and extend() on it moves its validity.
    auto again = r.acquire("job", {.wait = 0ms, .lease = 400ms, .kind = simple});
    ASSERT_TRUE(again);
    again.extend(5s);
    EXPECT_GT(again.valid_until(), std::chrono::steady_clock::now() + 4s);
    EXPECT_GT(std::stoll(m[0].cli({"PTTL", "job"})), 4000);
}

// ---- RedissonRedLockTest (redisson.md §8.5), three masters -------------------------------------

TEST(redlock, is_refused_when_two_of_three_masters_hold_the_lock_for_someone_else) {
    DLOCK_SKIP_WITHOUT_REDIS(); // testLockFailed
    redis_masters m(3);
    m[1].cli({"SET", "lock", "other", "PX", "30000"});
    m[2].cli({"SET", "lock", "other", "PX", "30000"});
    dlock::client r(options_for(m));
    EXPECT_FALSE(r.acquire("lock", {.wait = 0ms, .kind = simple}));
}

TEST(redlock, is_granted_when_one_of_three_masters_holds_the_lock_for_someone_else) {
    DLOCK_SKIP_WITHOUT_REDIS(); // testLockSuccess2
    redis_masters m(3);
    m[1].cli({"SET", "lock", "other", "PX", "30000"});
    dlock::client r(options_for(m));
    EXPECT_TRUE(r.acquire("lock", {.wait = 500ms, .lease = 5000ms, .kind = simple}));
}

TEST(redlock, waits_for_a_blocker_on_every_master_and_gets_the_lock_when_it_is_released) {
    DLOCK_SKIP_WITHOUT_REDIS(); // testLockSuccess
    redis_masters m(3);
    dlock::client blocker(options_for(m));
    dlock::client r(options_for(m));
    auto held = blocker.acquire("lock", {.wait = 0ms, .kind = simple});
    ASSERT_TRUE(held);
    std::atomic<bool> got{false};
    std::thread waiter([&] {
        auto l = r.acquire("lock", {.wait = 10s, .kind = simple});
        got = static_cast<bool>(l);
    });
    // Only when the blocker lets go (Redisson: forceUnlock) can the waiter win.
    EXPECT_FALSE(got.load());
    held.release();
    waiter.join();
    EXPECT_TRUE(got.load());
}

TEST(redlock, still_locks_and_unlocks_with_one_of_three_masters_stopped) {
    DLOCK_SKIP_WITHOUT_REDIS(); // testConnectionFailed
    redis_masters m(3);
    m[1].stop();
    dlock::client r(options_for(m));
    auto l = r.acquire("lock", {.wait = 1s, .kind = simple});
    ASSERT_TRUE(l);
    l.release();
    EXPECT_TRUE(eventually([&] { return gone_everywhere(m, "lock"); }, 2s));
}

TEST(redlock, ten_threads_with_a_fixed_lease_count_exactly_under_one_redlock) {
    DLOCK_SKIP_WITHOUT_REDIS(); // testTryLockLeasetime / testLockLeasetime*
    redis_masters m(3);
    dlock::client r(options_for(m));
    int counter = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < 10; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 5; ++i) {
                auto l = r.acquire("counter", {.wait = 30s, .lease = 2s, .kind = simple});
                ASSERT_TRUE(l);
                const int seen = counter;
                std::this_thread::yield();
                counter = seen + 1;
            }
        });
    for (auto& t : threads)
        t.join();
    EXPECT_EQ(counter, 50);
}

TEST(redlock, extend_without_a_quorum_is_unavailable_and_leaves_the_lease_as_it_was) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    dlock::client r(options_for(m));
    auto l = r.acquire("job", {.wait = 0ms, .lease = 10s, .kind = simple});
    ASSERT_TRUE(l);
    const auto until = l.valid_until();
    m[0].stop();
    m[1].stop();
    std::error_code ec;
    l.extend(20s, ec);
    EXPECT_EQ(ec, errc::unavailable);
    EXPECT_FALSE(l.lost());
    EXPECT_EQ(l.valid_until(), until);
    l.extend(std::chrono::milliseconds(100), ec); // not above node_timeout
    EXPECT_EQ(ec, errc::invalid_argument);
}

TEST(redlock, destroying_the_redlock_cancels_a_waiting_acquisition) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    for (std::size_t i = 0; i < 3; ++i)
        m[i].cli({"SET", "job", "other", "PX", "30000"});
    std::promise<std::error_code> p;
    {
        dlock::client r(options_for(m));
        r.async_acquire(
            "job", {.wait = 20s, .kind = simple},
            [&](std::error_code ec, dlock::lease l) { p.set_value(l ? std::error_code{} : ec); });
    }
    auto f = p.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f.get(), errc::cancelled);
}

TEST(redlock, a_lease_outliving_its_redlock_ends_as_released_without_blocking) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    dlock::lease l;
    {
        dlock::client r(options_for(m));
        l = r.acquire("job", {.wait = 0ms, .lease = 5s, .kind = simple});
        ASSERT_TRUE(l);
    }
    std::error_code ec;
    l.release(ec);
    EXPECT_EQ(ec, errc::cancelled);
    EXPECT_FALSE(l);
}

TEST(redlock, the_watchdog_extends_many_holds_with_one_script_per_master_and_batch) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    auto o = options_for(m);
    o.watchdog_lease = 900ms; // extended every 300 ms
    dlock::client r(o);
    const auto evalsha_calls = [&](std::size_t i) {
        const auto stats = m[i].cli({"INFO", "commandstats"});
        const auto at = stats.find("cmdstat_evalsha:calls=");
        return at == std::string::npos ? 0LL : std::stoll(stats.substr(at + 22));
    };
    std::vector<dlock::lease> held;
    for (int i = 0; i < 150; ++i) {
        held.push_back(r.acquire("job" + std::to_string(i), {.wait = 0ms, .kind = simple}));
        ASSERT_TRUE(held.back());
    }
    const auto before = evalsha_calls(0);
    std::vector<std::chrono::steady_clock::time_point> first;
    for (auto& l : held)
        first.push_back(l.valid_until());
    // Every hold extended at least once...
    ASSERT_TRUE(eventually(
        [&] {
            for (std::size_t i = 0; i < held.size(); ++i)
                if (held[i].valid_until() <= first[i]) return false;
            return true;
        },
        3s));
    // ...with two scripts (100 + 50 keys) per master and tick, not one per hold.
    const auto spent = evalsha_calls(0) - before;
    EXPECT_GE(spent, 2);
    EXPECT_LE(spent, 2 * 5);
    for (auto& l : held)
        EXPECT_FALSE(l.lost());
    const auto pttl = std::stoll(m[2].cli({"PTTL", "job149"}));
    EXPECT_GT(pttl, 0);
}

TEST(redlock, release_returns_only_after_a_master_slower_than_the_quorum_deleted_the_key) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    auto o = options_for(m);
    o.masters[2].command_timeout = 5s; // the slow master's answer comes long before this
    dlock::client r(o);
    auto l = r.acquire("job", {.wait = 0ms, .kind = simple});
    ASSERT_TRUE(l);
    // The acquire returns on a quorum; the third master's yes may still be on its way.
    ASSERT_TRUE(eventually([&] { return holders(m, "job") == 3; }, 2s));
    // Master 2 holds write commands (the release script) for a second: masters 0 and 1 make
    // the quorum at once, master 2 answers after the round's node_timeout (200 ms).
    ASSERT_EQ(m[2].cli({"CLIENT", "PAUSE", "1000", "WRITE"}), "OK");
    const auto t0 = std::chrono::steady_clock::now();
    std::error_code ec;
    l.release(ec);
    const auto spent = std::chrono::steady_clock::now() - t0;
    EXPECT_FALSE(ec) << ec.message(); // the quorum decided: released
    EXPECT_FALSE(l);
    // Right after release() returns, the key is gone on every master, the slow one included.
    for (std::size_t i = 0; i < 3; ++i)
        EXPECT_FALSE(exists(m, i, "job")) << "master " << i;
    EXPECT_LT(spent, 5s);
}

TEST(redlock, destroying_the_redlock_right_after_an_async_release_still_deletes_everywhere) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    auto o = options_for(m);
    o.masters[2].command_timeout = 5s;
    std::atomic<int> completed{0}; // 1: released, 2: an error
    {
        dlock::client r(o);
        auto l = r.acquire("job", {.wait = 0ms, .kind = simple});
        ASSERT_TRUE(l);
        // The acquire returns on a quorum; the third master's yes may still be on its way.
        ASSERT_TRUE(eventually([&] { return holders(m, "job") == 3; }, 2s));
        ASSERT_EQ(m[2].cli({"CLIENT", "PAUSE", "1000", "WRITE"}), "OK");
        l.async_release([&](std::error_code ec) { completed = ec ? 2 : 1; });
    } // destroyed at once: the deletes are in flight, or not even sent yet
    for (std::size_t i = 0; i < 3; ++i)
        EXPECT_FALSE(exists(m, i, "job")) << "master " << i;
    EXPECT_EQ(completed.load(), 1);
}

TEST(redlock, the_shutdown_drain_waits_for_a_stopped_master_no_longer_than_its_command_timeout) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    auto o = options_for(m); // command_timeout 1 s on every master
    std::optional<dlock::client> r;
    r.emplace(o);
    auto l = r->acquire("job", {.wait = 0ms, .kind = simple});
    ASSERT_TRUE(l);
    m[2].pause(); // SIGSTOP: the delete is written and never answered
    l.async_release([](std::error_code) {});
    const auto t0 = std::chrono::steady_clock::now();
    r.reset();
    const auto spent = std::chrono::steady_clock::now() - t0;
    m[2].resume();
    EXPECT_FALSE(exists(m, 0, "job"));
    EXPECT_FALSE(exists(m, 1, "job"));
    EXPECT_LT(spent, 3s); // the command timeout (1 s) plus the deadline check, with slack
}

// ---- the queries across the masters --------------------------------------------------------

TEST(redlock, a_redlock_url_client_takes_the_lock_on_every_master) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    std::string url = "redlock://";
    for (std::size_t i = 0; i < m.size(); ++i)
        url += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(m[i].port());
    dlock::client r(url + "?node_timeout=200&watchdog_lease=3000");
    EXPECT_EQ(r.backend_name(), "redlock");
    EXPECT_EQ(dlock::redlock::masters(r), 3u);
    EXPECT_EQ(dlock::redlock::options(r).watchdog_lease, 3000ms);
    auto l = r.acquire("job", {.wait = 2s, .kind = simple});
    ASSERT_TRUE(l);
    // The acquire returns on a quorum; the third master's yes may still be on its way.
    EXPECT_TRUE(eventually([&] { return holders(m, "job") == 3; }, 2s));
    std::error_code ec;
    EXPECT_FALSE(r.acquire("job", {.wait = 0ms}, ec)); // the reentrant kind is not Redlock's
    EXPECT_EQ(ec, errc::unsupported);
    try {
        (void)r.acquire("job", {.wait = 0ms});
        ADD_FAILURE() << "a reentrant lock on Redlock";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::unsupported);
        EXPECT_NE(std::string(e.what()).find("the redlock backend does not offer the 'lock' kind"),
                  std::string::npos)
            << e.what();
    }
    l.release();
    EXPECT_TRUE(eventually([&] { return gone_everywhere(m, "job"); }, 2s));
}

TEST(redlock, queries_decide_by_the_quorum_and_show_each_master) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_masters m(3);
    dlock::client r(options_for(m));
    auto mutex = r.make_simple_mutex("job"); // is_locked() asks the backend
    EXPECT_FALSE(mutex.is_locked());
    auto l = r.acquire("job", {.wait = 0ms, .lease = 10s, .kind = simple});
    ASSERT_TRUE(l);
    EXPECT_TRUE(mutex.is_locked());
    m[2].cli({"DEL", "job"}); // still held by two of three: a quorum
    std::error_code ec;
    auto st = r.inspect("job", simple, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(st.exists);
    EXPECT_EQ(st.backend, "redlock");
    EXPECT_EQ(st.kind, "simple");
    ASSERT_EQ(st.contenders.size(), 1u);
    EXPECT_EQ(st.contenders[0].owner, m[0].cli({"GET", "job"}));
    EXPECT_TRUE(st.contenders[0].holds);
    ASSERT_TRUE(st.remaining_lease);
    EXPECT_GT(st.remaining_lease->count(), 8000);
    EXPECT_EQ(st.details["quorum"], "2");
    EXPECT_EQ(st.details["holders"], "2");
    EXPECT_NE(st.details["master.0"].find(" holds"), std::string::npos) << st.details["master.0"];
    EXPECT_NE(st.details["master.2"].find(" absent"), std::string::npos) << st.details["master.2"];
    EXPECT_TRUE(mutex.is_locked());
    const auto listed = r.list("jo*", ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].name, "job");
    m[1].cli({"DEL", "job"}); // one of three: not held any more
    st = r.inspect("job", simple, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_FALSE(st.exists);
    EXPECT_FALSE(mutex.is_locked());
    EXPECT_TRUE(r.list("jo*", ec).empty());
    EXPECT_TRUE(r.force_unlock("job", simple, ec)) << ec.message(); // master 0 still had it
    EXPECT_TRUE(gone_everywhere(m, "job"));
    EXPECT_FALSE(r.force_unlock("job", simple, ec));
    EXPECT_FALSE(ec) << ec.message();
    // Two of three masters down: nobody can say whether a quorum holds it.
    m[1].stop();
    m[2].stop();
    (void)mutex.is_locked(ec);
    EXPECT_EQ(ec, errc::unavailable) << ec.message();
    (void)r.inspect("job", simple, ec);
    EXPECT_EQ(ec, errc::unavailable) << ec.message();
    (void)r.force_unlock("job", simple, ec);
    EXPECT_TRUE(ec);
}
