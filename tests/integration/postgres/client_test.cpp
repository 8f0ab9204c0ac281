// The PostgreSQL backend behind the public types: dlock::client("postgresql://..."), lease
// handles, thread-bound lock objects with local re-entry, inspect/list, Redis-only calls.
#include "pg_test_util.hpp"

#include <dlock/client.hpp>
#include <dlock/mutex.hpp>

#include <future>
#include <thread>

namespace dlock::test {
namespace {

class PgClient : public pg_suite {};

TEST_F(PgClient, LeasesThroughDlockClient) {
    dlock::client c(server().url());
    EXPECT_EQ(c.backend_name(), "postgresql");
    auto l = c.acquire("client:lease", {.wait = 5s});
    ASSERT_TRUE(l);
    ASSERT_TRUE(l.token());
    EXPECT_GT(l.valid_until(), std::chrono::steady_clock::now());
    dlock::client other(server().url());
    EXPECT_FALSE(other.acquire("client:lease", {.wait = 0ms}));
    std::error_code ec;
    auto st = other.inspect("client:lease", lock_kind::reentrant, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(st.exists);
    EXPECT_EQ(other.list("client:*", ec).size(), 1U);
    const auto token = *l.token();
    l.release();
    auto next = other.acquire("client:lease", {.wait = 0ms});
    ASSERT_TRUE(next);
    EXPECT_GT(*next.token(), token);
    auto shed = other.acquire("client-shed", {.wait = 0ms, .kind = lock_kind::shedlock});
    EXPECT_TRUE(shed);
}

TEST_F(PgClient, MutexCountsReentryLocallyAndExcludesOtherClients) {
    dlock::client a(server().url()), b(server().url());
    auto m = a.make_mutex("client:mutex");
    m.lock();
    m.lock(); // re-entry: counted here, one session on the server
    EXPECT_EQ(granted(), 1);
    auto n = b.make_mutex("client:mutex");
    auto other = std::async(std::launch::async, [&] { return n.try_lock_for(200ms); });
    EXPECT_FALSE(other.get());
    m.unlock();
    EXPECT_EQ(granted(), 1); // still held once
    m.unlock();
    auto again = std::async(std::launch::async, [&] {
        const bool ok = n.try_lock_for(5s);
        if (ok) n.unlock();
        return ok;
    });
    EXPECT_TRUE(again.get());
}

TEST_F(PgClient, RedisOnlyCallsAreUnsupported) {
    dlock::client c(server().url());
    std::error_code ec;
    const std::string_view ping[] = {"PING"};
    c.command(ping, ec);
    EXPECT_EQ(ec, errc::unsupported);
}

TEST_F(PgClient, BadUrlsAreConfigurationErrors) {
    try {
        dlock::client c(server().url("dlock_key=nope"));
        FAIL() << "accepted a bad dlock_key";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::configuration_error);
        EXPECT_EQ(std::string(e.what()).find(pg_server::password()), std::string::npos);
    }
}

} // namespace
} // namespace dlock::test
