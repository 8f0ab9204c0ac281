// dlock::mutex against a real redis-server: reentrant hold counts, fencing tokens that
// strictly increase, and an unlock by a non-owner.
#include "lock_test_util.hpp"

#include <cstdint>
#include <mutex>
#include <system_error>
#include <thread>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::fast_options;
using dlock::test::redis_server;

TEST(lock, is_reentrant_with_hold_counts_and_one_fencing_token) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::mutex m = c.make_mutex("reentrant");
    m.lock();
    const auto token = m.fencing_token();
    ASSERT_TRUE(token.has_value());
    m.lock();
    EXPECT_EQ(m.hold_count(), 2);
    EXPECT_EQ(m.fencing_token(), token);
    EXPECT_TRUE(m.is_held_by_this_thread());
    m.unlock();
    EXPECT_EQ(m.hold_count(), 1);
    EXPECT_TRUE(m.is_locked());
    m.unlock();
    EXPECT_EQ(m.hold_count(), 0);
    EXPECT_FALSE(m.is_locked());
    EXPECT_FALSE(m.fencing_token().has_value());
}

TEST(lock, fencing_tokens_strictly_increase_across_acquisitions_and_clients) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    std::uint64_t last = 0;
    for (int i = 0; i < 10; ++i) {
        auto& c = i % 2 ? a : b;
        dlock::mutex m = c.make_mutex("fenced");
        std::scoped_lock g(m);
        const auto t = m.fencing_token().value();
        EXPECT_GT(t, last);
        last = t;
    }
}

TEST(lock, unlock_by_a_non_owner_is_not_owner_and_leaves_the_lock_held) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client a(fast_options(s.url()));
    dlock::client b(fast_options(s.url()));
    dlock::mutex ma = a.make_mutex("owned");
    ma.lock();
    std::thread other([&] {
        dlock::mutex m = a.make_mutex("owned");
        std::error_code ec;
        m.unlock(ec);
        EXPECT_EQ(ec, errc::not_owner);
    });
    other.join();
    dlock::mutex mb = b.make_mutex("owned");
    try {
        mb.unlock();
        ADD_FAILURE() << "expected not_owner";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::not_owner);
    }
    EXPECT_TRUE(ma.is_held_by_this_thread());
    EXPECT_FALSE(mb.try_lock());
    ma.unlock();
}
