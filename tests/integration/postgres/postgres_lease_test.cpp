// dlock's own lease rows (lock_kind::lease, postgres/rows.hpp): a fencing token taken with the
// row, waiters woken by NOTIFY (not by polling), expiry and takeover, unlock --force.
#include "postgres_test_util.hpp"

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

namespace dlock::test {
namespace {

using clock = std::chrono::steady_clock;

class pg_lease : public pg_suite {};

acquire_options lease_kind(std::chrono::milliseconds wait) {
    return wait_for(wait, lock_kind::lease);
}

TEST_F(pg_lease, rows_carry_strictly_increasing_tokens_and_are_expired_on_release) {
    auto b = backend();
    std::error_code ec;
    std::uint64_t last = 0;
    for (int i = 0; i < 5; ++i) {
        auto h = b->acquire("lease:tok", lease_kind(0ms), ec);
        ASSERT_TRUE(h) << ec.message() << " " << b->last_error_detail();
        ASSERT_TRUE(h->fencing_token());
        EXPECT_GT(*h->fencing_token(), last);
        last = *h->fencing_token();
        EXPECT_EQ(server().psql("SELECT token FROM dlock_lease WHERE name = 'lease:tok'"),
                  std::to_string(last));
        EXPECT_FALSE(backend()->acquire("lease:tok", lease_kind(0ms), ec));
        h->release_blocking(ec);
        EXPECT_FALSE(ec);
        // Kept, expired: a takeover's token is then always drawn under the row lock.
        EXPECT_EQ(server().psql("SELECT count(*) FROM dlock_lease WHERE name = 'lease:tok' AND "
                                "expires_at <= now()"),
                  "1");
    }
}

// The race the 8-process exclusion test met once under ASan: an acquisition draws its token in
// VALUES, before the conflict check; another client takes and releases the lock meanwhile; the
// first then takes the lock with a token below the one granted before it. A BEFORE INSERT
// trigger (it runs after VALUES, before the conflict check) holds the slow client at exactly
// that point, for as long as the test holds a gate (an advisory lock); the slow client is
// told apart by a setting in its connection's options.
TEST_F(pg_lease, a_token_drawn_before_another_grant_is_never_granted) {
    std::error_code ec;
    auto fast = backend();
    auto first = fast->acquire("lease:race", lease_kind(0ms), ec); // table, sequence and row
    ASSERT_TRUE(first) << ec.message() << " " << fast->last_error_detail();
    first->release_blocking(ec);
    ASSERT_FALSE(ec);
    auto gate_holder = backend();
    auto gate = gate_holder->acquire("lease:race-gate", wait_for(0ms), ec); // advisory
    ASSERT_TRUE(gate) << ec.message();
    const std::string key = server().psql(
        "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks WHERE locktype = "
        "'advisory' AND granted AND objsubid = 1");
    server().psql("CREATE FUNCTION lease_race_gate() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
                  "IF current_setting('dlock_test.slow', true) = 'on' THEN PERFORM "
                  "pg_advisory_xact_lock(" +
                  key +
                  "); END IF; RETURN NEW; END$$; CREATE TRIGGER lease_race_gate BEFORE INSERT "
                  "ON dlock_lease FOR EACH ROW EXECUTE FUNCTION lease_race_gate()");
    auto slow = backend("options=-c%20dlock_test.slow%3Don");
    auto got = std::async(std::launch::async, [&] {
        std::error_code e;
        auto h = slow->acquire("lease:race", lease_kind(20s), e);
        const auto t = h ? h->fencing_token() : std::nullopt;
        if (h) h->release_blocking(e);
        return t;
    });
    // The slow client's INSERT has drawn its token and waits at the gate.
    const bool parked = eventually([] { return waiting() == 1; }, 10s);
    std::optional<std::uint64_t> between;
    if (parked) {
        auto h = fast->acquire("lease:race", lease_kind(0ms), ec);
        EXPECT_TRUE(h) << ec.message() << " " << fast->last_error_detail();
        if (h) {
            between = h->fencing_token();
            h->release_blocking(ec);
            EXPECT_FALSE(ec);
        }
    }
    gate->release_blocking(ec);
    ASSERT_EQ(got.wait_for(20s), std::future_status::ready);
    const auto after = got.get();
    server().psql("DROP TRIGGER lease_race_gate ON dlock_lease");
    ASSERT_TRUE(parked) << "the slow client never reached the gate";
    ASSERT_TRUE(between && after);
    EXPECT_GT(*after, *between) << "a token drawn before another grant was granted after it";
}

TEST_F(pg_lease, a_waiter_is_woken_by_the_release_notification) {
    auto b = backend();
    std::error_code ec;
    auto holder = b->acquire("lease:wake", lease_kind(0ms), ec); // 30 s watchdog lease
    ASSERT_TRUE(holder) << ec.message();
    auto waiter = backend();
    auto got = std::async(std::launch::async, [&] {
        std::error_code e;
        auto h = waiter->acquire("lease:wake", lease_kind(20s), e);
        return std::make_pair(clock::now(), h != nullptr);
    });
    // The waiter is asleep: it listens (one session LISTENs on dlock_lease, then on
    // dlock_election: the last statement pg_stat_activity shows), and its attempt was refused.
    ASSERT_TRUE(eventually(
        [&] {
            return server().psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                                 "'LISTEN dlock_%'") == "1";
        },
        5s));
    ASSERT_EQ(got.wait_for(300ms), std::future_status::timeout);
    const auto released = clock::now();
    holder->release_blocking(ec);
    ASSERT_FALSE(ec);
    ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
    const auto [when, ok] = got.get();
    EXPECT_TRUE(ok);
    // Woken by NOTIFY: the holder's row had ~30 s left, and nothing polls.
    EXPECT_LT(when - released, 1s);
}

TEST_F(pg_lease, an_expired_row_is_taken_over_and_its_old_holder_is_lost) {
    auto b = backend();
    std::error_code ec;
    auto o = lease_kind(0ms);
    o.lease = 300ms;
    auto first = b->acquire("lease:exp", o, ec);
    ASSERT_TRUE(first);
    auto other = backend(); // kept: a backend's shutdown ends its holds
    auto second = other->acquire("lease:exp", lease_kind(5s), ec);
    ASSERT_TRUE(second) << ec.message();
    EXPECT_GT(*second->fencing_token(), *first->fencing_token());
    EXPECT_TRUE(first->lost() || eventually([&] { return first->lost(); }, 1s));
    first->extend(1s, ec);
    EXPECT_EQ(ec, errc::not_owner);
    first->release_blocking(ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_FALSE(second->lost());
}

TEST_F(pg_lease, a_watchdog_hold_whose_extend_goes_unanswered_is_lost_at_its_deadline) {
    // The watchdog extends every third of the 600 ms lease; the server is paused, so an extend
    // hangs for the statement budget (3 s). The hold is lost when its valid_until passes, not
    // when that extend gives up (fault row P05 PGLW found it lost only then).
    auto b = backend("dlock_lease=600&dlock_timeout=3000");
    std::error_code ec;
    auto h = b->acquire("lease:stalled", lease_kind(0ms), ec); // no fixed lease: the watchdog
    ASSERT_TRUE(h) << ec.message();
    ASSERT_TRUE(eventually([&] { return h->valid_until() > clock::now() + 450ms; }, 2s));
    server().pause();
    const auto paused = clock::now();
    const bool lost = eventually([&] { return h->lost(); }, 5s);
    const auto at = clock::now();
    server().resume();
    EXPECT_TRUE(lost);
    EXPECT_LT(at - paused, 1500ms); // its deadline is at most 600 ms after the pause
}

TEST_F(pg_lease, force_unlock_expires_the_row_and_wakes_its_waiter) {
    auto b = backend();
    std::error_code ec;
    auto holder = b->acquire("lease:force", lease_kind(0ms), ec);
    ASSERT_TRUE(holder);
    auto st = b->inspect("lease:force", lock_kind::lease, ec);
    ASSERT_FALSE(ec);
    EXPECT_TRUE(st.exists);
    ASSERT_EQ(st.contenders.size(), 1U);
    EXPECT_EQ(st.contenders[0].token, holder->fencing_token());
    EXPECT_EQ(st.fencing_counter, holder->fencing_token());
    EXPECT_EQ(b->list("lease:forc?", ec).size(), 1U);
    auto got = std::async(std::launch::async, [&] {
        std::error_code e;
        return backend()->acquire("lease:force", lease_kind(20s), e) != nullptr;
    });
    ASSERT_EQ(got.wait_for(300ms), std::future_status::timeout);
    EXPECT_TRUE(b->force_unlock("lease:force", lock_kind::lease, ec));
    ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(got.get());
    holder->extend(30s, ec); // the old holder learns it at its next extend
    EXPECT_EQ(ec, errc::not_owner);
}

} // namespace
} // namespace dlock::test

namespace dlock::test {
namespace {

TEST_F(pg_lease, shutdown_ends_a_wait_at_once) {
    auto holder = backend();
    std::error_code ec;
    auto h = holder->acquire("lease:down", lease_kind(0ms), ec); // 30 s lease
    ASSERT_TRUE(h);
    auto b = backend();
    auto got = std::async(std::launch::async, [&] {
        std::error_code e;
        auto w = b->acquire("lease:down", lease_kind(25s), e);
        return e;
    });
    ASSERT_EQ(got.wait_for(300ms), std::future_status::timeout); // asleep until NOTIFY/expiry
    const auto t0 = clock::now();
    b->shutdown();
    ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(got.get(), errc::cancelled);
    EXPECT_LT(clock::now() - t0, 2s);
}

// Row statements share the pool's sessions: 40 threads acquiring and releasing at once run
// their statements on at most dlock_pool sessions (queued behind each other), never a
// connection per statement. A server with max_connections = 12 (9 for clients after the 3
// reserved ones) refused such bursts before ("too many clients already"), and a session opened
// per statement made 50 workers on 50 names 20x slower than 8.
TEST_F(pg_lease, concurrent_statements_share_the_pool_sessions_on_a_small_server) {
    pg_server small({"max_connections=12"});
    auto b = backend_at(small.url("dlock_pool=4"));
    ASSERT_TRUE(b);
    std::atomic<int> done{0}, failed{0};
    std::string first_error;
    std::mutex mu;
    std::vector<std::thread> ts;
    for (int t = 0; t < 40; ++t)
        ts.emplace_back([&, t] {
            for (int i = 0; i < 10; ++i) {
                std::error_code ec;
                auto h = b->acquire("lease:burst:" + std::to_string(t), lease_kind(10s), ec);
                if (h) h->release_blocking(ec);
                if (!h || ec) {
                    ++failed;
                    std::lock_guard lk(mu);
                    if (first_error.empty())
                        first_error = ec.message() + " " + b->last_error_detail();
                    return;
                }
                ++done;
            }
        });
    for (auto& t : ts)
        t.join();
    EXPECT_EQ(failed.load(), 0) << first_error;
    EXPECT_EQ(done.load(), 400);
    // The pool's sessions and the LISTEN session, no more.
    EXPECT_LE(std::stoi(small.psql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
                                   "'client backend' AND application_name <> 'psql'")),
              5);
}

} // namespace
} // namespace dlock::test
