// The semaphore on Redis (redis/locks/semaphore/protocol.cpp): Redisson RPermitExpirableSemaphore's
// layout, scored on the server's clock and renewed by the watchdog. Redisson's own scripts
// (verbatim, redisson_scripts.hpp) run through a plain connection play a Java client sharing the
// semaphore; a holder that died (a permit written from outside, never renewed) is reclaimed once
// its expiry passes; a live holder's permit is re-scored and never lapses. What every backend
// promises of a semaphore is in the conformance suite (kind semaphore).
#include "redis/locks/lock_test_util.hpp"
#include "redisson_scripts.hpp"

#include <dlock/dlock.hpp>

#include <future>

namespace dlock::test {
namespace {

class redis_semaphore : public shared_redis_suite {
protected:
    static std::string timeouts(const std::string& n) { return "{" + n + "}:timeout"; }
    static std::string channel(const std::string& n) { return "redisson_sc:{" + n + "}"; }
    static std::int64_t server_ms() {
        const auto t = server().cli({"TIME"});
        const auto nl = t.find('\n');
        return std::stoll(t.substr(0, nl)) * 1000 + std::stoll(t.substr(nl + 1)) / 1000;
    }
    static acquire_options sem(unsigned permits, std::chrono::milliseconds wait) {
        return {.wait = wait, .kind = lock_kind::semaphore, .permits = permits};
    }
};

/// A Java client's permit id: 16 raw bytes (Redisson shows them as hex).
const std::string java_id("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10", 16);

std::string now_ms_text() {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count());
}

TEST_F(redis_semaphore, permits_live_in_redissons_layout_scored_on_the_server_clock) {
    auto a = connect();
    const std::string n = "sem-layout";
    auto l = a->acquire(n, sem(3, 0ms));
    ASSERT_TRUE(l) << a->last_error_detail();
    EXPECT_EQ(server().cli({"GET", n}), "2") << "the available count";
    EXPECT_EQ(server().cli({"ZCARD", timeouts(n)}), "1");
    const auto members = dlock::redis::command(*a, {"ZRANGE", timeouts(n), "0", "-1"});
    ASSERT_EQ(members.elements.size(), 1u);
    EXPECT_EQ(members.elements[0].str.size(), 16u) << "a 16-byte id, as Redisson's";
    // The id is raw bytes (a NUL among them): asked through the client, not redis-cli's argv.
    const auto expiry =
        std::stoll(dlock::redis::command(*a, {"ZSCORE", timeouts(n), members.elements[0].str}).str);
    const auto now = server_ms();
    EXPECT_GT(expiry, now) << "scored on the server's clock";
    EXPECT_LE(expiry, now + 300) << "now + the 300 ms watchdog lease";
    EXPECT_EQ(l.token(), std::optional<std::uint64_t>(1));
    EXPECT_EQ(server().cli({"GET", "dlock_semaphore_token:{" + n + "}"}), "1");
    l.release();
    EXPECT_EQ(server().cli({"GET", n}), "3");
    EXPECT_EQ(server().cli({"EXISTS", timeouts(n)}), "0");
}

TEST_F(redis_semaphore, redisson_and_dlock_share_one_semaphore) {
    auto d = connect(), java = connect();
    const std::string n = "sem-shared";
    // Redisson creates the semaphore of 2 and takes a permit with a 60 s lease (its clock).
    ASSERT_EQ(dlock::redis::command(*java, {"EVAL", redisson_semaphore_try_set_permits, "2", n,
                                            channel(n), "2", "PUBLISH"})
                  .integer,
              1);
    const auto expiry = std::to_string(std::stoll(now_ms_text()) + 60000);
    const auto took = dlock::redis::command(
        *java, {"EVAL", redisson_semaphore_acquire, "3", n, timeouts(n), channel(n), "1", expiry,
                now_ms_text(), "922337203685477", "PUBLISH", java_id});
    ASSERT_EQ(took.str, "OK");
    // dlock takes the second permit (its size argument does not change a semaphore that exists);
    // a third is refused.
    auto mine = d->acquire(n, sem(2, 0ms));
    ASSERT_TRUE(mine);
    EXPECT_FALSE(d->acquire(n, sem(2, 0ms))) << "two permits out of two";
    const auto full = dlock::redis::command(
        *java, {"EVAL", redisson_semaphore_acquire, "3", n, timeouts(n), channel(n), "1", expiry,
                now_ms_text(), "922337203685477", "PUBLISH", std::string(16, '\x7f')});
    EXPECT_EQ(full.str.substr(0, 1), ":") << "Redisson sees it full, with the earliest expiry";
    // A dlock waiter is woken by Redisson's release (it publishes the available count).
    auto waiter = std::async(std::launch::async, [&] { return d->acquire(n, sem(2, 10s)); });
    ASSERT_TRUE(eventually([&] { return sleeping_waiters(*d, channel(n)) == 1; }, 5s));
    EXPECT_EQ(dlock::redis::command(*java, {"EVAL", redisson_semaphore_release, "3", n, channel(n),
                                            timeouts(n), java_id, "1", now_ms_text(), "PUBLISH"})
                  .integer,
              1);
    auto second = waiter.get();
    ASSERT_TRUE(second) << "woken by Redisson's release";
    // dlock's releases show in Redisson's count.
    mine.release();
    second.release();
    const auto available =
        dlock::redis::command(*java, {"EVAL", redisson_semaphore_available, "3", n, timeouts(n),
                                      channel(n), now_ms_text(), "PUBLISH"});
    EXPECT_EQ(available.is_integer() ? std::to_string(available.integer) : available.str, "2");
}

TEST_F(redis_semaphore, a_dead_holders_permit_is_reclaimed_after_its_expiry) {
    auto d = connect();
    const std::string n = "sem-dead";
    // A holder that died: the only permit is out, scored to expire 400 ms from now on the
    // server's clock, and nobody renews it.
    server().cli({"SET", n, "0"});
    server().cli({"ZADD", timeouts(n), std::to_string(server_ms() + 400), "dead-holder-id!!"});
    EXPECT_FALSE(d->acquire(n, sem(1, 0ms)));
    const auto start = std::chrono::steady_clock::now();
    auto l = d->acquire(n, sem(1, 10s));
    ASSERT_TRUE(l) << "the waiter retries at the earliest expiry (no message comes)";
    EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms) << "not before it expired";
    EXPECT_EQ(server().cli({"ZSCORE", timeouts(n), "dead-holder-id!!"}), "") << "reclaimed";
}

TEST_F(redis_semaphore, a_live_holders_permit_is_renewed_and_never_lapses) {
    auto a = connect(), b = connect();
    const std::string n = "sem-live";
    auto l = a->acquire(n, sem(1, 0ms)); // a 300 ms lease, renewed every 100 ms
    ASSERT_TRUE(l);
    const auto id = dlock::redis::command(*a, {"ZRANGE", timeouts(n), "0", "0"}).elements.at(0).str;
    const auto first = std::stoll(dlock::redis::command(*a, {"ZSCORE", timeouts(n), id}).str);
    // Ten lease lengths later the permit is still this holder's, re-scored past the first expiry.
    EXPECT_FALSE(b->acquire(n, sem(1, 3s))) << "no lapse while renewals work";
    EXPECT_FALSE(l.lost());
    const auto later = std::stoll(dlock::redis::command(*a, {"ZSCORE", timeouts(n), id}).str);
    EXPECT_GT(later, first + 2000);
}

TEST_F(redis_semaphore, a_permit_taken_away_is_a_loss_and_status_counts_the_permits) {
    auto a = connect(), b = connect();
    const std::string n = "sem-status";
    auto one = a->acquire(n, sem(3, 0ms));
    auto two = b->acquire(n, sem(3, 0ms));
    ASSERT_TRUE(one && two);
    std::error_code ec;
    const auto st = b->inspect(n, lock_kind::semaphore, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(st.kind, "semaphore");
    EXPECT_EQ(st.detail, "2 of 3 permit(s) in use");
    EXPECT_EQ(st.contenders.size(), 2u);
    for (const auto& c : st.contenders)
        EXPECT_EQ(c.owner.size(), 32u) << "the id in hex";
    // A forced unlock frees every permit; the watchdog finds each holder's permit gone.
    EXPECT_TRUE(b->force_unlock(n, lock_kind::semaphore, ec));
    ASSERT_TRUE(eventually([&] { return one.lost() && two.lost(); }, 5s));
    EXPECT_EQ(server().cli({"GET", n}), "3");
    EXPECT_FALSE(a->acquire(n, {.wait = 0ms, .kind = lock_kind::semaphore, .permits = 0}, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
}

} // namespace
} // namespace dlock::test
