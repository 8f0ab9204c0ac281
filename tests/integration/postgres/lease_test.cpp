// dlock's own lease rows (lock_kind::lease, postgres/rows.hpp): a fencing token taken with the
// row, waiters woken by NOTIFY (not by polling), expiry and takeover, unlock --force.
#include "pg_test_util.hpp"

#include <future>
#include <thread>

namespace dlock::test {
namespace {

using clock = std::chrono::steady_clock;

class PgLease : public pg_suite {};

acquire_options lease_kind(std::chrono::milliseconds wait) {
    return wait_for(wait, lock_kind::lease);
}

TEST_F(PgLease, RowsCarryStrictlyIncreasingTokensAndAreDeletedOnRelease) {
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
        EXPECT_EQ(server().psql("SELECT count(*) FROM dlock_lease WHERE name = 'lease:tok'"), "0");
    }
}

TEST_F(PgLease, AWaiterIsWokenByTheReleaseNotification) {
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
    // The waiter is asleep: it listens, and its attempt was refused.
    ASSERT_TRUE(eventually(
        [&] {
            return server().psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                                 "'LISTEN dlock_lease%'") == "1";
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

TEST_F(PgLease, AnExpiredRowIsTakenOverAndItsOldHolderIsLost) {
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

TEST_F(PgLease, ForceUnlockDeletesTheRowAndWakesItsWaiter) {
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

TEST_F(PgLease, ShutdownEndsAWaitAtOnce) {
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

} // namespace
} // namespace dlock::test
