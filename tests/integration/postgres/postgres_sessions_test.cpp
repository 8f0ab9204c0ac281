// Advisory locks sharing holding sessions (postgres/advisory_sessions.hpp) on a real
// PostgreSQL 15: many locks on few sessions, never one key twice on one session, a session's
// end loses every hold on it, a granted waiter's session takes later tries.
#include "postgres_test_util.hpp"

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

class pg_sessions : public pg_suite {
protected:
    /// Backends of the server holding advisory locks now.
    static int holding_pids() {
        return std::stoi(server().psql(
            "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' AND granted"));
    }
};

TEST_F(pg_sessions, two_holds_of_one_key_are_on_two_sessions) {
    auto b = backend();
    std::error_code ec;
    auto r1 = b->acquire("shared-key", wait_for(0ms, lock_kind::read), ec);
    ASSERT_TRUE(r1) << ec.message();
    auto r2 = b->acquire("shared-key", wait_for(0ms, lock_kind::read), ec);
    ASSERT_TRUE(r2) << ec.message();
    EXPECT_EQ(granted(), 2);
    EXPECT_EQ(holding_pids(), 2); // one session would have stacked the key
    r1->release_blocking(ec);
    EXPECT_FALSE(ec);
    EXPECT_EQ(granted(), 1);
    r2->release_blocking(ec);
    EXPECT_FALSE(ec);
    EXPECT_EQ(granted(), 0);

    // An exclusive hold and a try of the same key by the same client: refused (on the holding
    // session it would have been granted, stacked).
    auto w = b->acquire("excl-key", wait_for(0ms), ec);
    ASSERT_TRUE(w) << ec.message();
    auto again = b->acquire("excl-key", wait_for(0ms), ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_FALSE(again);
    auto waited = b->acquire("excl-key", wait_for(200ms), ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_FALSE(waited);
    EXPECT_EQ(granted(), 1);
    w->release_blocking(ec);
    EXPECT_FALSE(ec);
    EXPECT_EQ(granted(), 0);
}

TEST_F(pg_sessions, a_terminated_session_loses_every_hold_on_it) {
    auto b = backend();
    constexpr int n = 40;
    std::vector<std::shared_ptr<detail::hold>> hs;
    std::atomic<int> lost{0};
    for (int i = 0; i < n; ++i) {
        std::error_code ec;
        auto h = b->acquire("many:" + std::to_string(i), wait_for(0ms), ec);
        ASSERT_TRUE(h) << ec.message();
        h->on_lost([&] { ++lost; });
        hs.push_back(std::move(h));
    }
    EXPECT_EQ(granted(), n);
    // One at a time, so every try found the first session idle: one session holds them all.
    EXPECT_EQ(holding_pids(), 1);
    EXPECT_EQ(server().psql("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM "
                            "(SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' "
                            "AND granted) p"),
              "1");
    ASSERT_TRUE(eventually([&] { return lost.load() == n; }, 5s));
    for (auto& h : hs) {
        EXPECT_TRUE(h->lost());
        std::error_code ec;
        h->release_blocking(ec);
        EXPECT_EQ(ec, errc::not_owner);
    }
    // The client goes on with new sessions.
    std::error_code ec;
    auto again = b->acquire("many:0", wait_for(2s), ec);
    EXPECT_TRUE(again) << ec.message();
}

TEST_F(pg_sessions, a_granted_waiters_session_takes_later_tries) {
    auto a = backend();
    auto b = backend();
    std::error_code ec;
    auto held = a->acquire("queue", wait_for(0ms), ec);
    ASSERT_TRUE(held) << ec.message();
    std::shared_ptr<detail::hold> got;
    std::thread waiter([&] {
        std::error_code e;
        got = b->acquire("queue", wait_for(20s), e);
        EXPECT_TRUE(got) << e.message();
    });
    ASSERT_TRUE(eventually([&] { return waiting() == 1; }, 5s));
    held->release_blocking(ec);
    waiter.join();
    ASSERT_TRUE(got);
    // `a` holds nothing now: every advisory lock is b's, on the waiter's session.
    std::vector<std::shared_ptr<detail::hold>> more;
    for (int i = 0; i < 20; ++i) {
        auto h = b->acquire("after:" + std::to_string(i), wait_for(0ms), ec);
        ASSERT_TRUE(h) << ec.message();
        more.push_back(std::move(h));
    }
    EXPECT_EQ(granted(), 21);
    EXPECT_EQ(holding_pids(), 1);
    // b's sessions: the one holding, none other open (its try session was reused to wait).
    EXPECT_EQ(server().psql("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE "
                            "'dlock%' AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = "
                            "'advisory')"),
              "1"); // a's idle session
    for (auto& h : more)
        h->release_blocking(ec);
    got->release_blocking(ec);
    EXPECT_EQ(granted(), 0);
}

TEST_F(pg_sessions, list_names_the_locks_this_client_holds_on_a_shared_session) {
    auto b = backend();
    auto other = backend();
    std::error_code ec;
    auto h1 = b->acquire("named:1", wait_for(0ms), ec);
    auto h2 = b->acquire("named:2", wait_for(0ms), ec);
    ASSERT_TRUE(h1 && h2);
    ASSERT_EQ(holding_pids(), 1);
    auto mine = b->list("named:*", ec);
    ASSERT_FALSE(ec);
    ASSERT_EQ(mine.size(), 2U);
    EXPECT_EQ(mine[0].name.substr(0, 6), "named:");
    // Another client knows only the key of a session holding several.
    auto theirs = other->list("", ec);
    ASSERT_FALSE(ec);
    ASSERT_EQ(theirs.size(), 2U);
    EXPECT_EQ(theirs[0].name.substr(0, 4), "key ");
}

// A try waits on the client for a holding session with nothing in flight once `dlock_pool`
// sessions are busy (choose_session): with a pool of 2 and 16 threads, every try and release
// goes through, on at most 2 holding sessions, and a client shut down with tries still in
// line ends each of them (cancelled or granted, never left hanging).
TEST_F(pg_sessions, tries_wait_in_line_for_a_free_holding_session) {
    auto b = backend("dlock_pool=2");
    constexpr int threads = 16, rounds = 150;
    std::atomic<int> granted_n{0}, failed{0}, most_pids{0};
    std::atomic<bool> stop{false};
    std::thread sampler([&] {
        while (!stop) {
            const int n = holding_pids();
            int seen = most_pids.load();
            while (n > seen && !most_pids.compare_exchange_weak(seen, n)) {
            }
        }
    });
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            for (int i = 0; i < rounds; ++i) {
                std::error_code e;
                auto h = b->acquire("line:" + std::to_string(t), wait_for(0ms), e);
                if (!h) {
                    ++failed;
                    continue;
                }
                ++granted_n;
                h->release_blocking(e);
                if (e) ++failed;
            }
        });
    for (auto& t : ts)
        t.join();
    stop = true;
    sampler.join();
    EXPECT_EQ(granted_n, threads * rounds);
    EXPECT_EQ(failed, 0);
    EXPECT_LE(most_pids, 2) << "tries went beyond the pool's holding sessions";
    EXPECT_EQ(granted(), 0);

    // Shut down with tries in line: every callback comes, none hangs.
    auto c = backend("dlock_pool=1");
    std::atomic<int> answered{0};
    std::vector<std::shared_ptr<detail::hold>> kept(64);
    std::mutex mu;
    for (int i = 0; i < 64; ++i)
        c->async_acquire("burst:" + std::to_string(i), wait_for(0ms),
                         [&, i](std::error_code e, std::shared_ptr<detail::hold> h) {
                             EXPECT_TRUE(!e || e == make_error_code(errc::cancelled))
                                 << e.message();
                             std::lock_guard lk(mu);
                             kept[static_cast<std::size_t>(i)] = std::move(h);
                             ++answered;
                         });
    c->shutdown();
    EXPECT_TRUE(eventually([&] { return answered == 64; }, 10s)) << answered;
}

/// A server that allows 20 connections (17 for clients).
class pg_small_server : public ::testing::Test {
public:
    static void SetUpTestSuite() {
        if (postgres_available()) server_ = new pg_server({"max_connections=20"});
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        if (!server_) GTEST_SKIP() << "PostgreSQL 15 server binaries not found";
    }
    static inline pg_server* server_ = nullptr;
};

TEST_F(pg_small_server, one_client_holds_a_thousand_locks) {
    std::error_code ec;
    std::string why;
    auto b = detail::make_postgres_backend(server_->url(), ec, &why);
    ASSERT_TRUE(b) << why;
    constexpr int threads = 8, each = 125;
    std::vector<std::vector<std::shared_ptr<detail::hold>>> hs(threads);
    std::atomic<int> errors{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            for (int i = 0; i < each; ++i) {
                std::error_code e;
                auto h =
                    b->acquire("k:" + std::to_string(t) + ":" + std::to_string(i), wait_for(5s), e);
                if (!h) {
                    ++errors;
                    ADD_FAILURE() << e.message() << ": " << b->last_error_detail();
                    return;
                }
                hs[static_cast<std::size_t>(t)].push_back(std::move(h));
            }
        });
    for (auto& t : ts)
        t.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(server_->psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                            "granted"),
              "1000");
    // At most dlock_pool (8) sessions hold them.
    EXPECT_LE(std::stoi(server_->psql("SELECT count(DISTINCT pid) FROM pg_locks WHERE "
                                      "locktype = 'advisory'")),
              8);
    for (auto& v : hs)
        for (auto& h : v) {
            h->release_blocking(ec);
            EXPECT_FALSE(ec);
        }
    EXPECT_EQ(server_->psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"), "0");
}

} // namespace
} // namespace dlock::test
