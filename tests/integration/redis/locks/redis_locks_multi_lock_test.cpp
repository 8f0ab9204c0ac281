// The multi-lock (client::acquire_all, dlock::multi_lease) against real redis-server
// processes: all or none, one deadline for the set, name order (no deadlock between processes),
// mixed kinds, loss of one member, release, the async forms, fixed leases, and the behaviours
// Redisson's RedissonMultiLockTest asserts.
//
// The tests that block or check a member run once per kind of the table below; a kind added
// to the library (fair, read, write) is one more line there.
#include "lock_test_util.hpp"

#include <asio/use_future.hpp>

#include <algorithm>
#include <atomic>
#include <future>
#include <optional>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::lock_kind;
using dlock::lock_ref;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_server;
using dlock::test::watchdog_options;
using clock_type = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

namespace {

/// The kinds every table-driven test runs with (one line per kind).
const lock_kind member_kinds[] = {
    lock_kind::reentrant, lock_kind::simple, lock_kind::fair,
    lock_kind::write, // (the read side is shared: another client's read does not block it)
};

std::string kind_label(lock_kind k) {
    switch (k) {
    case lock_kind::reentrant:
        return "reentrant";
    case lock_kind::simple:
        return "simple";
    case lock_kind::fair:
        return "fair";
    case lock_kind::read:
        return "read";
    case lock_kind::write:
        return "write";
    case lock_kind::shedlock: // other backends' kinds: not in these Redis tables
    case lock_kind::lease:
    case lock_kind::versioned:
    case lock_kind::semaphore:
        break;
    }
    return "kind" + std::to_string(static_cast<int>(k));
}

/// A set of three members whose kinds differ: `k` first, then the other kinds of the table in
/// turn, so every test mixes kinds.
std::vector<lock_ref> mixed_set(const std::string& prefix, lock_kind k) {
    std::vector<lock_ref> set;
    const std::size_t n = std::size(member_kinds);
    const std::size_t at =
        static_cast<std::size_t>(std::find(member_kinds, member_kinds + n, k) - member_kinds);
    for (std::size_t i = 0; i < 3; ++i)
        set.push_back({prefix + std::to_string(i + 1), member_kinds[(at + i) % n]});
    return set;
}

bool exists(const redis_server& s, const std::string& key) {
    return s.cli({"EXISTS", key}) == "1";
}

class multi_lock_kinds : public testing::TestWithParam<lock_kind> {};

} // namespace

INSTANTIATE_TEST_SUITE_P(kinds, multi_lock_kinds, testing::ValuesIn(member_kinds),
                         [](const testing::TestParamInfo<lock_kind>& i) {
                             return kind_label(i.param);
                         });

TEST_P(multi_lock_kinds, every_member_is_held_on_the_server_and_release_frees_them_all) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const auto set = mixed_set("all-", GetParam());
    auto m = c.acquire_all(set, {.wait = 1s});
    ASSERT_TRUE(m);
    ASSERT_EQ(m.members().size(), 3u);
    for (const auto& r : set)
        EXPECT_TRUE(exists(s, r.name)) << r.name;
    EXPECT_GT(m.valid_until(), clock_type::now());
    EXPECT_FALSE(m.lost());
    m.release();
    EXPECT_FALSE(m);
    for (const auto& r : set)
        EXPECT_FALSE(exists(s, r.name)) << r.name;
}

TEST_P(multi_lock_kinds, is_all_or_none_when_one_member_is_held_by_another_client) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    auto set = mixed_set("aon-", GetParam());
    // The middle member (in name order) is held elsewhere: the first is taken, then given back.
    auto other = b.acquire(set[1].name, {.kind = set[1].kind});
    ASSERT_TRUE(other);
    const auto t0 = clock_type::now();
    auto m = a.acquire_all(set, {.wait = 300ms});
    const auto elapsed = clock_type::now() - t0;
    EXPECT_FALSE(m);
    EXPECT_GE(elapsed, 300ms);
    EXPECT_LT(elapsed, 1300ms);
    // None of the other members is held once the empty result is returned.
    EXPECT_FALSE(exists(s, set[0].name));
    EXPECT_FALSE(exists(s, set[2].name));
    EXPECT_TRUE(exists(s, set[1].name));
    EXPECT_FALSE(other.lost());
}

TEST_P(multi_lock_kinds, a_zero_wait_tries_once_and_gives_back_what_it_took) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    auto set = mixed_set("zero-", GetParam());
    auto other = b.acquire(set[2].name, {.kind = set[2].kind});
    ASSERT_TRUE(other);
    const auto t0 = clock_type::now();
    EXPECT_FALSE(a.acquire_all(set, {.wait = 0ms}));
    EXPECT_LT(clock_type::now() - t0, 500ms);
    EXPECT_FALSE(exists(s, set[0].name));
    EXPECT_FALSE(exists(s, set[1].name));
}

TEST_P(multi_lock_kinds, the_set_waits_once_and_not_once_per_member) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    auto set = mixed_set("once-", GetParam());
    // The first member frees itself after 300 ms (its lease ends), the last never: a set that
    // gave each member the whole wait would return after about 300 + 600 ms.
    auto first = b.acquire(set[0].name, {.lease = 300ms, .kind = set[0].kind});
    auto last = b.acquire(set[2].name, {.kind = set[2].kind});
    ASSERT_TRUE(first);
    ASSERT_TRUE(last);
    const auto t0 = clock_type::now();
    auto m = a.acquire_all(set, {.wait = 600ms});
    const auto elapsed = clock_type::now() - t0;
    EXPECT_FALSE(m);
    EXPECT_GE(elapsed, 600ms);
    EXPECT_LT(elapsed, 850ms);
    EXPECT_FALSE(exists(s, set[0].name)); // taken after 300 ms, then given back
    EXPECT_FALSE(exists(s, set[1].name));
}

TEST_P(multi_lock_kinds, a_member_lost_signals_the_multi_lock_lost_once) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(watchdog_options(s.url())); // renewed every 100 ms
    const auto set = mixed_set("loss-", GetParam());
    auto m = c.acquire_all(set, {.wait = 1s});
    ASSERT_TRUE(m);
    std::atomic<int> calls{0};
    m.on_lost([&] { ++calls; });
    const auto token = m.stop_token();
    s.cli({"DEL", set[1].name});
    // The stop is requested before the callbacks run (on the I/O thread): wait for both.
    EXPECT_TRUE(eventually([&] { return token.stop_requested() && calls.load() == 1; }, 2s));
    EXPECT_TRUE(m.lost());
    EXPECT_LT(m.valid_until(), clock_type::now());
    // A second member lost does not run the callback again.
    s.cli({"DEL", set[0].name});
    EXPECT_TRUE(eventually([&] { return m.members()[0].lost(); }, 2s));
    EXPECT_EQ(calls.load(), 1);
    int late = 0;
    m.on_lost([&] { ++late; }); // lost already: runs at once
    EXPECT_EQ(late, 1);
    std::error_code ec;
    m.release(ec);
    EXPECT_EQ(ec, errc::not_owner);
    // The member still held was released all the same.
    EXPECT_FALSE(exists(s, set[2].name));
    EXPECT_EQ(calls.load(), 1);
}

TEST_P(multi_lock_kinds, async_acquire_all_completes_a_callback_and_a_future) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    auto set = mixed_set("async-", GetParam());

    std::promise<bool> p;
    a.async_acquire_all(set, {.wait = 1s}, [&](std::error_code ec, dlock::multi_lease m) {
        p.set_value(!ec && m && m.members().size() == 3 && exists(s, set[0].name));
    });
    auto f = p.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(f.get());
    // The handle died at the end of the callback: every member is released.
    for (const auto& r : set)
        EXPECT_TRUE(eventually([&] { return !exists(s, r.name); }, 2s)) << r.name;

    auto fut = a.async_acquire_all(set, {.wait = 1s}, asio::use_future);
    ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
    auto m = fut.get();
    ASSERT_TRUE(m);
    auto rel = m.async_release(asio::use_future);
    ASSERT_EQ(rel.wait_for(5s), std::future_status::ready);
    rel.get();
    EXPECT_FALSE(m);
    for (const auto& r : set)
        EXPECT_FALSE(exists(s, r.name)) << r.name;

    // Not acquired: the async form also gives back the members it took before completing.
    auto other = b.acquire(set[2].name, {.kind = set[2].kind});
    ASSERT_TRUE(other);
    auto none = a.async_acquire_all(set, {.wait = 200ms}, asio::use_future);
    ASSERT_EQ(none.wait_for(5s), std::future_status::ready);
    EXPECT_FALSE(none.get());
    EXPECT_FALSE(exists(s, set[0].name));
    EXPECT_FALSE(exists(s, set[1].name));
}

namespace {

/// A fixed lease of 400 ms on a set whose last member is free only after 800 ms: the first
/// member, once taken, stays on the server until the set is complete (without a lease that
/// outlives the wait, or without the refreshes when the wait has no bound, it would expire after
/// 400 ms and be taken again later), and at completion every member's lease is 400 ms again.
/// The sync form runs on a thread, the async form completes a future; the server is watched
/// until the call returns.
void check_fixed_lease_set(const redis_server& s, lock_kind k, std::optional<ms> wait, bool async,
                           const std::string& prefix) {
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    auto set = mixed_set(prefix, k);
    auto other = b.acquire(set[2].name, {.lease = 800ms, .kind = set[2].kind});
    ASSERT_TRUE(other);
    const dlock::acquire_options opts{.wait = wait, .lease = 400ms};
    dlock::multi_lease m;
    std::atomic<bool> returned{false};
    std::future<dlock::multi_lease> fut;
    std::thread t;
    if (async)
        fut = a.async_acquire_all(set, opts, asio::use_future);
    else
        t = std::thread([&] {
            m = a.acquire_all(set, opts);
            returned = true;
        });
    auto done = [&] {
        return async ? fut.wait_for(0s) == std::future_status::ready : returned.load();
    };
    bool seen = false, gap = false;
    auto before_return = clock_type::now(); // last seen not done: the call returned after it
    while (!done()) {
        before_return = clock_type::now();
        if (exists(s, set[0].name))
            seen = true;
        else if (seen && !done())
            gap = true;
    }
    if (async)
        m = fut.get();
    else
        t.join();
    ASSERT_TRUE(m);
    EXPECT_TRUE(seen);
    EXPECT_FALSE(gap);
    for (const auto& r : set) {
        // Through a client, not redis-cli: three process starts would use up the lease under
        // a sanitizer.
        const auto pttl = dlock::redis::command(b, {"PTTL", r.name}).integer;
        EXPECT_GT(pttl, 200) << r.name;
        // A read-write lock's renewal never shortens N (other holds may share it), so a write
        // member keeps the longer lease it was taken with; the others are cut back to L.
        if (r.kind != lock_kind::write) {
            EXPECT_LE(pttl, 400) << r.name;
        }
    }
    EXPECT_FALSE(m.lost());
    EXPECT_GT(m.valid_until(), before_return + 150ms);
    // The fixed lease ends unreleased: the multi-lock is lost.
    EXPECT_TRUE(eventually([&] { return m.stop_token().stop_requested(); }, 2s));
}

} // namespace

TEST_P(multi_lock_kinds, a_fixed_lease_keeps_early_members_while_a_later_one_is_awaited) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    check_fixed_lease_set(s, GetParam(), 3s, false, "fixed-");
    check_fixed_lease_set(s, GetParam(), std::nullopt, false, "fixed-forever-");
}

TEST_P(multi_lock_kinds, the_async_form_keeps_early_members_of_a_fixed_lease_as_well) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    check_fixed_lease_set(s, GetParam(), 3s, true, "afixed-");
    check_fixed_lease_set(s, GetParam(), std::nullopt, true, "afixed-forever-");
}

TEST_P(multi_lock_kinds, a_lease_extends_asynchronously_and_reports_a_lost_lock) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const std::string name = "aext-" + kind_label(GetParam());
    auto l = c.acquire(name, {.lease = 1s, .kind = GetParam()});
    ASSERT_TRUE(l);
    auto f = l.async_extend(20s, asio::use_future);
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    f.get();
    EXPECT_GT(std::stoll(s.cli({"PTTL", name})), 10000);
    EXPECT_GT(l.valid_until(), clock_type::now() + 10s);
    s.cli({"DEL", name});
    std::promise<std::error_code> p;
    l.async_extend(20s, [&](std::error_code ec) { p.set_value(ec); });
    EXPECT_EQ(p.get_future().get(), errc::not_owner);
    EXPECT_TRUE(l.lost());
    EXPECT_FALSE(exists(s, name));
}

TEST_P(multi_lock_kinds, extend_moves_every_member_to_the_new_lease) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const auto set = mixed_set("extend-", GetParam());
    auto m = c.acquire_all(set, {.wait = 1s, .lease = 1s});
    ASSERT_TRUE(m);
    m.extend(20s);
    for (const auto& r : set)
        EXPECT_GT(std::stoll(s.cli({"PTTL", r.name})), 10000) << r.name;
    EXPECT_GT(m.valid_until(), clock_type::now() + 10s);
}

TEST(multi_lock, members_are_taken_in_name_order_whatever_order_is_given) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const lock_ref set[] = {{"order-c"}, {"order-a", lock_kind::simple}, {"order-b"}};
    auto m = c.acquire_all(set);
    ASSERT_TRUE(m);
    ASSERT_EQ(m.members().size(), 3u);
    EXPECT_EQ(m.members()[0].name(), "order-a");
    EXPECT_EQ(m.members()[1].name(), "order-b");
    EXPECT_EQ(m.members()[2].name(), "order-c");
    EXPECT_FALSE(m.members()[0].token().has_value()); // the simple member has no fencing token
    EXPECT_TRUE(m.members()[1].token().has_value());
}

TEST(multi_lock, an_empty_set_or_a_name_given_twice_is_invalid_and_takes_nothing) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    std::error_code ec;
    EXPECT_FALSE(c.acquire_all(std::span<const lock_ref>{}, {}, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    const lock_ref twice[] = {{"dup-a"}, {"dup-b"}, {"dup-a", lock_kind::simple}};
    EXPECT_FALSE(c.acquire_all(twice, {}, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_FALSE(exists(s, "dup-a"));
    EXPECT_FALSE(exists(s, "dup-b"));
    EXPECT_THROW(c.acquire_all({{"x"}, {""}}), dlock::error);
    EXPECT_FALSE(exists(s, "x"));
    std::promise<std::error_code> p;
    c.async_acquire_all({{"dup-a"}, {"dup-a"}}, {},
                        [&](std::error_code e, dlock::multi_lease) { p.set_value(e); });
    EXPECT_EQ(p.get_future().get(), errc::invalid_argument);
}

TEST(multi_lock, two_processes_locking_overlapping_sets_in_opposite_orders_never_deadlock) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    // Shared with the children: [0] inside the critical section, [1] overlaps seen.
    // (A local check; the lead unifies it with the shared critical-section checker.)
    auto* shared = static_cast<std::atomic<int>*>(::mmap(nullptr, 2 * sizeof(std::atomic<int>),
                                                         PROT_READ | PROT_WRITE,
                                                         MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(shared, MAP_FAILED);
    new (&shared[0]) std::atomic<int>(0);
    new (&shared[1]) std::atomic<int>(0);
    constexpr int rounds = 40;
    std::vector<pid_t> children;
    for (int p = 0; p < 2; ++p) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            int rc = 0;
            try {
                dlock::client c(fast_options(s.url()));
                // Opposite orders: {a, b} and {b, a}; unordered, each would take its first
                // and wait for the other's until the wait ran out.
                const std::vector<lock_ref> set =
                    p == 0 ? std::vector<lock_ref>{{"dl-a"}, {"dl-b", lock_kind::simple}}
                           : std::vector<lock_ref>{{"dl-b", lock_kind::simple}, {"dl-a"}};
                for (int i = 0; i < rounds && rc == 0; ++i) {
                    auto m = c.acquire_all(set, {.wait = 10s});
                    if (!m) {
                        rc = 2;
                        break;
                    }
                    if (shared[0].fetch_add(1) != 0) shared[1].fetch_add(1);
                    std::this_thread::yield();
                    shared[0].fetch_sub(1);
                    m.release();
                }
            } catch (...) {
                rc = 1;
            }
            ::_exit(rc);
        }
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
    EXPECT_EQ(shared[1].load(), 0);
    EXPECT_FALSE(exists(s, "dl-a"));
    EXPECT_FALSE(exists(s, "dl-b"));
    ::munmap(shared, 2 * sizeof(std::atomic<int>));
}

// ---- RedissonMultiLockTest (redisson.md §8.4) ---------------------------------------------

TEST(multi_lock, a_multi_lock_is_held_after_acquisition_and_free_after_release) {
    // testLockUnlock
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto m = c.acquire_all({{"lu-1"}, {"lu-2"}, {"lu-3"}}, {.lease = 10s});
    ASSERT_TRUE(m);
    for (const auto& l : m.members())
        EXPECT_TRUE(l && !l.lost());
    EXPECT_TRUE(exists(s, "lu-1") && exists(s, "lu-2") && exists(s, "lu-3"));
    m.release();
    EXPECT_FALSE(exists(s, "lu-1") || exists(s, "lu-2") || exists(s, "lu-3"));
}

TEST(multi_lock, of_ten_concurrent_tries_on_the_same_three_locks_exactly_one_succeeds) {
    // testWaitAndLeaseTimeouts: tryLock(-1, 10 s) from 10 threads, exactly one wins, within 1 s.
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    std::atomic<int> won{0};
    std::vector<dlock::multi_lease> kept(10);
    std::vector<std::thread> threads;
    const auto t0 = clock_type::now();
    for (int i = 0; i < 10; ++i)
        threads.emplace_back([&, i] {
            auto m = c.acquire_all({{"wl-1"}, {"wl-2"}, {"wl-3"}}, {.wait = 0ms, .lease = 10s});
            if (m) ++won;
            kept[static_cast<std::size_t>(i)] = std::move(m); // held until the end
        });
    for (auto& t : threads)
        t.join();
    EXPECT_LT(clock_type::now() - t0, 1s);
    EXPECT_EQ(won.load(), 1);
}

TEST(multi_lock, a_multi_lock_held_by_another_thread_is_acquired_once_it_is_released) {
    // testMultiThreads
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto held = c.acquire_all({{"mt-1"}, {"mt-2"}, {"mt-3"}});
    ASSERT_TRUE(held);
    std::atomic<bool> got{false};
    std::thread waiter([&] {
        auto m = c.acquire_all({{"mt-3"}, {"mt-2"}, {"mt-1"}}, {.wait = 10s});
        got = static_cast<bool>(m);
    });
    // Release once the waiter sleeps on the first member's channel (no sleep as a signal).
    EXPECT_TRUE(eventually(
        [&] { return dlock::test::sleeping_waiters(c, "redisson_lock__channel:{mt-1}") == 1; },
        5s));
    held.release();
    waiter.join();
    EXPECT_TRUE(got.load());
}

TEST(multi_lock, a_held_set_refuses_a_second_try_from_another_client) {
    // test (three servers in Redisson; one server here: several servers need one client each,
    // which acquire_all does not take)
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    auto m = a.acquire_all({{"t-1"}, {"t-2"}, {"t-3"}});
    ASSERT_TRUE(m);
    const auto t0 = clock_type::now();
    EXPECT_FALSE(b.acquire_all({{"t-1"}, {"t-2"}, {"t-3"}}, {.wait = 0ms}));
    EXPECT_FALSE(b.acquire_all({{"t-3"}, {"t-1"}}, {.wait = 0ms}));
    EXPECT_LT(clock_type::now() - t0, 5s);
    EXPECT_FALSE(m.lost());
}

// ---- multi_mutex ---------------------------------------------------------------------------

TEST(multi_mutex, works_with_scoped_lock_and_unique_lock_next_to_a_plain_mutex) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::multi_mutex both(c, {{"mm-b"}, {"mm-a", lock_kind::simple}});
    EXPECT_EQ(both.locks()[0].name, "mm-a");
    dlock::mutex other = c.make_mutex("mm-other");
    {
        std::scoped_lock g(both, other);
        EXPECT_TRUE(both.is_held_by_this_thread());
        EXPECT_TRUE(exists(s, "mm-a") && exists(s, "mm-b") && exists(s, "mm-other"));
        EXPECT_GT(both.valid_until(), clock_type::now());
    }
    EXPECT_FALSE(both.is_held_by_this_thread());
    EXPECT_FALSE(exists(s, "mm-a") || exists(s, "mm-b") || exists(s, "mm-other"));
    {
        std::unique_lock u(both, std::defer_lock);
        EXPECT_TRUE(u.try_lock_for(100ms));
        EXPECT_TRUE(exists(s, "mm-a"));
    }
    EXPECT_FALSE(exists(s, "mm-a"));
    EXPECT_THROW(dlock::multi_mutex(c, {{"x"}, {"x"}}), dlock::error);
}

TEST(multi_mutex, excludes_other_threads_and_only_the_holder_may_unlock) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::multi_mutex mm(c, {{"mx-1"}, {"mx-2"}});
    mm.lock(dlock::fixed_lease{10s});
    std::error_code ec;
    EXPECT_FALSE(mm.try_lock_for(0ms, ec)); // not reentrant
    EXPECT_EQ(ec, errc::invalid_argument);
    std::thread([&] {
        EXPECT_FALSE(mm.try_lock());
        EXPECT_FALSE(mm.is_held_by_this_thread());
        std::error_code e;
        mm.unlock(e);
        EXPECT_EQ(e, errc::not_owner);
    }).join();
    EXPECT_TRUE(mm.is_held_by_this_thread());
    std::atomic<bool> got{false};
    std::thread waiter([&] {
        if (mm.try_lock_for(10s)) {
            got = true;
            mm.unlock();
        }
    });
    EXPECT_TRUE(eventually(
        [&] { return dlock::test::sleeping_waiters(c, "redisson_lock__channel:{mx-1}") == 1; },
        5s));
    mm.unlock();
    waiter.join();
    EXPECT_TRUE(got.load());
    EXPECT_FALSE(exists(s, "mx-1") || exists(s, "mx-2"));
}

TEST(multi_mutex, a_lost_member_is_signalled_and_unlock_says_not_owner) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(watchdog_options(s.url()));
    dlock::multi_mutex mm(c, {{"ml-1"}, {"ml-2", lock_kind::simple}});
    mm.lock();
    std::atomic<int> calls{0};
    mm.on_lost([&] { ++calls; });
    const auto token = mm.stop_token();
    s.cli({"DEL", "ml-2"});
    // The stop is requested before the callbacks run (on the I/O thread): wait for both.
    EXPECT_TRUE(eventually([&] { return token.stop_requested() && calls.load() == 1; }, 2s));
    EXPECT_EQ(calls.load(), 1);
    EXPECT_FALSE(mm.is_held_by_this_thread());
    std::error_code ec;
    mm.unlock(ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_FALSE(exists(s, "ml-1"));
}
