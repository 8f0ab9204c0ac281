// The log sink against real servers: the warnings it receives (a loss, a renewal failure, a
// reconnect, an eviction policy that can drop locks), the info line when CONFIG is disabled,
// nothing on stdout/stderr, and a canary: no record ever contains the password, an owner
// field (client id) or a simple lock's token.
#include "log_collector.hpp"
#include "test_util.hpp"

#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using dlock::test::collecting_sink;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_server;
using dlock::test::server_options;

namespace {

TEST(log_sink, warnings_never_contain_the_password_owner_or_token) {
    DLOCK_SKIP_WITHOUT_REDIS();
    const std::string password = "canary-Pa55word-7f3e9";
    redis_server s(
        server_options{.password = password, .extra_config = {"maxmemory-policy allkeys-lru"}});
    collecting_sink log;
    auto o = fast_options("redis://:" + password + "@127.0.0.1:" + std::to_string(s.port()));
    o.watchdog_lease = 300ms; // renewed every 100 ms
    o.command_timeout = 400ms;
    o.log.sink = log.sink();
    o.log.level = dlock::log_level::debug;

    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    std::string token, owner;
    {
        dlock::client c(o);
        // A simple lock (its owner is the secret token) lost by deletion.
        auto simple = c.acquire("canary-simple", {.wait = 1s, .kind = dlock::lock_kind::simple});
        ASSERT_TRUE(simple);
        token = s.cli({"GET", "canary-simple"});
        ASSERT_EQ(token.size(), 32u);
        // A reentrant lock (its owner field is "<client id>:<n>") lost by a stalled server.
        auto reentrant = c.acquire("canary-reentrant", {.wait = 1s});
        ASSERT_TRUE(reentrant);
        owner = s.cli({"HKEYS", "canary-reentrant"});
        ASSERT_NE(owner.find(c.id()), std::string::npos);
        s.cli({"DEL", "canary-simple"});
        ASSERT_TRUE(
            eventually([&] { return simple.lost() && log.has("warning", "lock lost"); }, 2s));
        std::thread sleeper([&] { s.cli({"DEBUG", "SLEEP", "1"}); });
        EXPECT_TRUE(eventually([&] { return reentrant.lost(); }, 2s));
        sleeper.join();
        EXPECT_TRUE(eventually(
            [&] {
                return log.has("warning", "lock renewal failed") &&
                       log.has("warning", "reconnected") && dlock::test::ping_ok(c);
            },
            3s))
            << log.all();
    }
    const auto out = testing::internal::GetCapturedStdout();
    const auto err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(out, "");
    EXPECT_EQ(err, "");

    EXPECT_TRUE(log.has("warning", "maxmemory-policy=allkeys-lru")) << log.all();
    EXPECT_TRUE(log.has("warning", "cause=gone")) << log.all();
    EXPECT_TRUE(log.has("warning", "cause=deadline")) << log.all();
    EXPECT_TRUE(log.has("warning", "lock=canary-simple")) << log.all();
    EXPECT_TRUE(log.has("warning", "connection lost, reconnecting")) << log.all();
    const auto id = owner.substr(0, 36);
    for (const auto& line : log.lines()) {
        EXPECT_EQ(line.find(password), std::string::npos) << line;
        EXPECT_EQ(line.find(token), std::string::npos) << line;
        EXPECT_EQ(line.find(id), std::string::npos) << line;
        EXPECT_EQ(line.find(token.substr(0, 16)), std::string::npos) << line;
    }
}

TEST(log_sink, noeviction_is_one_debug_line_and_nothing_above_it) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.extra_config = {"maxmemory-policy noeviction"}});
    collecting_sink log;
    auto o = fast_options(s.url());
    o.log.sink = log.sink();
    o.log.level = dlock::log_level::debug;
    dlock::client c(o);
    ASSERT_TRUE(eventually([&] { return log.has("debug", "noeviction"); }, 2s)) << log.all();
    EXPECT_EQ(log.lines().size(), 1u) << log.all();
}

TEST(log_sink, a_disabled_config_command_is_one_info_line) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.extra_config = {"rename-command CONFIG \"\""}});
    collecting_sink log;
    auto o = fast_options(s.url());
    o.log.sink = log.sink();
    dlock::client c(o);
    ASSERT_TRUE(eventually(
        [&] { return log.has("info", "could not check the server's maxmemory-policy"); }, 2s))
        << log.all();
    auto l = c.acquire("after", {.wait = 1s});
    EXPECT_TRUE(l);
    EXPECT_EQ(log.lines().size(), 1u) << log.all();
}

TEST(log_sink, a_client_started_before_its_server_still_checks_the_policy_once_it_is_up) {
    DLOCK_SKIP_WITHOUT_REDIS();
    const auto port = dlock::test::free_port();
    collecting_sink log;
    auto o = fast_options("redis://127.0.0.1:" + std::to_string(port));
    o.connect_timeout = 100ms;
    o.command_timeout = 100ms;
    o.log.sink = log.sink();
    dlock::client c(o);
    std::this_thread::sleep_for(300ms); // not synchronisation: lets the check's budget pass once
    redis_server s(server_options{.extra_config = {"maxmemory-policy volatile-lru"}, .port = port});
    EXPECT_TRUE(eventually([&] { return log.has("warning", "maxmemory-policy=volatile-lru"); }, 3s))
        << log.all();
}

TEST(log_sink, records_below_the_level_are_not_delivered_and_a_throwing_sink_is_harmless) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.extra_config = {"maxmemory-policy noeviction"}});
    std::atomic<int> calls{0};
    auto o = fast_options(s.url());
    o.log.level = dlock::log_level::warning;
    o.log.sink = [&](const dlock::log_record&) {
        ++calls;
        throw std::runtime_error("sink failure");
    };
    dlock::client c(o);
    ASSERT_TRUE(dlock::test::ping_ok(c));
    s.cli({"CLIENT", "KILL", "TYPE", "normal"}); // a warning: the sink throws, nothing breaks
    EXPECT_TRUE(eventually([&] { return calls.load() >= 1 && dlock::test::ping_ok(c); }, 3s));
    auto l = c.acquire("still-works", {.wait = 1s});
    EXPECT_TRUE(l);
}

} // namespace
