// Blocking calls on the calling thread (blocking_io::caller_thread, net::sync_lane): used only
// when the shared connection is idle, same outcomes as the pipelined path, shut down promptly.
#include "redis/client.hpp"
#include "redis/net/sync_lane.hpp"
#include "test_util.hpp"

#include <atomic>
#include <sstream>
#include <thread>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::ping_ok;
using dlock::test::redis_server;

namespace {

/// How many connections on `s` carry the client name `name`.
int connections_named(const redis_server& s, const std::string& name) {
    std::istringstream list(s.cli({"CLIENT", "LIST"}));
    int n = 0;
    for (std::string line; std::getline(list, line);)
        if (line.find(" name=" + name + " ") != std::string::npos) ++n;
    return n;
}

/// Two PINGs: the first connects the shared connection, the second opens the side connection.
/// True when the second went through it.
bool lane_opened(dlock::client& c) {
    return ping_ok(c) && ping_ok(c) && dlock::detail::access::impl(c)->router().any().lane() &&
           dlock::detail::access::impl(c)->router().any().lane()->calls() > 0;
}

dlock::client_options named(const redis_server& s, std::string name, dlock::blocking_io io) {
    auto o = fast_options(s.url());
    o.client_name = std::move(name);
    o.sync_io = io;
    return o;
}

} // namespace

TEST(sync_lane, blocking_calls_open_one_side_connection_only_in_caller_thread_mode) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client lane(named(s, "lane-on", dlock::blocking_io::caller_thread));
    dlock::client plain(named(s, "lane-off", dlock::blocking_io::io_thread));
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(dlock::redis::command(lane, {"PING"}).str, "PONG");
        EXPECT_EQ(dlock::redis::command(plain, {"PING"}).str, "PONG");
    }
    // The shared connection plus the side connection, which is reused call after call.
    EXPECT_EQ(connections_named(s, "lane-on"), 2);
    EXPECT_EQ(connections_named(s, "lane-off"), 1);
}

TEST(sync_lane, a_blocking_call_never_overtakes_the_same_threads_async_commands) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    // The SETs travel on the shared connection, the second queued behind a 1 MiB write; the
    // GET issued right after them must see it, so it may not take the side connection while
    // anything is queued or in flight there.
    const std::string big(1 << 20, 'x');
    for (int i = 0; i < 50; ++i) {
        dlock::redis::async_command(c, {"SET", "big", big}, [](std::error_code, auto&&) {});
        dlock::redis::async_command(c, {"SET", "order", std::to_string(i)},
                                    [](std::error_code, auto&&) {});
        ASSERT_EQ(dlock::redis::command(c, {"GET", "order"}).str, std::to_string(i))
            << "iteration " << i;
    }
}

TEST(sync_lane, a_call_past_its_deadline_is_ambiguous_and_the_next_call_works) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    auto o = fast_options(s.url());
    o.command_timeout = 300ms;
    dlock::client c(o);
    ASSERT_TRUE(ping_ok(c)); // connected and idle: the next call takes the side connection
    std::error_code ec;
    const std::string_view sleep[] = {"DEBUG", "SLEEP", "1"};
    const auto t0 = std::chrono::steady_clock::now();
    dlock::redis::command(c, sleep, ec);
    EXPECT_EQ(ec, errc::ambiguous);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 900ms);
    EXPECT_TRUE(eventually([&] { return ping_ok(c); }, 5s));
}

TEST(sync_lane, a_restarted_server_is_reached_again_through_both_connections) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(named(s, "lane-restart", dlock::blocking_io::caller_thread));
    ASSERT_TRUE(lane_opened(c));
    ASSERT_EQ(connections_named(s, "lane-restart"), 2);
    s.kill();
    s.start();
    EXPECT_TRUE(eventually([&] { return ping_ok(c); }, 5s));
    // The side connection is reopened lazily, after the shared one is back and idle.
    EXPECT_TRUE(
        eventually([&] { return ping_ok(c) && connections_named(s, "lane-restart") == 2; }, 5s));
}

TEST(sync_lane, shutdown_cancels_a_call_blocked_in_the_server) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    ASSERT_TRUE(ping_ok(c));
    auto& impl = *dlock::detail::access::impl(c);
    dlock::net::sync_lane lane(impl.options());
    std::error_code ec;
    dlock::net::sync_lane::result r{};
    std::thread t([&] {
        const std::string_view blpop[] = {"BLPOP", "never", "10"};
        dlock::resp3::value out;
        r = lane.call(impl.router().any().conn(), blpop, {}, std::chrono::steady_clock::now() + 20s,
                      out, ec);
    });
    const bool blocked = eventually(
        [&] {
            return s.cli({"CLIENT", "LIST"}).find("cmd=blpop") != std::string::npos;
        },
        5s);
    const auto t0 = std::chrono::steady_clock::now();
    lane.shutdown();
    t.join();
    ASSERT_TRUE(blocked);
    EXPECT_EQ(r, dlock::net::sync_lane::result::done);
    EXPECT_EQ(ec, errc::cancelled);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
    // Not taken any more after shutdown: the caller would use the shared connection.
    dlock::resp3::value out;
    const std::string_view ping[] = {"PING"};
    EXPECT_EQ(lane.call(impl.router().any().conn(), ping, {}, std::chrono::steady_clock::now() + 1s,
                        out, ec),
              dlock::net::sync_lane::result::not_taken);
}

TEST(sync_lane, locks_exclude_and_fence_the_same_in_both_modes) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    for (auto io : {dlock::blocking_io::caller_thread, dlock::blocking_io::io_thread}) {
        auto o = fast_options(s.url());
        o.sync_io = io;
        dlock::client c(o);
        const std::string name = io == dlock::blocking_io::io_thread ? "io" : "caller";
        std::atomic<int> inside{0}, overlaps{0};
        std::atomic<std::uint64_t> last_token{0};
        std::atomic<bool> tokens_increase{true};
        std::vector<std::thread> ts;
        for (int t = 0; t < 4; ++t)
            ts.emplace_back([&] {
                dlock::mutex m = c.make_mutex(name);
                for (int i = 0; i < 50; ++i) {
                    std::scoped_lock g(m);
                    if (inside.fetch_add(1) != 0) ++overlaps;
                    const auto tok = *m.fencing_token();
                    if (tok <= last_token) tokens_increase = false;
                    last_token = tok;
                    inside.fetch_sub(1);
                }
            });
        for (auto& t : ts)
            t.join();
        EXPECT_EQ(overlaps.load(), 0) << name;
        EXPECT_TRUE(tokens_increase.load()) << name;
        EXPECT_EQ(last_token.load(), 200u) << name; // one INCR per fresh acquisition
        dlock::redis::command(c, {"DEL", "redisson_lock_token:{" + name + "}"});
    }
}

// While a waiter of this client waits, a first acquisition attempt keeps off the side
// connection (it must not pass the waiter, whom the I/O thread is about to wake), but a plain
// blocking command takes it: it competes with no waiter, and the lane still waits for the
// shared connection to be idle, so it passes none of its own thread's commands. (Until
// 2026-11-28 commands kept off the lane too; a one-client C's GET and SET then went through
// the I/O thread, BENCHMARKS.md.)
TEST(sync_lane, commands_take_the_lane_while_a_waiter_waits_but_first_attempts_do_not) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client holder_client(fast_options(s.url()));
    dlock::client c(fast_options(s.url()));
    ASSERT_TRUE(lane_opened(c));
    const auto* lane = dlock::detail::access::impl(c)->router().any().lane();

    dlock::mutex held = holder_client.make_mutex("busy");
    held.lock();
    dlock::test::blocked_waiter waiter(c, "busy");
    ASSERT_TRUE(eventually(
        [&] { return dlock::test::one_subscriber(s, "redisson_lock__channel:{busy}"); }, 5s));
    const auto before = lane->calls(); // includes the waiter's refused first attempt
    EXPECT_EQ(dlock::redis::command(c, {"PING"}).str, "PONG");
    EXPECT_EQ(lane->calls(), before + 1) << "a command takes the lane";
    dlock::mutex other = c.make_mutex("free");
    ASSERT_TRUE(other.try_lock());
    EXPECT_EQ(lane->calls(), before + 1) << "a first attempt does not, while a waiter waits";
    held.unlock();
    waiter.join();
    ASSERT_TRUE(waiter.acquired.load());
    other.unlock();
}

TEST(sync_lane, a_killed_side_connection_is_noticed_before_use_and_replaced) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    ASSERT_TRUE(lane_opened(c));
    const auto* lane = dlock::detail::access::impl(c)->router().any().lane();
    const auto calls = lane->calls();
    const auto lane_id =
        dlock::redis::command(c, {"CLIENT", "ID"}).integer; // asked on the side connection
    ASSERT_EQ(lane->calls(), calls + 1);
    ASSERT_EQ(s.cli({"CLIENT", "KILL", "ID", std::to_string(lane_id)}), "1");
    // The next call sees the closed socket before writing, reconnects, and answers.
    EXPECT_EQ(dlock::redis::command(c, {"PING"}).str, "PONG");
    EXPECT_NE(dlock::redis::command(c, {"CLIENT", "ID"}).integer, lane_id);
    EXPECT_EQ(lane->calls(), calls + 3);
}

TEST(sync_lane, a_side_connection_killed_during_a_call_is_ambiguous) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    ASSERT_TRUE(lane_opened(c));
    const auto lane_id = dlock::redis::command(c, {"CLIENT", "ID"}).integer;
    std::error_code ec;
    std::thread t([&] {
        const std::string_view blpop[] = {"BLPOP", "never", "0.9"};
        dlock::redis::command(c, blpop, ec);
    });
    const bool blocked = eventually(
        [&] {
            return s.cli({"CLIENT", "LIST"}).find("cmd=blpop") != std::string::npos;
        },
        5s);
    s.cli({"CLIENT", "KILL", "ID", std::to_string(lane_id)});
    t.join();
    ASSERT_TRUE(blocked);
    // Written, and the connection closed before a reply: the outcome is unknown.
    EXPECT_EQ(ec, errc::ambiguous);
    EXPECT_TRUE(ping_ok(c));
}

TEST(sync_lane, the_side_connection_authenticates_selects_the_database_and_works_over_unix) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(dlock::test::server_options{.acl_lines = {"user app on >pw ~* +@all"}});
    for (const std::string& url : {"redis://app:pw@127.0.0.1:" + std::to_string(s.port()) + "/3",
                                   "unix://" + s.unix_socket() + "?db=4"}) {
        dlock::client c(fast_options(url));
        ASSERT_TRUE(ping_ok(c)) << url;
        const auto* lane = dlock::detail::access::impl(c)->router().any().lane();
        const auto calls = lane->calls();
        EXPECT_TRUE(dlock::redis::command(c, {"SET", "lane-db", url}).is_ok());
        EXPECT_EQ(lane->calls(), calls + 1) << url; // it went through the side connection
        const std::string db = url.starts_with("unix") ? "4" : "3";
        EXPECT_EQ(s.cli({"-n", db, "GET", "lane-db"}), url);
        EXPECT_EQ(dlock::redis::command(c, {"ACL", "WHOAMI"}).str,
                  url.starts_with("unix") ? "default" : "app");
    }
}
