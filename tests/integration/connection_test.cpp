// The RESP client against real servers (and the fake server for protocol faults): pipelining,
// async forms, scripts, reconnects, authentication, ACL, TLS.
#include "fake_resp_server.hpp"
#include "redis/client_impl.hpp"
#include "redis/net/connection.hpp"
#include "test_util.hpp"

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <future>
#include <thread>

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::fake_resp_server;
using dlock::test::fast_options;
using dlock::test::redis_server;
using dlock::test::server_options;

TEST(connection, commands_round_trip_and_error_replies_are_values) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    EXPECT_EQ(c.command({"PING"}).str, "PONG");
    EXPECT_TRUE(c.command({"SET", "k", "v"}).is_ok());
    EXPECT_EQ(c.command({"GET", "k"}).str, "v");
    EXPECT_TRUE(c.command({"GET", "missing"}).is_null());
    const auto err = c.command({"INCR", "k"});
    ASSERT_TRUE(err.is_error());
    EXPECT_EQ(dlock::classify_server_error(err.str), errc::server_error);
    EXPECT_EQ(c.command({"CLIENT", "GETNAME"}).str, "dlock"); // set by HELLO ... SETNAME
    const auto wrongtype = c.command({"HGET", "k", "f"});
    ASSERT_TRUE(wrongtype.is_error());
    EXPECT_EQ(wrongtype.str.rfind("WRONGTYPE", 0), 0u);
}

TEST(connection, binary_safe_arguments_survive_the_round_trip) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const std::string value("a\r\nb\0c$*", 9);
    c.command({"SET", "bin", value});
    EXPECT_EQ(c.command({"GET", "bin"}).str, value);
    c.command({"SET", "", ""});
    EXPECT_EQ(c.command({"GET", ""}).str, "");
}

TEST(connection, replies_match_their_commands_under_many_threads) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 1000; ++i) {
                const auto key = "t" + std::to_string(t) + ":" + std::to_string(i % 7);
                const auto val = std::to_string(t * 100000 + i);
                if (!c.command({"SET", key, val}).is_ok()) ++mismatches;
                if (c.command({"GET", key}).str != val) ++mismatches;
            }
        });
    for (auto& th : threads)
        th.join();
    EXPECT_EQ(mismatches.load(), 0);
}

TEST(connection, async_commands_complete_with_callback_future_and_awaitable) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));

    std::promise<std::string> p;
    c.async_command({"PING"}, [&](std::error_code ec, dlock::resp3::value v) {
        p.set_value(ec ? ec.message() : v.str);
    });
    auto f1 = p.get_future();
    ASSERT_EQ(f1.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f1.get(), "PONG");

    auto f2 = c.async_command({"ECHO", "hi"}, asio::use_future);
    ASSERT_EQ(f2.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f2.get().str, "hi");

    asio::io_context io;
    std::string got;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            std::vector<std::string> cmd{"ECHO", "co"};
            auto v = co_await c.async_command(std::move(cmd), asio::use_awaitable);
            got = v.str;
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    io.run_for(5s);
    EXPECT_EQ(got, "co");
}

TEST(connection, scripts_fall_back_to_eval_after_script_flush) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    EXPECT_TRUE(dlock::fenced_set(c, "res", "res:fence", 5, "a")); // cold cache: NOSCRIPT -> EVAL
    EXPECT_TRUE(dlock::fenced_set(c, "res", "res:fence", 6, "b")); // warm cache: EVALSHA
    s.cli({"SCRIPT", "FLUSH"});
    EXPECT_FALSE(dlock::fenced_set(c, "res", "res:fence", 4, "stale"));
    EXPECT_EQ(s.cli({"GET", "res"}), "b");
}

TEST(connection, a_killed_server_fails_commands_within_the_timeout_then_recovers) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    ASSERT_EQ(c.command({"PING"}).str, "PONG");
    s.kill();
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    c.command(std::vector<std::string_view>{"PING"}, ec);
    EXPECT_TRUE(ec == errc::ambiguous || ec == errc::timeout || ec == errc::unavailable)
        << ec.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
    s.start();
    EXPECT_TRUE(dlock::test::eventually([&] { return dlock::test::ping_ok(c); }, 10s));
}

TEST(connection, client_kill_is_survived) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    ASSERT_EQ(c.command({"PING"}).str, "PONG");
    s.cli({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
    EXPECT_TRUE(dlock::test::eventually([&] { return dlock::test::ping_ok(c); }, 10s));
}

TEST(connection, a_handler_never_runs_inside_its_initiating_call) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.password = "right"});
    auto o = fast_options(s.url());
    o.password = "right";
    dlock::client good(o);
    o.password = "wrong";
    dlock::client bad(o);
    std::error_code ec;
    const std::string_view ping[] = {"PING"};
    bad.command(ping, ec);
    ASSERT_EQ(ec, errc::auth_failed); // from now on requests fail at once, inside submit()
    // Initiate from each client's I/O thread, as a handler in a chain would, and record whether
    // the handler ran before the initiating call returned.
    const auto initiate = [](dlock::client& c) {
        auto returned = std::make_shared<std::atomic<bool>>(false);
        std::promise<std::pair<bool, std::error_code>> seen;
        auto f = seen.get_future();
        asio::post(dlock::detail::access::impl(c)->io(), [&c, returned, &seen] {
            c.async_command({"PING"}, [returned, &seen](std::error_code e, dlock::resp3::value) {
                seen.set_value({returned->load(), e});
            });
            returned->store(true);
        });
        return f.get();
    };
    const auto [after_failure, failure] = initiate(bad);
    EXPECT_EQ(failure, errc::auth_failed);
    EXPECT_TRUE(after_failure) << "a failed request's handler ran inside async_command";
    const auto [after_reply, success] = initiate(good);
    EXPECT_FALSE(success) << success.message();
    EXPECT_TRUE(after_reply);
}

TEST(connection, a_wrong_password_is_auth_failed_and_nothing_runs_as_default) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.password = "right"});
    auto o = fast_options(s.url());
    o.password = "wrong";
    dlock::client c(o);
    std::error_code ec;
    c.command(std::vector<std::string_view>{"SET", "written-by-wrong-password", "1"}, ec);
    EXPECT_EQ(ec, errc::auth_failed);
    try {
        c.command({"PING"});
        ADD_FAILURE() << "expected dlock::error";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::auth_failed);
        EXPECT_EQ(std::string(e.what()).find("wrong"), std::string::npos);
    }
    EXPECT_EQ(s.cli({"EXISTS", "written-by-wrong-password"}), "0");

    o.password = "right";
    dlock::client ok(o);
    EXPECT_EQ(ok.command({"PING"}).str, "PONG");
}

TEST(connection, acl_users_authenticate_and_denied_commands_are_permission_errors) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.acl_lines = {"user app on >pw ~* +@all -get"}});
    dlock::client c(fast_options("redis://app:pw@127.0.0.1:" + std::to_string(s.port())));
    EXPECT_TRUE(c.command({"SET", "k", "v"}).is_ok());
    const auto denied = c.command({"GET", "k"});
    ASSERT_TRUE(denied.is_error());
    EXPECT_EQ(dlock::classify_server_error(denied.str), errc::permission_denied);
}

TEST(connection, unix_socket_and_database_selection_work) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options("unix://" + s.unix_socket() + "?db=3"));
    c.command({"SET", "in-db-3", "1"});
    EXPECT_EQ(s.cli({"-n", "3", "GET", "in-db-3"}), "1");
    EXPECT_EQ(s.cli({"GET", "in-db-3"}), "");
}

TEST(connection, tls_verifies_the_chain_and_the_host_name_and_never_falls_back) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.tls = true});
    auto o = fast_options(s.url());
    o.tls.ca_file = s.tls().ca_cert.string();
    {
        dlock::client c(o);
        EXPECT_EQ(c.command({"PING"}).str, "PONG");
    }
    {
        auto wrong_ca = o;
        wrong_ca.tls.ca_file = s.tls().wrong_ca_cert.string();
        dlock::client c(wrong_ca);
        std::error_code ec;
        c.command(std::vector<std::string_view>{"PING"}, ec);
        EXPECT_EQ(ec, errc::auth_failed) << ec.message();
    }
    {
        // Plaintext client to the TLS port: no reply ever parses; never "works".
        auto plain = fast_options("redis://127.0.0.1:" + std::to_string(s.port()));
        dlock::client c(plain);
        std::error_code ec;
        c.command(std::vector<std::string_view>{"PING"}, ec);
        EXPECT_TRUE(ec) << "plaintext must not talk to a TLS port";
    }
}

TEST(connection, tls_rejects_a_certificate_for_another_host) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.tls = true, .tls_wrong_host = true});
    auto o = fast_options(s.url());
    o.tls.ca_file = s.tls().ca_cert.string();
    dlock::client c(o);
    std::error_code ec;
    c.command(std::vector<std::string_view>{"PING"}, ec);
    EXPECT_EQ(ec, errc::auth_failed) << ec.message();
}

TEST(connection, an_unreachable_server_is_unavailable_or_timeout_within_bounds) {
    const auto port = dlock::test::free_port();
    auto o = fast_options("redis://127.0.0.1:" + std::to_string(port));
    o.command_timeout = 300ms;
    dlock::client c(o);
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    c.command(std::vector<std::string_view>{"PING"}, ec);
    EXPECT_TRUE(ec == errc::timeout || ec == errc::unavailable) << ec.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

// ---- a definite answer to a connect is given at once (issue 12, item 6) ---------------

TEST(connection, only_a_refusal_a_missing_name_or_socket_is_a_definite_connect_failure) {
    using dlock::net::connect_failure_is_definite;
    EXPECT_TRUE(connect_failure_is_definite(asio::error::connection_refused));
    EXPECT_TRUE(connect_failure_is_definite(asio::error::host_not_found));
    EXPECT_TRUE(connect_failure_is_definite(asio::error::no_data));
    EXPECT_TRUE(
        connect_failure_is_definite(std::error_code(ENOENT, asio::error::get_system_category())));
    EXPECT_FALSE(connect_failure_is_definite(asio::error::timed_out));
    EXPECT_FALSE(connect_failure_is_definite(asio::error::connection_reset));
    EXPECT_FALSE(connect_failure_is_definite(asio::error::host_not_found_try_again));
    EXPECT_FALSE(connect_failure_is_definite(asio::error::network_unreachable));
}

TEST(connection, a_refused_connection_ends_a_long_wait_at_once_and_names_address_and_reason) {
    const auto port = dlock::test::free_port();
    dlock::client c("redis://127.0.0.1:" + std::to_string(port)); // command timeout 5 s
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    auto l = c.acquire("x", {.wait = 30s}, ec);
    EXPECT_EQ(ec, errc::unavailable) << ec.message();
    EXPECT_FALSE(l);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
    const auto detail = c.last_error_detail();
    EXPECT_NE(detail.find("connect 127.0.0.1:" + std::to_string(port) + ": Connection refused"),
              std::string::npos)
        << detail;
    try {
        (void)c.command({"PING"});
        ADD_FAILURE() << "PING to a refusing server succeeded";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::unavailable);
        EXPECT_NE(std::string(e.what()).find("Connection refused"), std::string::npos) << e.what();
    }
}

TEST(connection, a_host_name_that_does_not_resolve_fails_at_once) {
    dlock::client c("redis://no-such-host.invalid:6379");
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    c.command(std::vector<std::string_view>{"PING"}, ec);
    EXPECT_EQ(ec, errc::unavailable) << ec.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
    EXPECT_EQ(c.last_error_detail().rfind("resolve no-such-host.invalid:6379: ", 0), 0u)
        << c.last_error_detail();
}

TEST(connection, a_missing_unix_socket_fails_at_once) {
    dlock::client c("unix:///nonexistent/dlock-test.sock");
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    c.command(std::vector<std::string_view>{"PING"}, ec);
    EXPECT_EQ(ec, errc::unavailable) << ec.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
    EXPECT_NE(c.last_error_detail().find("No such file or directory"), std::string::npos)
        << c.last_error_detail();
}

TEST(connection, the_last_error_reply_is_kept_for_messages_and_bounded) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    EXPECT_TRUE(c.command({"SET", "k", "v"}).is_ok());
    EXPECT_EQ(c.last_error_detail(), "");
    ASSERT_TRUE(c.command({"HGET", "k", "f"}).is_error());
    EXPECT_NE(c.last_error_detail().find(": WRONGTYPE "), std::string::npos)
        << c.last_error_detail();
    const std::string long_name(1000, 'x');
    ASSERT_TRUE(c.command({"NOSUCHCOMMAND", long_name}).is_error());
    EXPECT_LE(c.last_error_detail().size(), 300u) << c.last_error_detail();
}

TEST(connection, a_handshake_error_that_echoes_the_password_is_kept_without_it) {
    DLOCK_SKIP_WITHOUT_REDIS();
    // A server without HELLO (Redis 5, or renamed away) echoes its arguments in the error.
    redis_server s(server_options{.extra_config = {"rename-command HELLO \"\""}});
    auto o = fast_options(s.url());
    o.password = "hunter2-secret";
    dlock::client c(o);
    std::error_code ec;
    c.command(std::vector<std::string_view>{"PING"}, ec);
    EXPECT_EQ(ec, errc::configuration_error) << ec.message();
    const auto detail = c.last_error_detail();
    EXPECT_NE(detail.find("handshake with 127.0.0.1:"), std::string::npos) << detail;
    EXPECT_NE(detail.find("unknown command"), std::string::npos) << detail;
    EXPECT_EQ(detail.find("hunter2"), std::string::npos) << detail;
}

// ---- protocol faults from the fake server -------------------------------------------------

TEST(connection_faults, a_huge_declared_length_is_a_protocol_error_not_an_allocation) {
    fake_resp_server f([](const std::vector<std::string>&) {
        return fake_resp_server::action{.bytes = "*4294967295\r\n"};
    });
    dlock::client c(fast_options(f.url()));
    std::error_code ec;
    c.command(std::vector<std::string_view>{"PING"}, ec);
    EXPECT_TRUE(ec == errc::protocol_error || ec == errc::ambiguous) << ec.message();
    fake_resp_server g([](const std::vector<std::string>&) {
        return fake_resp_server::action{.bytes = "$99999999999\r\n"};
    });
    dlock::client c2(fast_options(g.url()));
    c2.command(std::vector<std::string_view>{"PING"}, ec);
    EXPECT_TRUE(ec == errc::protocol_error || ec == errc::ambiguous) << ec.message();
}

TEST(connection_faults, an_unsolicited_reply_drops_the_connection_and_is_never_attributed) {
    std::atomic<int> n{0};
    fake_resp_server f([&](const std::vector<std::string>&) {
        // First command: its reply plus an extra one nobody asked for.
        if (n++ == 0) return fake_resp_server::action{.bytes = "+PONG\r\n+OK\r\n"};
        return fake_resp_server::action{.bytes = "+PONG\r\n"};
    });
    dlock::client c(fast_options(f.url()));
    EXPECT_EQ(c.command({"PING"}).str, "PONG");
    // The stray +OK must not be taken as the reply to the next command.
    EXPECT_TRUE(dlock::test::eventually([&] { return f.connections() >= 2; }, 5s));
    std::error_code ec;
    auto v = c.command(std::vector<std::string_view>{"PING"}, ec);
    if (!ec) {
        EXPECT_EQ(v.str, "PONG");
    }
}

TEST(connection_faults, a_truncated_reply_then_close_is_ambiguous) {
    fake_resp_server f([](const std::vector<std::string>&) {
        return fake_resp_server::action{.bytes = "$10\r\nabc", .close = true};
    });
    dlock::client c(fast_options(f.url()));
    std::error_code ec;
    c.command(std::vector<std::string_view>{"GET", "k"}, ec);
    EXPECT_EQ(ec, errc::ambiguous);
}

TEST(connection_faults, a_reply_then_reset_delivers_the_reply) {
    fake_resp_server f([](const std::vector<std::string>&) {
        return fake_resp_server::action{.bytes = "+PONG\r\n", .reset = true};
    });
    dlock::client c(fast_options(f.url()));
    std::error_code ec;
    auto v = c.command(std::vector<std::string_view>{"PING"}, ec);
    // Either the reply was read before the reset arrived, or the outcome is unknown.
    if (ec) {
        EXPECT_EQ(ec, errc::ambiguous);
    } else {
        EXPECT_EQ(v.str, "PONG");
    }
}

TEST(connection_faults, a_server_that_never_answers_gives_ambiguous_at_the_deadline) {
    fake_resp_server f(
        [](const std::vector<std::string>&) { return fake_resp_server::action{.silent = true}; });
    auto o = fast_options(f.url());
    o.command_timeout = 300ms;
    dlock::client c(o);
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    c.command(std::vector<std::string_view>{"SET", "k", "v"}, ec);
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(ec, errc::ambiguous);
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 1s);
}
