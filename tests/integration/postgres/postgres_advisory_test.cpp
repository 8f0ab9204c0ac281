// Advisory locks on a real PostgreSQL 15 (postgres/advisory.hpp), through the lock_backend seam:
// exclusion, the server's FIFO queue, loss on pg_terminate_backend and restart, fencing tokens,
// read/write modes, waits bounded in the server, fixed leases, key conventions seen by the
// server, status/list/unlock --force queries.
#include "postgres_test_util.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <future>
#include <mutex>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace dlock::test {
namespace {

using clock = std::chrono::steady_clock;

class pg_advisory : public pg_suite {};

TEST_F(pg_advisory, exclusion_among_clients_and_threads) {
    constexpr int clients = 4, threads_per = 2, rounds = 25;
    std::vector<std::shared_ptr<detail::lock_backend>> bs;
    for (int i = 0; i < clients; ++i)
        bs.push_back(backend());
    critical_section_checker check;
    std::atomic<int> done{0}, errors{0};
    std::vector<std::thread> ts;
    for (int c = 0; c < clients; ++c)
        for (int t = 0; t < threads_per; ++t)
            ts.emplace_back([&, c] {
                for (int i = 0; i < rounds; ++i) {
                    std::error_code ec;
                    auto h = bs[static_cast<std::size_t>(c)]->acquire("excl", wait_for(20s), ec);
                    if (ec || !h) {
                        ++errors;
                        continue;
                    }
                    {
                        auto in = check.enter_write();
                        std::this_thread::yield();
                    }
                    h->release_blocking(ec);
                    if (ec) ++errors;
                    ++done;
                }
            });
    for (auto& t : ts)
        t.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(done.load(), clients * threads_per * rounds);
    EXPECT_EQ(check.violations(), 0);
    EXPECT_EQ(granted(), 0); // every release freed the lock
}

TEST_F(pg_advisory, waiters_are_served_in_arrival_order) {
    auto b = backend();
    std::error_code ec;
    auto first = b->acquire("fifo", wait_for(5s), ec);
    ASSERT_TRUE(first) << ec.message();
    std::mutex mu;
    std::vector<int> order;
    std::vector<std::thread> ts;
    for (int i = 0; i < 4; ++i) {
        ts.emplace_back([&, i] {
            std::error_code e;
            auto h = b->acquire("fifo", wait_for(20s), e);
            ASSERT_TRUE(h) << e.message();
            {
                std::lock_guard lk(mu);
                order.push_back(i);
            }
            h->release_blocking(e);
        });
        // The next waiter starts only when this one is queued in the server.
        ASSERT_TRUE(eventually([&] { return waiting() == i + 1; }, 10s));
    }
    first->release_blocking(ec);
    for (auto& t : ts)
        t.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST_F(pg_advisory, terminated_session_is_a_loss_at_once) {
    auto b = backend();
    std::error_code ec;
    auto h = b->acquire("killme", wait_for(5s), ec);
    ASSERT_TRUE(h) << ec.message();
    std::atomic<bool> called{false};
    h->on_lost([&] { called = true; });
    EXPECT_GT(h->valid_until(), clock::now());
    const auto t0 = clock::now();
    EXPECT_EQ(server().psql("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM "
                            "pg_locks WHERE locktype = 'advisory' AND granted"),
              "1");
    // lost() turns true before the callbacks run (on the I/O thread): wait for both.
    ASSERT_TRUE(eventually([&] { return h->lost() && called.load(); }, 5s));
    EXPECT_LT(clock::now() - t0, 1s); // the socket said so; no check period had to pass
    EXPECT_TRUE(h->stop_token().stop_requested());
    EXPECT_LE(h->valid_until(), clock::now());
    h->release_blocking(ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_NE(b->last_error_detail().find("killme"), std::string::npos);
    // Another owner gets it.
    auto again = b->acquire("killme", wait_for(2s), ec);
    EXPECT_TRUE(again) << ec.message();
}

TEST_F(pg_advisory, server_restart_is_a_loss) {
    auto b = backend();
    std::error_code ec;
    auto h = b->acquire("restart", wait_for(5s), ec);
    ASSERT_TRUE(h) << ec.message();
    server().restart();
    ASSERT_TRUE(eventually([&] { return h->lost(); }, 5s));
    // The backend recovers: new sessions on the restarted server.
    auto again = b->acquire("restart", wait_for(5s), ec);
    EXPECT_TRUE(again) << ec.message();
}

TEST_F(pg_advisory, fencing_tokens_strictly_increase) {
    auto b1 = backend(), b2 = backend();
    std::uint64_t last = 0;
    for (int i = 0; i < 20; ++i) {
        std::error_code ec;
        auto& b = i % 2 ? b1 : b2;
        auto h = b->acquire("fenced", wait_for(i % 3 == 0 ? 0ms : 5000ms), ec);
        ASSERT_TRUE(h) << ec.message();
        ASSERT_TRUE(h->fencing_token());
        EXPECT_GT(*h->fencing_token(), last);
        last = *h->fencing_token();
        h->release_blocking(ec);
        EXPECT_FALSE(ec);
    }
    std::error_code ec;
    auto st = b1->inspect("fenced", lock_kind::reentrant, ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(st.fencing_counter, last);
}

TEST_F(pg_advisory, waits_end_in_the_server_within_the_callers_wait) {
    auto b = backend();
    std::error_code ec;
    auto holder = b->acquire("busy", wait_for(5s), ec);
    ASSERT_TRUE(holder);
    auto t0 = clock::now();
    auto none = b->acquire("busy", wait_for(0ms), ec);
    EXPECT_FALSE(none);
    EXPECT_FALSE(ec);
    EXPECT_LT(clock::now() - t0, 1s);
    t0 = clock::now();
    none = b->acquire("busy", wait_for(300ms), ec);
    const auto took = clock::now() - t0;
    EXPECT_FALSE(none);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_GE(took, 290ms);
    EXPECT_LT(took, 3s);
    EXPECT_EQ(waiting(), 0); // the server ended the wait (lock_timeout)
}

TEST_F(pg_advisory, readers_share_and_writers_exclude) {
    auto b = backend();
    std::error_code ec;
    auto r1 = b->acquire("rw", wait_for(5s, lock_kind::read), ec);
    auto r2 = b->acquire("rw", wait_for(0ms, lock_kind::read), ec);
    ASSERT_TRUE(r1);
    ASSERT_TRUE(r2);
    EXPECT_FALSE(r1->fencing_token()); // readers carry no token
    EXPECT_FALSE(b->acquire("rw", wait_for(0ms, lock_kind::write), ec));
    EXPECT_FALSE(ec);
    r1->release_blocking(ec);
    r2->release_blocking(ec);
    auto w = b->acquire("rw", wait_for(0ms, lock_kind::write), ec);
    ASSERT_TRUE(w) << ec.message();
    EXPECT_TRUE(w->fencing_token());
    EXPECT_FALSE(b->acquire("rw", wait_for(0ms, lock_kind::read), ec));
}

TEST_F(pg_advisory, valid_until_is_the_check_bound_and_moves_with_checks) {
    auto b = backend("dlock_check=200");
    std::error_code ec;
    auto h = b->acquire("valid", wait_for(5s), ec);
    ASSERT_TRUE(h);
    const auto first = h->valid_until();
    EXPECT_GT(first, clock::now());
    EXPECT_LE(first, clock::now() + 200ms);
    ASSERT_TRUE(eventually([&] { return h->valid_until() > first; }, 2s));
    EXPECT_FALSE(h->lost());
    h->extend(10s, ec); // no lease: proves the session alive
    EXPECT_FALSE(ec);
}

TEST_F(pg_advisory, fixed_lease_ends_the_hold_and_frees_the_lock) {
    auto b = backend();
    std::error_code ec;
    auto o = wait_for(5s);
    o.lease = 300ms;
    auto h = b->acquire("leased", o, ec);
    ASSERT_TRUE(h);
    EXPECT_LE(h->valid_until(), clock::now() + 300ms);
    ASSERT_TRUE(eventually([&] { return h->lost(); }, 3s));
    // The holder is told before the server has ended the session: the lock follows within
    // moments (a wait, not a try).
    auto other = b->acquire("leased", wait_for(2s), ec);
    EXPECT_TRUE(other);
}

TEST_F(pg_advisory, keys_are_the_other_libraries_keys_on_the_server) {
    std::error_code ec;
    // sha256-le64 (django-pglock): the bigint 4758452604826750144.
    auto b = backend();
    auto h = b->acquire("orders:12345", wait_for(5s), ec);
    ASSERT_TRUE(h);
    EXPECT_EQ(server().psql("SELECT pg_try_advisory_lock(4758452604826750144)"), "f");
    h->release_blocking(ec);
    EXPECT_EQ(server().psql("SELECT pg_try_advisory_lock(4758452604826750144)"), "t");
    // crc32-pair (Rails with_advisory_lock): the pair (1382419284, 0), objsubid 2.
    auto rails = backend("dlock_key=crc32-pair");
    h = rails->acquire("orders:12345", wait_for(5s), ec);
    ASSERT_TRUE(h);
    EXPECT_EQ(server().psql("SELECT classid || ',' || objid || ',' || objsubid FROM pg_locks "
                            "WHERE locktype = 'advisory' AND granted"),
              "1382419284,0,2");
    h->release_blocking(ec);
    // hashtext (Laravel): the server's own hash, 1099366921.
    auto laravel = backend("dlock_key=hashtext");
    h = laravel->acquire("orders:12345", wait_for(5s), ec);
    ASSERT_TRUE(h);
    EXPECT_EQ(server().psql("SELECT pg_try_advisory_lock(1099366921)"), "f");
    const auto st = laravel->inspect("orders:12345", lock_kind::reentrant, ec);
    EXPECT_NE(st.detail.find("1099366921"), std::string::npos) << st.detail;
}

TEST_F(pg_advisory, status_list_and_force_unlock) {
    auto b = backend();
    std::error_code ec;
    auto h = b->acquire("jobs:nightly", wait_for(5s), ec);
    ASSERT_TRUE(h);
    std::thread waiter([&] {
        std::error_code e;
        auto w = b->acquire("jobs:nightly", wait_for(20s), e);
        EXPECT_TRUE(w) << e.message();
    });
    ASSERT_TRUE(eventually([&] { return waiting() == 1; }, 5s));
    auto st = b->inspect("jobs:nightly", lock_kind::reentrant, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(st.exists);
    ASSERT_EQ(st.contenders.size(), 2U);
    EXPECT_TRUE(st.contenders[0].holds);
    EXPECT_FALSE(st.contenders[1].holds);
    EXPECT_EQ(st.contenders[1].position, 0U);
    EXPECT_EQ(st.contenders[0].owner.substr(0, 18), "dlock:jobs:nightly");
    EXPECT_TRUE(b->is_locked("jobs:nightly", lock_kind::reentrant, ec));
    EXPECT_FALSE(b->is_locked("jobs:other", lock_kind::reentrant, ec));

    auto all = b->list("jobs:*", ec);
    ASSERT_FALSE(ec);
    ASSERT_EQ(all.size(), 1U);
    EXPECT_EQ(all[0].name, "jobs:nightly");
    EXPECT_EQ(all[0].contenders.size(), 2U);
    EXPECT_TRUE(b->list("other:*", ec).empty());

    EXPECT_TRUE(b->force_unlock("jobs:nightly", lock_kind::reentrant, ec));
    ASSERT_TRUE(eventually([&] { return h->lost(); }, 5s));
    waiter.join(); // the waiter got it when the holder's session ended
}

TEST_F(pg_advisory, async_acquire_completes_on_the_io_thread) {
    auto b = backend();
    std::promise<std::pair<std::error_code, bool>> p;
    b->async_acquire("async", wait_for(5s),
                     [&](std::error_code ec, std::shared_ptr<detail::hold> h) {
                         const bool io = b->on_io_thread();
                         if (h) h->release_async([](std::error_code) {});
                         p.set_value({ec, h != nullptr && io});
                     });
    auto f = p.get_future();
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    auto [ec, ok] = f.get();
    EXPECT_FALSE(ec);
    EXPECT_TRUE(ok);
}

TEST_F(pg_advisory, shutdown_ends_holds_and_frees_their_locks) {
    auto b = backend();
    std::error_code ec;
    auto h = b->acquire("down", wait_for(5s), ec);
    ASSERT_TRUE(h);
    b->shutdown();
    EXPECT_TRUE(h->lost());
    ASSERT_TRUE(eventually([&] { return granted() == 0; }, 5s));
    EXPECT_FALSE(b->acquire("down", wait_for(0ms), ec));
    EXPECT_EQ(ec, errc::cancelled);
}

} // namespace
} // namespace dlock::test

namespace dlock::test {
namespace {

// A holder process killed with SIGKILL: its kernel closes the socket, the server ends the
// session and frees the lock at once (the keepalive bound is for a host that vanished).
TEST_F(pg_advisory, killed_holder_process_frees_the_lock) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const std::string url = server().url();
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(ready[0]);
        std::error_code ec;
        std::string why;
        auto b = detail::make_postgres_backend(url, ec, &why);
        auto h = b ? b->acquire("process", wait_for(5s), ec) : nullptr;
        const char ok = h ? '1' : '0';
        (void)!::write(ready[1], &ok, 1);
        for (;;)
            ::pause(); // hold until killed
    }
    ::close(ready[1]);
    char ok = 0;
    ASSERT_EQ(::read(ready[0], &ok, 1), 1);
    ::close(ready[0]);
    ASSERT_EQ(ok, '1');
    auto b = backend();
    std::error_code ec;
    EXPECT_FALSE(b->acquire("process", wait_for(0ms), ec));
    const auto t0 = clock::now();
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    auto h = b->acquire("process", wait_for(5s), ec);
    ASSERT_TRUE(h) << ec.message();
    EXPECT_LT(clock::now() - t0, 2s);
}

} // namespace
} // namespace dlock::test

namespace dlock::test {
namespace {

// A session that stops answering (its server process stopped: a hung server, a partition) is
// lost when valid_until passes unproven, within the check period, and the hold closes it.
TEST_F(pg_advisory, an_unanswered_check_is_a_loss_at_valid_until) {
    auto b = backend("dlock_check=300");
    std::error_code ec;
    auto h = b->acquire("silent", wait_for(5s), ec);
    ASSERT_TRUE(h) << ec.message();
    const auto pid = std::stoi(
        server().psql("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted LIMIT 1"));
    std::atomic<clock::rep> lost_at{0};
    h->on_lost([&] { lost_at = clock::now().time_since_epoch().count(); });
    ASSERT_EQ(::kill(pid, SIGSTOP), 0);
    const auto t0 = clock::now();
    const auto until = h->valid_until(); // may still move once: a check sent before the stop
    const bool lost = eventually([&] { return h->lost(); }, 3s);
    ::kill(pid, SIGCONT);
    ASSERT_TRUE(lost);
    EXPECT_GE(lost_at.load(), until.time_since_epoch().count()); // not before its promise
    EXPECT_LT(clock::now() - t0, 1s); // within about one check period (300 ms) and a tick
}

} // namespace
} // namespace dlock::test
