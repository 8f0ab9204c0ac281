// dlock::rw_mutex (the read and write kinds) against a real redis-server: readers share, writers
// exclude readers and each other (threads, clients, processes), re-entry and reads under a
// write, no upgrade, crashed and fixed-lease readers expire, writers are not starved by
// readers, the watchdog renews read holds, lease handles of both sides, and ports of
// Redisson's RedissonReadWriteLockTest (redisson.md §8.3) that apply.
#include "critical_section_checker.hpp"
#include "lock_test_util.hpp"
#include "redis/renewal.hpp"

#include <dlock/redis.hpp>
#include <dlock/rw_mutex.hpp>

#include <atomic>
#include <csignal>
#include <mutex>
#include <poll.h>
#include <shared_mutex>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::critical_section_checker;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_server;
using dlock::test::watchdog_options;
using clock_type = std::chrono::steady_clock;

namespace {

/// Arrives at a bounded barrier of `n`: true when all `n` arrived within `budget`.
bool all_arrive(std::atomic<int>& arrived, int n, std::chrono::milliseconds budget) {
    arrived.fetch_add(1);
    return eventually([&] { return arrived.load() >= n; }, budget);
}

std::string mode_of(const redis_server& s, const std::string& name) {
    return s.cli({"HGET", name, "mode"});
}

/// How many keys match `pattern` (KEYS: fine for a test server).
std::size_t keys_matching(const redis_server& s, const std::string& pattern) {
    const auto out = s.cli({"KEYS", pattern});
    if (out.empty()) return 0;
    return static_cast<std::size_t>(std::count(out.begin(), out.end(), '\n')) + 1;
}

/// The first key matching `pattern`.
std::string keys_of_first(const redis_server& s, const std::string& pattern) {
    const auto out = s.cli({"KEYS", pattern});
    return out.substr(0, out.find('\n'));
}

} // namespace

TEST(critical_section_checker, counts_a_second_writer_a_reader_under_a_writer_and_extra_readers) {
    critical_section_checker check(2);
    {
        auto w = check.enter_write();
        auto w2 = check.enter_write(); // two writers
        auto r = check.enter_read();   // a reader under writers
    }
    EXPECT_EQ(check.two_writers(), 1);
    EXPECT_EQ(check.writer_and_reader(), 1);
    {
        auto r1 = check.enter_read();
        auto r2 = check.enter_read();
        auto r3 = check.enter_read(); // over the bound of 2
        EXPECT_EQ(check.readers_inside(), 3);
    }
    EXPECT_EQ(check.too_many_readers(), 1);
    EXPECT_EQ(check.violations(), 3);
    EXPECT_EQ(check.max_readers_seen(), 3);
    EXPECT_EQ(check.readers_inside() + check.writers_inside(), 0);
    critical_section_checker clean;
    { auto w = clean.enter_write(); }
    {
        auto r1 = clean.enter_read();
        auto r2 = clean.enter_read();
    }
    EXPECT_EQ(clean.violations(), 0);
}

TEST(rwlock, readers_of_several_threads_and_clients_hold_the_lock_together) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url())), b(fast_options(s.url()));
    critical_section_checker check;
    constexpr int n = 4;
    std::atomic<int> arrived{0}, met{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t)
        threads.emplace_back([&, t] {
            dlock::rw_mutex m = (t % 2 ? a : b).make_rw_mutex("shared");
            std::shared_lock g(m);
            auto in = check.enter_read();
            if (all_arrive(arrived, n, 10s)) met.fetch_add(1); // all inside at once
        });
    for (auto& th : threads)
        th.join();
    EXPECT_EQ(met.load(), n);
    EXPECT_EQ(check.max_readers_seen(), n);
    EXPECT_EQ(check.violations(), 0);
    EXPECT_EQ(s.cli({"EXISTS", "shared"}), "0");
}

TEST(rwlock, writers_exclude_readers_and_each_other_across_threads_and_clients) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    std::vector<std::unique_ptr<dlock::client>> clients;
    for (int i = 0; i < 3; ++i)
        clients.push_back(std::make_unique<dlock::client>(fast_options(s.url())));
    critical_section_checker check;
    s.cli({"SET", "counter", "0"});
    std::atomic<int> writes{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t)
        threads.emplace_back([&, t] {
            auto& c = *clients[static_cast<std::size_t>(t % 3)];
            dlock::rw_mutex m = c.make_rw_mutex("mixed");
            for (int i = 0; i < 30; ++i) {
                if ((i + t) % 3 == 0) {
                    std::unique_lock g(m);
                    auto in = check.enter_write();
                    // A read-modify-write that two writers at once would lose an update of.
                    const auto v = std::stoll(dlock::redis::command(c, {"GET", "counter"}).str);
                    dlock::redis::command(c, {"SET", "counter", std::to_string(v + 1)});
                    writes.fetch_add(1);
                } else {
                    std::shared_lock g(m);
                    auto in = check.enter_read();
                    (void)dlock::redis::command(c, {"GET", "counter"});
                }
            }
        });
    for (auto& th : threads)
        th.join();
    EXPECT_EQ(check.violations(), 0);
    EXPECT_EQ(check.max_writers_seen(), 1);
    EXPECT_EQ(s.cli({"GET", "counter"}), std::to_string(writes.load()));
    EXPECT_EQ(s.cli({"EXISTS", "mixed"}), "0");
}

TEST(rwlock, writers_exclude_readers_across_processes) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    // The checker in memory shared by the processes (it uses lock-free atomics only).
    void* mem = ::mmap(nullptr, sizeof(critical_section_checker), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    auto* check = new (mem) critical_section_checker();
    s.cli({"SET", "counter", "0"});
    std::vector<pid_t> children;
    for (int p = 0; p < 3; ++p) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            int rc = 0;
            try {
                dlock::client c(fast_options(s.url()));
                dlock::rw_mutex m = c.make_rw_mutex("proc-rw");
                for (int i = 0; i < 20; ++i) {
                    if ((i + p) % 4 == 0) {
                        std::unique_lock g(m);
                        auto in = check->enter_write();
                        const auto v = std::stoll(dlock::redis::command(c, {"GET", "counter"}).str);
                        dlock::redis::command(c, {"SET", "counter", std::to_string(v + 1)});
                    } else {
                        std::shared_lock g(m);
                        auto in = check->enter_read();
                        (void)dlock::redis::command(c, {"GET", "counter"});
                    }
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
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    EXPECT_EQ(check->violations(), 0);
    EXPECT_EQ(check->writes(), 15);
    EXPECT_EQ(check->reads(), 45);
    EXPECT_EQ(s.cli({"GET", "counter"}), "15");
    check->~critical_section_checker();
    ::munmap(mem, sizeof(critical_section_checker));
}

TEST(rwlock, a_writer_reenters_and_reads_under_its_write_and_its_last_write_unlock_leaves_read) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url())), other(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("wr");
    dlock::rw_mutex o = other.make_rw_mutex("wr");
    m.lock();
    const auto token = m.fencing_token();
    ASSERT_TRUE(token);
    m.lock(); // re-entry: same token
    EXPECT_EQ(m.fencing_token(), token);
    EXPECT_EQ(m.writer().hold_count(), 2);
    m.lock_shared(); // read under write: mode stays write
    EXPECT_EQ(mode_of(s, "wr"), "write");
    EXPECT_EQ(m.reader().hold_count(), 1);
    EXPECT_FALSE(m.reader().fencing_token()); // readers have no token
    EXPECT_TRUE(m.writer().is_locked());
    EXPECT_TRUE(m.reader().is_locked()); // a read under the write counts (Redisson)
    std::thread([&] {
        EXPECT_FALSE(o.try_lock_shared());
        EXPECT_FALSE(o.try_lock());
    }).join();
    m.unlock();
    EXPECT_EQ(mode_of(s, "wr"), "write");
    m.unlock(); // the last write hold: mode becomes read, our read stays
    EXPECT_EQ(mode_of(s, "wr"), "read");
    EXPECT_FALSE(m.writer().is_locked());
    EXPECT_FALSE(m.fencing_token());
    std::thread([&] {
        EXPECT_FALSE(o.try_lock());       // we still read
        EXPECT_TRUE(o.try_lock_shared()); // others may read now
        o.unlock_shared();
    }).join();
    m.unlock_shared();
    EXPECT_EQ(s.cli({"EXISTS", "wr"}), "0");
    EXPECT_TRUE(m.try_lock());
    EXPECT_GT(*m.fencing_token(), *token); // a fresh write acquisition: a larger token
    m.unlock();
}

TEST(rwlock, a_reader_asking_for_the_write_lock_is_refused_at_once_instead_of_deadlocking) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("upgrade");
    m.lock_shared();
    std::error_code ec;
    const auto t0 = clock_type::now();
    m.lock(ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_FALSE(m.try_lock_for(5000ms, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_THROW(m.lock(), dlock::error);
    EXPECT_LT(clock_type::now() - t0, 2s); // no waiting for ourselves
    EXPECT_EQ(m.reader().hold_count(), 1); // still a reader
    EXPECT_EQ(m.writer().hold_count(), 0);
    m.unlock_shared();
    EXPECT_TRUE(m.try_lock()); // no read left: the write lock is ours
    m.unlock();
}

TEST(rwlock, a_crashed_readers_lease_expires_and_a_writer_then_gets_the_lock) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t pid = ::fork(); // before any client of ours: the child has no threads to copy
    if (pid == 0) {
        ::close(ready[0]);
        try {
            dlock::client c(watchdog_options(s.url())); // 300 ms watchdog lease
            dlock::rw_mutex m = c.make_rw_mutex("crash");
            m.lock_shared();
            const char one = '1';
            (void)!::write(ready[1], &one, 1);
            for (;;)
                ::pause(); // renewing until SIGKILL
        } catch (...) {
        }
        ::_exit(1);
    }
    ::close(ready[1]);
    pollfd p{ready[0], POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1);
    char got = 0;
    ASSERT_EQ(::read(ready[0], &got, 1), 1);
    ::close(ready[0]);
    dlock::client c(watchdog_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("crash");
    m.lock_shared();
    m.unlock_shared(); // readers share even now
    EXPECT_FALSE(m.try_lock());
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const auto t0 = clock_type::now();
    EXPECT_TRUE(m.try_lock_for(5s));
    EXPECT_LT(clock_type::now() - t0, 2s); // the 300 ms lease, not a watchdog of ours
    m.unlock();
}

TEST(rwlock, a_fixed_lease_reader_that_never_unlocks_lets_a_writer_in_after_its_lease) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url())), b(fast_options(s.url()));
    dlock::rw_mutex r = a.make_rw_mutex("fixed");
    dlock::rw_mutex w = b.make_rw_mutex("fixed");
    const auto t0 = clock_type::now();
    r.lock_shared(dlock::fixed_lease{400ms});
    EXPECT_FALSE(w.try_lock());
    EXPECT_TRUE(w.try_lock_for(5s));
    const auto waited = clock_type::now() - t0;
    EXPECT_GE(waited, 300ms);
    EXPECT_LT(waited, 2s);
    EXPECT_TRUE(eventually([&] { return r.reader().stop_token().stop_requested(); }, 2s));
    std::error_code ec;
    r.unlock_shared(ec);
    EXPECT_EQ(ec, errc::not_owner);
    w.unlock();
}

TEST(rwlock, a_writer_is_not_starved_by_continuous_overlapping_readers) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url())), b(fast_options(s.url())), wc(fast_options(s.url()));
    critical_section_checker check;
    std::atomic<bool> stop{false};
    std::atomic<int> read_errors{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t)
        readers.emplace_back([&, t] {
            dlock::rw_mutex m = (t % 2 ? a : b).make_rw_mutex("starve");
            while (!stop.load()) {
                std::error_code ec;
                if (!m.try_lock_shared_for(10000ms, ec)) {
                    read_errors.fetch_add(1);
                    continue;
                }
                {
                    auto in = check.enter_read();
                    std::this_thread::sleep_for(20ms); // the work of a reader
                    // Leave only while another reader is inside (bounded), so that the read
                    // mode never ends by itself: without the writer's priority it would wait
                    // for ever.
                    eventually([&] { return check.readers_inside() >= 2; }, 200ms);
                }
                m.unlock_shared();
            }
        });
    // The read mode never ends by itself: readers overlap continuously.
    ASSERT_TRUE(
        eventually([&] { return check.max_readers_seen() >= 2 && check.reads() >= 20; }, 10s));
    dlock::rw_mutex w = wc.make_rw_mutex("starve");
    const auto t0 = clock_type::now();
    const bool got = w.try_lock_for(5s);
    const auto waited = clock_type::now() - t0;
    if (got) {
        auto in = check.enter_write();
        in.leave();
        w.unlock();
    }
    stop = true;
    for (auto& th : readers)
        th.join();
    EXPECT_TRUE(got);
    EXPECT_LT(waited, 3s); // the readers inside drain (20 ms each); new ones wait behind it
    EXPECT_EQ(check.violations(), 0);
    EXPECT_EQ(read_errors.load(), 0);
    EXPECT_GT(check.reads(), 20); // readers went on after the writer
}

TEST(rwlock, a_writer_that_gives_up_withdraws_its_priority_and_wakes_the_readers_it_held_back) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url())), b(fast_options(s.url())), wc(fast_options(s.url()));
    dlock::rw_mutex holder = a.make_rw_mutex("give-up");
    holder.lock_shared();
    std::atomic<bool> writer_done{false};
    clock_type::time_point gave_up{};
    std::thread writer([&] {
        dlock::rw_mutex w = wc.make_rw_mutex("give-up");
        EXPECT_FALSE(w.try_lock_for(600ms)); // the reader never leaves
        gave_up = clock_type::now();
        writer_done = true;
    });
    ASSERT_TRUE(eventually(
        [&] {
            return s.cli({"EXISTS", "dlock_rwlock_writer:{give-up}"}) == "1";
        },
        10s));
    // A new reader waits behind the writer while it waits...
    clock_type::time_point read_at{};
    std::thread reader([&] {
        dlock::rw_mutex r = b.make_rw_mutex("give-up");
        EXPECT_TRUE(r.try_lock_shared_for(10000ms));
        read_at = clock_type::now();
        r.unlock_shared();
    });
    writer.join();
    reader.join();
    ASSERT_TRUE(writer_done.load());
    // ...and gets in when it gives up: woken by the withdrawal, not after the marker's 2 s.
    EXPECT_GE(read_at, gave_up - 50ms);
    EXPECT_LT(read_at - gave_up, 800ms);
    EXPECT_EQ(s.cli({"EXISTS", "dlock_rwlock_writer:{give-up}"}), "0");
    holder.unlock_shared();
}

TEST(rwlock, the_watchdog_renews_read_holds_and_a_write_hold_past_their_lease) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(watchdog_options(s.url())), other(fast_options(s.url()));
    auto& impl = *dlock::detail::access::impl(c);
    dlock::rw_mutex m = c.make_rw_mutex("renewed");
    dlock::rw_mutex o = other.make_rw_mutex("renewed");
    m.lock_shared();
    m.lock_shared(); // two read holds: two timeout keys
    EXPECT_EQ(keys_matching(s, "{renewed}:*:rwlock_timeout:*"), 2u);
    // Four renewal batches (every 100 ms): well past the 300 ms lease.
    auto batches = impl.renewal().batches_sent();
    ASSERT_TRUE(eventually([&] { return impl.renewal().batches_sent() >= batches + 4; }, 5s));
    EXPECT_EQ(keys_matching(s, "{renewed}:*:rwlock_timeout:*"), 2u);
    EXPECT_FALSE(m.reader().stop_token().stop_requested());
    EXPECT_GT(m.reader().valid_until(), clock_type::now());
    EXPECT_FALSE(o.try_lock());
    m.unlock_shared();
    m.unlock_shared();
    EXPECT_EQ(s.cli({"EXISTS", "renewed"}), "0");
    // A write hold with a read under it (Redisson's testReadWriteTTL): both renewed.
    m.lock();
    m.lock_shared();
    batches = impl.renewal().batches_sent();
    ASSERT_TRUE(eventually([&] { return impl.renewal().batches_sent() >= batches + 4; }, 5s));
    EXPECT_FALSE(m.writer().stop_token().stop_requested());
    EXPECT_FALSE(m.reader().stop_token().stop_requested());
    EXPECT_EQ(keys_matching(s, "{renewed}:*:rwlock_timeout:*"), 1u);
    EXPECT_FALSE(o.try_lock_shared());
    m.unlock();
    // The read left after the write unlock is still renewed.
    batches = impl.renewal().batches_sent();
    ASSERT_TRUE(eventually([&] { return impl.renewal().batches_sent() >= batches + 4; }, 5s));
    EXPECT_EQ(mode_of(s, "renewed"), "read");
    EXPECT_FALSE(m.reader().stop_token().stop_requested());
    m.unlock_shared();
}

TEST(rwlock, a_read_hold_is_lost_only_when_every_timeout_key_of_its_owner_is_gone) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(watchdog_options(s.url()));
    auto& impl = *dlock::detail::access::impl(c);
    dlock::rw_mutex m = c.make_rw_mutex("timeouts");
    m.lock_shared();
    m.lock_shared(); // timeout keys 1 and 2
    // One of them gone (as a fixed-lease re-entry's key expires): the hold lives on key 1.
    s.cli({"DEL", keys_of_first(s, "{timeouts}:*:rwlock_timeout:2")});
    ASSERT_EQ(keys_matching(s, "{timeouts}:*:rwlock_timeout:*"), 1u);
    auto batches = impl.renewal().batches_sent();
    ASSERT_TRUE(eventually([&] { return impl.renewal().batches_sent() >= batches + 3; }, 5s));
    EXPECT_FALSE(m.reader().stop_token().stop_requested()); // key 1 lives: still held
    m.unlock_shared();
    // Every timeout key gone (as after a renewal too late): the next renewal reports the loss.
    s.cli({"DEL", keys_of_first(s, "{timeouts}:*:rwlock_timeout:1")});
    EXPECT_TRUE(eventually([&] { return m.reader().stop_token().stop_requested(); }, 5s));
    std::error_code ec;
    m.unlock_shared(ec);
    EXPECT_EQ(ec, errc::not_owner);
}

TEST(rwlock, lease_handles_and_async_acquisitions_work_for_both_sides) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    auto r1 = c.acquire("handles", {.wait = 0ms, .kind = dlock::lock_kind::read});
    auto r2 = c.acquire("handles", {.wait = 0ms, .kind = dlock::lock_kind::read});
    ASSERT_TRUE(r1);
    ASSERT_TRUE(r2); // two handles, two owners, both readers
    EXPECT_FALSE(r1.token());
    EXPECT_FALSE(c.acquire("handles", {.wait = 0ms, .kind = dlock::lock_kind::write}));
    std::promise<std::pair<std::error_code, dlock::lease>> p;
    c.async_acquire("handles", {.wait = 5000ms, .lease = 1000ms, .kind = dlock::lock_kind::write},
                    [&](std::error_code ec, dlock::lease l) {
                        p.set_value({ec, std::move(l)});
                    });
    r1.release();
    r2.release(); // the last read unlock wakes the waiting writer
    auto f = p.get_future();
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    auto [ec, w] = f.get();
    EXPECT_FALSE(ec);
    ASSERT_TRUE(w);
    EXPECT_TRUE(w.token());
    EXPECT_EQ(mode_of(s, "handles"), "write");
    EXPECT_LE(std::stoll(s.cli({"PTTL", "handles"})), 1000);
    w.extend(5000ms);
    EXPECT_GT(std::stoll(s.cli({"PTTL", "handles"})), 3000);
    w.release();
    EXPECT_EQ(s.cli({"EXISTS", "handles"}), "0");
}

// ---- ports of Redisson's RedissonReadWriteLockTest ------------------------------------------

TEST(rwlock_redisson, a_write_alone_is_not_a_read_lock_but_a_read_under_it_is) {
    // testReadLockIsLocked
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("isl");
    m.lock();
    EXPECT_FALSE(m.reader().is_locked());
    EXPECT_TRUE(m.try_lock_shared_for(10s));
    EXPECT_TRUE(m.reader().is_locked());
    EXPECT_TRUE(m.is_locked());
    m.unlock_shared();
    m.unlock();
    EXPECT_FALSE(m.is_locked());
}

TEST(rwlock_redisson, a_write_reentry_with_a_shorter_lease_does_not_shorten_the_lock) {
    // testWriteLockExpiration (Redisson adds the re-entry's lease; we keep the longest).
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("reenter-lease");
    ASSERT_TRUE(m.try_lock_for(1000ms, dlock::fixed_lease{3s}));
    ASSERT_TRUE(m.try_lock_for(1000ms, dlock::fixed_lease{100ms}));
    EXPECT_GT(std::stoll(s.cli({"PTTL", "reenter-lease"})), 2000);
    std::thread([&] {
        dlock::rw_mutex o = c.make_rw_mutex("reenter-lease");
        EXPECT_FALSE(o.try_lock_for(500ms));
    }).join();
    // Past the re-entry's 100 ms our hold is still valid (not a false loss).
    EXPECT_FALSE(m.writer().stop_token().stop_requested());
    EXPECT_GT(m.writer().valid_until(), clock_type::now() + 1s);
    m.unlock();
    m.unlock();
    // The same for read holds.
    ASSERT_TRUE(m.try_lock_shared_for(1000ms, dlock::fixed_lease{3s}));
    ASSERT_TRUE(m.try_lock_shared_for(1000ms, dlock::fixed_lease{100ms}));
    EXPECT_GT(m.reader().valid_until(), clock_type::now() + 2s);
    m.unlock_shared();
    m.unlock_shared();
}

TEST(rwlock_redisson, a_write_unlock_wakes_every_waiting_reader) {
    // testWriteRead: readers blocked behind a writer all get in after one write unlock.
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url())), w(fast_options(s.url()));
    dlock::rw_mutex writer = w.make_rw_mutex("wake-all");
    writer.lock(dlock::fixed_lease{30s}); // its expiry would take 30 s
    constexpr int n = 8;
    std::atomic<int> arrived{0}, met{0}, blocked{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < n; ++t)
        readers.emplace_back([&] {
            dlock::rw_mutex m = c.make_rw_mutex("wake-all");
            blocked.fetch_add(1);
            if (!m.try_lock_shared_for(10000ms)) return;
            if (all_arrive(arrived, n, 5s)) met.fetch_add(1);
            m.unlock_shared();
        });
    ASSERT_TRUE(eventually(
        [&] { return dlock::test::sleeping_waiters(c, "redisson_rwlock:{wake-all}") == n; }, 10s));
    const auto t0 = clock_type::now();
    writer.unlock();
    for (auto& th : readers)
        th.join();
    EXPECT_EQ(met.load(), n);
    EXPECT_LT(clock_type::now() - t0, 6s);
}

TEST(rwlock_redisson, a_write_holder_reads_others_cannot_and_it_writes_again_only_without_reads) {
    // testWriteReadReentrancy
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("wrr");
    m.lock();
    m.lock_shared();
    std::thread([&] {
        dlock::rw_mutex o = c.make_rw_mutex("wrr");
        EXPECT_FALSE(o.try_lock_shared());
    }).join();
    m.unlock();
    std::error_code ec;
    EXPECT_FALSE(m.try_lock(ec)); // holds read only now: no upgrade
    EXPECT_EQ(ec, errc::invalid_argument);
    m.unlock_shared();
    EXPECT_TRUE(m.try_lock());
    m.unlock();
}

TEST(rwlock_redisson,
     readers_block_a_writer_until_both_release_and_force_unlock_of_nothing_is_false) {
    // testMultiRead
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("multi");
    EXPECT_FALSE(m.reader().force_unlock());
    dlock::rw_mutex other = c.make_rw_mutex("multi");
    std::atomic<int> step{0};
    std::thread t1([&] {
        dlock::rw_mutex r = c.make_rw_mutex("multi");
        r.lock_shared();
        step = 1;
        eventually([&] { return step.load() >= 2; }, 10s);
        r.unlock_shared();
        step = 3;
    });
    ASSERT_TRUE(eventually([&] { return step.load() == 1; }, 10s));
    m.lock_shared(); // a second reader
    std::thread([&] { EXPECT_FALSE(other.try_lock()); }).join();
    step = 2;
    ASSERT_TRUE(eventually([&] { return step.load() == 3; }, 10s));
    t1.join();
    std::thread([&] { EXPECT_FALSE(other.try_lock()); }).join(); // we still read
    m.unlock_shared();
    EXPECT_TRUE(m.try_lock());
    EXPECT_TRUE(m.writer().is_locked());
    EXPECT_TRUE(m.writer().is_held_by_this_thread());
    m.unlock();
}

TEST(rwlock_redisson, hold_counts_go_up_and_down_for_both_sides) {
    // testHoldCount
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("counts");
    for (dlock::basic_mutex* side : {static_cast<dlock::basic_mutex*>(&m.reader()),
                                     static_cast<dlock::basic_mutex*>(&m.writer())}) {
        EXPECT_EQ(side->hold_count(), 0);
        side->lock();
        EXPECT_EQ(side->hold_count(), 1);
        side->unlock();
        EXPECT_EQ(side->hold_count(), 0);
        side->lock();
        side->lock();
        EXPECT_EQ(side->hold_count(), 2);
        side->unlock();
        EXPECT_EQ(side->hold_count(), 1);
        side->unlock();
        EXPECT_EQ(side->hold_count(), 0);
    }
}

TEST(rwlock_redisson, an_expired_write_lets_the_next_writer_in_and_its_owner_unlock_fails) {
    // testExpireWrite (2 s scaled to 400 ms); testExpireRead: readers share at once.
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("expire");
    m.lock(dlock::fixed_lease{400ms});
    const auto t0 = clock_type::now();
    std::thread([&] {
        dlock::rw_mutex o = c.make_rw_mutex("expire");
        o.lock();
        EXPECT_LT(clock_type::now() - t0, 1500ms);
        o.unlock();
    }).join();
    std::error_code ec;
    m.unlock(ec);
    EXPECT_EQ(ec, errc::not_owner);

    m.lock_shared(dlock::fixed_lease{2s});
    std::thread([&] {
        dlock::rw_mutex o = c.make_rw_mutex("expire");
        const auto t1 = clock_type::now();
        o.lock_shared();
        EXPECT_LT(clock_type::now() - t1, 500ms); // shared: no waiting for the lease
        o.unlock_shared();
    }).join();
    m.unlock_shared();
}

TEST(rwlock_redisson, a_read_unlock_sets_the_hash_ttl_to_the_longest_remaining_read_lease) {
    // testReadLockLeaseTimeout (4 s leases scaled to 600 ms and 5 s).
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("ttl");
    m.lock_shared(dlock::fixed_lease{600ms});
    m.lock_shared(dlock::fixed_lease{5s}); // re-entry with a longer lease: N lives 5 s
    EXPECT_GT(std::stoll(s.cli({"PTTL", "ttl"})), 4000);
    m.unlock_shared(); // releases hold 2: N follows hold 1 again
    EXPECT_LE(std::stoll(s.cli({"PTTL", "ttl"})), 600);
    std::thread([&] {
        dlock::rw_mutex o = c.make_rw_mutex("ttl");
        const auto t0 = clock_type::now();
        EXPECT_TRUE(o.try_lock_for(3s));
        EXPECT_LT(clock_type::now() - t0, 1500ms);
        o.unlock();
    }).join();
}

TEST(rwlock_redisson, a_shut_down_clients_reader_is_cleaned_up_by_another_readers_unlock) {
    // testMultiInstanceReadLockZombieCleanup: only this client's readers are renewed.
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    auto a = std::make_unique<dlock::client>(watchdog_options(s.url()));
    dlock::client b(watchdog_options(s.url()));
    {
        dlock::rw_mutex zombie = a->make_rw_mutex("zombie");
        zombie.lock_shared();
    } // the object dies holding: its hold is no longer renewed
    a.reset();
    dlock::rw_mutex m = b.make_rw_mutex("zombie");
    m.lock_shared();
    // B's renewals keep N alive but not A's timeout key.
    ASSERT_TRUE(
        eventually([&] { return keys_matching(s, "{zombie}:*:rwlock_timeout:*") == 1; }, 5s));
    EXPECT_EQ(std::stoll(s.cli({"HLEN", "zombie"})), 3); // mode, A's field, B's field
    m.unlock_shared();                                   // no live read timeout left: N is deleted
    EXPECT_EQ(s.cli({"EXISTS", "zombie"}), "0");
    EXPECT_TRUE(m.try_lock());
    m.unlock();
}

TEST(rwlock_redisson, a_lock_whose_name_has_a_hash_tag_keeps_every_key_in_its_slot) {
    // testName: {test}:abc:key
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    std::vector<std::thread> threads;
    std::atomic<int> ok{0};
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            dlock::rw_mutex m = c.make_rw_mutex("{test}:abc:key");
            for (int i = 0; i < 10; ++i) {
                m.lock_shared();
                m.unlock_shared();
            }
            ok.fetch_add(1);
        });
    for (auto& th : threads)
        th.join();
    EXPECT_EQ(ok.load(), 4);
    dlock::rw_mutex m = c.make_rw_mutex("{test}:abc:key");
    m.lock_shared();
    EXPECT_EQ(keys_matching(s, "{test}:abc:key:*:rwlock_timeout:1"), 1u);
    m.unlock_shared();
}

TEST(rwlock_redisson, force_unlock_breaks_either_mode_and_wakes_every_waiter) {
    // testForceUnlock, deliberately different: Redisson's side-specific forceUnlock leaves the
    // other mode alone; ours breaks the lock in any mode.
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url())), other(fast_options(s.url()));
    dlock::rw_mutex m = c.make_rw_mutex("force");
    m.lock_shared();
    dlock::rw_mutex o = other.make_rw_mutex("force");
    EXPECT_TRUE(o.writer().force_unlock());
    EXPECT_FALSE(o.is_locked());
    std::error_code ec;
    m.unlock_shared(ec);
    EXPECT_EQ(ec, errc::not_owner);
    m.lock();
    EXPECT_TRUE(o.reader().force_unlock());
    EXPECT_FALSE(o.force_unlock());
    EXPECT_TRUE(o.try_lock());
    o.unlock();
}
