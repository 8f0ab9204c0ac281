// Scripts and arguments against a real redis-server: script SHA-1 names, SCRIPT FLUSH mid
// run, the release script's unlock latch, and invalid lock names and leases.
#include "lock_test_util.hpp"
#include "redis/scripts.hpp"

#include <mutex>
#include <string>
#include <system_error>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::fast_options;
using dlock::test::redis_server;

TEST(lock, every_script_is_named_by_the_sha1_redis_computes) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    // A wrong digest would still work (NOSCRIPT, then EVAL) but resend every script's text.
    for (int i = 0; i < static_cast<int>(dlock::detail::script_id::count_); ++i) {
        const auto& sc = dlock::detail::get_script(static_cast<dlock::detail::script_id>(i));
        const auto v = dlock::redis::command(c, {"SCRIPT", "LOAD", std::string(sc.text)});
        EXPECT_EQ(v.str, sc.sha) << "script " << i;
    }
}

TEST(lock, script_flush_mid_run_is_survived) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    dlock::mutex m = c.make_mutex("flush");
    for (int i = 0; i < 20; ++i) {
        if (i % 5 == 0) s.cli({"SCRIPT", "FLUSH"});
        std::scoped_lock g(m);
    }
    EXPECT_FALSE(m.is_locked());
}

TEST(lock, invalid_names_and_leases_are_rejected) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    for (const char* bad : {"", "a{}b"}) {
        try {
            auto m = c.make_mutex(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const dlock::error& e) {
            EXPECT_EQ(e.code(), errc::invalid_argument);
        }
    }
    dlock::mutex m = c.make_mutex("ok");
    std::error_code ec;
    EXPECT_FALSE(m.try_lock_for(10ms, dlock::fixed_lease{0ms}, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    c.acquire("ok", {.lease = -5ms}, ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    c.acquire("ok", {.retry = dlock::retry_policy{.attempts = 0}}, ec);
    EXPECT_EQ(ec, errc::invalid_argument);
}

TEST(lock, the_release_script_with_an_unlock_latch_answers_a_repeated_request_the_same) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const std::string text(
        dlock::detail::get_script(dlock::detail::script_id::reentrant_release).text);
    dlock::redis::command(c, {"HSET", "latched", "owner:1", "2"});
    const auto release = [&](const std::string& latch) {
        return dlock::redis::command(c, {"EVAL", text, "3", "latched",
                                         "redisson_lock__channel:{latched}", latch, "0", "30000",
                                         "owner:1", "PUBLISH", "30000"});
    };
    const std::string l1 = "redisson_unlock_latch:{latched}:1";
    const std::string l2 = "redisson_unlock_latch:{latched}:2";
    EXPECT_EQ(release(l1).integer, 0); // 2 -> 1, still held
    EXPECT_EQ(dlock::redis::command(c, {"HGET", "latched", "owner:1"}).str, "1");
    EXPECT_EQ(release(l1).integer, 0); // the same request again: latched answer, no decrement
    EXPECT_EQ(dlock::redis::command(c, {"HGET", "latched", "owner:1"}).str, "1");
    const auto final_release = release(l2); // 1 -> 0: deleted and published to nobody
    ASSERT_TRUE(final_release.is_integer());
    EXPECT_EQ(final_release.integer, 1); // 1 + receivers
    EXPECT_EQ(dlock::redis::command(c, {"EXISTS", "latched"}).integer, 0);
    EXPECT_EQ(release(l2).integer, 1); // repeated: still "released", nothing else happens
    EXPECT_GT(std::stoll(s.cli({"PTTL", l2})), 0);
    EXPECT_TRUE(release("redisson_unlock_latch:{latched}:3").is_null()); // not the owner
}
