// A server that answers wrongly (reliability.md §7.4: B06, B09, B10, B11), played by the fake
// RESP server, which records every command it receives: acquisitions end in a typed error
// within their bound, with a bounded number of requests, and are never reported as acquired
// unless the exact success reply of that request was read.
#include "fake_resp_server.hpp"
#include "test_util.hpp"

#include <asio/use_future.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::fake_resp_server;
using dlock::test::fast_options;
using action = fake_resp_server::action;

namespace {

using clock_type = std::chrono::steady_clock;

/// The first word of every command the fake server received, in arrival order (all
/// connections), for asserting what the client sent.
class recorder {
public:
    void add(const std::vector<std::string>& cmd) {
        std::lock_guard lk(mu_);
        names_.push_back(cmd.empty() ? std::string() : cmd[0]);
    }
    std::vector<std::string> names() const {
        std::lock_guard lk(mu_);
        return names_;
    }
    long count(const std::string& name) const {
        std::lock_guard lk(mu_);
        return std::count(names_.begin(), names_.end(), name);
    }
    /// Commands other than the listed ones, joined by spaces (empty when there are none).
    std::string others(std::initializer_list<std::string> allowed) const {
        std::string out;
        for (const auto& n : names())
            if (std::find(allowed.begin(), allowed.end(), n) == allowed.end()) out += n + " ";
        return out;
    }

private:
    mutable std::mutex mu_;
    std::vector<std::string> names_;
};

/// A client of `f` whose connection is up (the handshake done), so that what follows does not
/// depend on whether the first command raced the connect.
dlock::client connected_client(const fake_resp_server& f) {
    dlock::client c(fast_options(f.url()));
    EXPECT_TRUE(dlock::test::eventually([&] { return dlock::test::ping_ok(c); }, 5s));
    return c;
}

/// A fake server that records every command in `seen` and answers it by its first word from
/// `answers`, any other command with `otherwise`.
fake_resp_server answering(recorder& seen, std::map<std::string, std::string> answers,
                           std::string otherwise) {
    return fake_resp_server([&seen, answers = std::move(answers), otherwise = std::move(otherwise)](
                                const std::vector<std::string>& cmd) {
        seen.add(cmd);
        const auto it = cmd.empty() ? answers.end() : answers.find(cmd[0]);
        return action{.bytes = it == answers.end() ? otherwise : it->second};
    });
}

} // namespace

TEST(bad_server, a_server_that_always_answers_noscript_gives_no_script_after_one_eval) {
    // B11: every EVALSHA and every EVAL is refused with NOSCRIPT. The library falls back to
    // EVAL once per attempt, then reports errc::no_script: never acquired, never a loop.
    recorder seen;
    auto f = answering(seen, {{"PING", "+PONG\r\n"}},
                       "-NOSCRIPT No matching script. Please use EVAL.\r\n");
    auto c = connected_client(f);
    for (const auto kind : {dlock::lock_kind::reentrant, dlock::lock_kind::fair}) {
        const long before = seen.count("EVALSHA") + seen.count("EVAL");
        std::error_code ec;
        const auto t0 = clock_type::now();
        const auto l = c.acquire("b11", {.wait = 2s, .kind = kind}, ec);
        const auto took = clock_type::now() - t0;
        EXPECT_FALSE(l);
        EXPECT_EQ(ec, errc::no_script) << ec.message();
        EXPECT_LT(took, 2s + 1s); // the wait plus one command timeout
        EXPECT_EQ(seen.count("EVALSHA") + seen.count("EVAL") - before, 2)
            << "one EVALSHA and one EVAL per acquisition";
    }
    // The pipelined connection's path (async), the same.
    const long before = seen.count("EVALSHA") + seen.count("EVAL");
    auto fut = c.async_acquire("b11-async", {.wait = 2s}, asio::use_future);
    ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
    try {
        EXPECT_FALSE(fut.get()) << "acquired from a NOSCRIPT reply";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), errc::no_script) << e.what();
    }
    EXPECT_EQ(seen.count("EVALSHA") + seen.count("EVAL") - before, 2);
    EXPECT_EQ(seen.count("EVALSHA"), seen.count("EVAL"));
    EXPECT_EQ(seen.others({"PING", "EVALSHA", "EVAL"}), "");
}

TEST(bad_server, a_killed_or_unkillable_acquire_script_is_a_typed_error_and_keeps_the_connection) {
    // B10: the acquire script's reply is a script error. A killed script wrote nothing (Redis
    // refuses SCRIPT KILL once a script wrote): a definite failure, errc::server_error.
    // UNKILLABLE (the server is stuck in a script that wrote) is errc::server_busy. Either
    // way: not acquired, no release sent (the outcome is known), and an error reply is a
    // well-formed reply, so the connection is kept.
    const std::pair<const char*, errc> cases[] = {
        {"-ERR Script killed by user with SCRIPT KILL... script: 1f0, on @user_script:1.\r\n",
         errc::server_error},
        {"-UNKILLABLE Sorry the script already executed write commands against the dataset.\r\n",
         errc::server_busy},
    };
    for (const auto& [reply, code] : cases) {
        recorder seen;
        auto f = answering(seen, {{"PING", "+PONG\r\n"}}, reply);
        auto c = connected_client(f);
        ASSERT_TRUE(dlock::test::ping_ok(c)); // the sync lane, if used, is open now too
        const int connections = f.connections();
        for (int round = 0; round < 2; ++round) {
            std::error_code ec;
            EXPECT_FALSE(c.acquire("b10", {.wait = 0ms}, ec)) << reply;
            EXPECT_EQ(ec, code) << reply << ec.message();
            EXPECT_TRUE(dlock::test::ping_ok(c)) << reply;
        }
        std::error_code ec;
        auto fut = c.async_acquire("b10-async", {.wait = 0ms}, asio::use_future);
        ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
        try {
            EXPECT_FALSE(fut.get()) << reply;
        } catch (const std::system_error& e) {
            ec = e.code();
        }
        EXPECT_EQ(ec, code) << reply;
        EXPECT_TRUE(dlock::test::ping_ok(c)) << reply;
        EXPECT_EQ(f.connections(), connections) << reply << ": a connection was dropped";
        EXPECT_EQ(seen.count("EVALSHA"), 3) << reply; // one per acquisition, nothing released
        EXPECT_EQ(seen.others({"PING", "EVALSHA"}), "") << reply;
    }
}

TEST(bad_server, protected_mode_denied_at_the_handshake_is_auth_failed_and_nothing_follows) {
    // B09: Redis in protected mode writes -DENIED to a non-loopback client and closes. dlock
    // reads it as the reply to HELLO: errc::auth_failed (the server refuses this client
    // whatever it sends; sticky, so later calls fail at once), and sends no command after it.
    recorder seen;
    fake_resp_server f(
        [&](const std::vector<std::string>& cmd) {
            seen.add(cmd);
            return action{.bytes = "-DENIED Redis is running in protected mode because protected "
                                   "mode is enabled and no password is set for the default user."
                                   " In this mode connections are only accepted from the "
                                   "loopback interface.\r\n",
                          .close = true};
        },
        fake_resp_server::handshake::scripted);
    auto o = fast_options(f.url());
    o.password = "CANARY-b09-7f3a"; // must appear in no message
    dlock::client c(o);
    std::error_code ec;
    const auto t0 = clock_type::now();
    EXPECT_FALSE(c.acquire("b09", {.wait = 2s}, ec));
    EXPECT_EQ(ec, errc::auth_failed) << ec.message();
    EXPECT_LT(clock_type::now() - t0, 2s); // the connect timeout is 1 s
    const std::string_view ping[] = {"PING"};
    dlock::redis::command(c, ping, ec);
    EXPECT_EQ(ec, errc::auth_failed);
    try {
        dlock::redis::command(c, {"SET", "k", "v"});
        ADD_FAILURE() << "expected dlock::error";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::auth_failed);
        EXPECT_EQ(std::string(e.what()).find("CANARY"), std::string::npos) << e.what();
    }
    const auto detail = c.last_error_detail();
    EXPECT_NE(detail.find("DENIED"), std::string::npos) << detail;
    EXPECT_EQ(detail.find("CANARY"), std::string::npos) << detail;
    EXPECT_GE(seen.count("HELLO"), 1);
    EXPECT_EQ(seen.others({"HELLO"}), "") << "a command was sent after a refused handshake";
}

TEST(bad_server, a_push_is_never_taken_as_the_reply_of_a_pending_command) {
    // B06: a RESP3 push (`>`) on a connection that subscribed to nothing, shaped like a grant,
    // arrives before the acquire script's real reply (held) and after a PING's reply. RESP3
    // says a push is never a reply: the next non-push reply answers the pending command. So
    // the acquisition is refused (held), never acquired with the push's "token".
    recorder seen;
    auto f = answering(seen,
                       {{"PING", "+PONG\r\n>2\r\n:1\r\n:7\r\n"},
                        {"SET", ">2\r\n+OK\r\n+OK\r\n_\r\n"},
                        {"PTTL", ">1\r\n:1\r\n:500\r\n"}},
                       ">2\r\n:1\r\n:7\r\n*2\r\n:0\r\n:500\r\n"); // EVALSHA: held
    auto c = connected_client(f);
    for (int round = 0; round < 3; ++round) {
        std::error_code ec;
        EXPECT_FALSE(c.acquire("b06", {.wait = 0ms}, ec)) << "a push was taken as the reply";
        EXPECT_FALSE(ec) << ec.message();
        EXPECT_FALSE(c.acquire("b06-simple", {.wait = 0ms, .kind = dlock::lock_kind::simple}, ec))
            << "a push was taken as the reply";
        EXPECT_FALSE(ec) << ec.message();
        EXPECT_TRUE(dlock::test::ping_ok(c));
        auto fut = c.async_acquire("b06-async", {.wait = 0ms}, asio::use_future);
        ASSERT_EQ(fut.wait_for(5s), std::future_status::ready);
        EXPECT_FALSE(fut.get()) << "a push was taken as the reply";
    }
    EXPECT_EQ(seen.others({"PING", "EVALSHA", "SET", "PTTL"}), "");
}

TEST(bad_server, a_second_reply_to_one_command_is_never_attributed_to_the_next) {
    // B06: a desynchronised server answers PING twice (+PONG, then a stray +OK, in one
    // segment). The stray reply must never answer the next command: here a simple-lock SET
    // NX, for which +OK is the grant while the server's real answer is nil (held). With the
    // shared connection up and idle, the blocking calls take the sync lane, which kept the
    // stray bytes for its next call until the lane learnt to close itself on them.
    recorder seen;
    auto f = answering(
        seen, {{"PING", "+PONG\r\n+OK\r\n"}, {"ECHO", "$2\r\nhi\r\n"}, {"PTTL", ":500\r\n"}},
        "_\r\n"); // SET ... NX: held by someone else
    dlock::client c(fast_options(f.url()));
    const std::string_view echo[] = {"ECHO", "hi"};
    ASSERT_TRUE(dlock::test::eventually(
        [&] {
            std::error_code ec;
            return dlock::redis::command(c, echo, ec).str == "hi" && !ec;
        },
        5s));
    const int rounds = 5;
    for (int round = 0; round < rounds; ++round) {
        std::error_code ec;
        const std::string_view ping[] = {"PING"};
        EXPECT_EQ(dlock::redis::command(c, ping, ec).str, "PONG") << ec.message();
        EXPECT_FALSE(c.acquire("b06-stray", {.wait = 0ms, .kind = dlock::lock_kind::simple}, ec))
            << "round " << round << ": the stray +OK was taken as the grant";
        EXPECT_FALSE(ec) << ec.message();
    }
    // Each stray reply closed the connection that read it (the next call opened another).
    EXPECT_GE(f.connections(), 1 + rounds);
    EXPECT_EQ(seen.others({"ECHO", "PING", "SET", "PTTL"}), "");
}
