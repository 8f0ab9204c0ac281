// The RESP client against real servers (and the fake server for protocol faults): pipelining,
// async forms, scripts, reconnects, authentication, ACL, TLS (an expired certificate too), and
// Cluster redirects that cannot end (MOVED ping-pong, MOVED to a dead address; fake nodes).
#include "fake_resp_server.hpp"
#include "process.hpp"
#include "redis/client.hpp"
#include "redis/locks/names.hpp"
#include "redis/net/connection.hpp"
#include "redis/topology/cluster.hpp"
#include "test_util.hpp"

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
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
    EXPECT_EQ(dlock::redis::command(c, {"PING"}).str, "PONG");
    EXPECT_TRUE(dlock::redis::command(c, {"SET", "k", "v"}).is_ok());
    EXPECT_EQ(dlock::redis::command(c, {"GET", "k"}).str, "v");
    EXPECT_TRUE(dlock::redis::command(c, {"GET", "missing"}).is_null());
    const auto err = dlock::redis::command(c, {"INCR", "k"});
    ASSERT_TRUE(err.is_error());
    EXPECT_EQ(dlock::classify_server_error(err.str), errc::server_error);
    EXPECT_EQ(dlock::redis::command(c, {"CLIENT", "GETNAME"}).str,
              "dlock"); // set by HELLO ... SETNAME
    const auto wrongtype = dlock::redis::command(c, {"HGET", "k", "f"});
    ASSERT_TRUE(wrongtype.is_error());
    EXPECT_EQ(wrongtype.str.rfind("WRONGTYPE", 0), 0u);
}

TEST(connection, binary_safe_arguments_survive_the_round_trip) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    const std::string value("a\r\nb\0c$*", 9);
    dlock::redis::command(c, {"SET", "bin", value});
    EXPECT_EQ(dlock::redis::command(c, {"GET", "bin"}).str, value);
    dlock::redis::command(c, {"SET", "", ""});
    EXPECT_EQ(dlock::redis::command(c, {"GET", ""}).str, "");
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
                if (!dlock::redis::command(c, {"SET", key, val}).is_ok()) ++mismatches;
                if (dlock::redis::command(c, {"GET", key}).str != val) ++mismatches;
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
    dlock::redis::async_command(c, {"PING"}, [&](std::error_code ec, dlock::resp3::value v) {
        p.set_value(ec ? ec.message() : v.str);
    });
    auto f1 = p.get_future();
    ASSERT_EQ(f1.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f1.get(), "PONG");

    auto f2 = dlock::redis::async_command(c, {"ECHO", "hi"}, asio::use_future);
    ASSERT_EQ(f2.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f2.get().str, "hi");

    asio::io_context io;
    std::string got;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            std::vector<std::string> cmd{"ECHO", "co"};
            auto v = co_await dlock::redis::async_command(c, std::move(cmd), asio::use_awaitable);
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
    EXPECT_TRUE(
        dlock::redis::fenced_set(c, "res", "res:fence", 5, "a")); // cold cache: NOSCRIPT -> EVAL
    EXPECT_TRUE(dlock::redis::fenced_set(c, "res", "res:fence", 6, "b")); // warm cache: EVALSHA
    s.cli({"SCRIPT", "FLUSH"});
    EXPECT_FALSE(dlock::redis::fenced_set(c, "res", "res:fence", 4, "stale"));
    EXPECT_EQ(s.cli({"GET", "res"}), "b");
}

TEST(connection, a_killed_server_fails_commands_within_the_timeout_then_recovers) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    ASSERT_EQ(dlock::redis::command(c, {"PING"}).str, "PONG");
    s.kill();
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
    EXPECT_TRUE(ec == errc::ambiguous || ec == errc::timeout || ec == errc::unavailable)
        << ec.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
    s.start();
    EXPECT_TRUE(dlock::test::eventually([&] { return dlock::test::ping_ok(c); }, 10s));
}

TEST(connection, a_command_after_an_idle_spell_still_ends_at_its_deadline) {
    // Idle, the deadline tick waits for the idle check (seconds); a command brings the short
    // tick back, from a caller's thread (async_command writes directly) and from the I/O
    // thread (a command queued behind it), so a server that stopped answering is found out at
    // the command's deadline either way, not at the idle check.
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    auto o = fast_options(s.url());
    o.command_timeout = 300ms;
    dlock::client c(o);
    ASSERT_EQ(dlock::redis::command(c, {"PING"}).str, "PONG");
    std::this_thread::sleep_for(200ms); // an idle spell: several ticks with nothing sent
    s.pause();
    const auto t0 = std::chrono::steady_clock::now();
    auto first = dlock::redis::async_command(c, {"PING"}, asio::use_future);
    auto second = dlock::redis::async_command(c, {"PING"}, asio::use_future);
    ASSERT_EQ(first.wait_for(5s), std::future_status::ready);
    ASSERT_EQ(second.wait_for(5s), std::future_status::ready);
    const auto took = std::chrono::steady_clock::now() - t0;
    s.resume();
    for (auto* f : {&first, &second}) {
        try {
            f->get();
            ADD_FAILURE() << "a paused server answered";
        } catch (const std::system_error& e) {
            EXPECT_EQ(e.code(), errc::ambiguous) << e.what();
        }
    }
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 2s); // the idle check would come after 15 s
}

TEST(connection, client_kill_is_survived) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    ASSERT_EQ(dlock::redis::command(c, {"PING"}).str, "PONG");
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
    dlock::redis::command(bad, ping, ec);
    ASSERT_EQ(ec, errc::auth_failed); // from now on requests fail at once, inside submit()
    // Initiate from each client's I/O thread, as a handler in a chain would, and record whether
    // the handler ran before the initiating call returned.
    const auto initiate = [](dlock::client& c) {
        auto returned = std::make_shared<std::atomic<bool>>(false);
        std::promise<std::pair<bool, std::error_code>> seen;
        auto f = seen.get_future();
        asio::post(dlock::detail::access::impl(c)->io(), [&c, returned, &seen] {
            dlock::redis::async_command(c, {"PING"},
                                        [returned, &seen](std::error_code e, dlock::resp3::value) {
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
    dlock::redis::command(c, std::vector<std::string_view>{"SET", "written-by-wrong-password", "1"},
                          ec);
    EXPECT_EQ(ec, errc::auth_failed);
    try {
        dlock::redis::command(c, {"PING"});
        ADD_FAILURE() << "expected dlock::error";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::auth_failed);
        EXPECT_EQ(std::string(e.what()).find("wrong"), std::string::npos);
    }
    EXPECT_EQ(s.cli({"EXISTS", "written-by-wrong-password"}), "0");

    o.password = "right";
    dlock::client ok(o);
    EXPECT_EQ(dlock::redis::command(ok, {"PING"}).str, "PONG");
}

TEST(connection, acl_users_authenticate_and_denied_commands_are_permission_errors) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.acl_lines = {"user app on >pw ~* +@all -get"}});
    dlock::client c(fast_options("redis://app:pw@127.0.0.1:" + std::to_string(s.port())));
    EXPECT_TRUE(dlock::redis::command(c, {"SET", "k", "v"}).is_ok());
    const auto denied = dlock::redis::command(c, {"GET", "k"});
    ASSERT_TRUE(denied.is_error());
    EXPECT_EQ(dlock::classify_server_error(denied.str), errc::permission_denied);
}

TEST(connection, unix_socket_and_database_selection_work) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options("unix://" + s.unix_socket() + "?db=3"));
    dlock::redis::command(c, {"SET", "in-db-3", "1"});
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
        EXPECT_EQ(dlock::redis::command(c, {"PING"}).str, "PONG");
    }
    {
        auto wrong_ca = o;
        wrong_ca.tls.ca_file = s.tls().wrong_ca_cert.string();
        dlock::client c(wrong_ca);
        std::error_code ec;
        dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
        EXPECT_EQ(ec, errc::auth_failed) << ec.message();
    }
    {
        // Plaintext client to the TLS port: no reply ever parses; never "works".
        auto plain = fast_options("redis://127.0.0.1:" + std::to_string(s.port()));
        dlock::client c(plain);
        std::error_code ec;
        dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
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
    dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
    EXPECT_EQ(ec, errc::auth_failed) << ec.message();
}

namespace {

/// Runs openssl with `args` in `dir`; fails the test with its exit status otherwise.
void openssl_in(const std::filesystem::path& dir, std::vector<std::string> args) {
    args.insert(args.begin(), "openssl");
    args.insert(args.begin(), "/usr/bin/env");
    const auto [out, rc] = dlock::test::run_capture(args, {}, dir / "openssl.err");
    ASSERT_EQ(rc, 0) << "openssl " << args[2] << " failed (see " << (dir / "openssl.err") << ")";
}

} // namespace

// B18: a server certificate signed by the trusted CA, for the right host, but expired (valid
// in 2020 only) is refused like any failed verification (auth_failed); nothing runs on the
// connection and there is no plaintext fallback (the server has no plaintext port).
TEST(connection, tls_rejects_an_expired_certificate_and_runs_nothing) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s(server_options{.tls = true});
    auto o = fast_options(s.url());
    o.tls.ca_file = s.tls().ca_cert.string();
    {
        dlock::client c(o); // the valid certificate works: only the expiry differs below
        EXPECT_EQ(dlock::redis::command(c, {"PING"}).str, "PONG");
    }
    // An expired leaf for 127.0.0.1 from the same CA: `openssl ca` can backdate, x509 cannot.
    const auto d = s.dir();
    const auto path = [&](const char* f) { return (d / f).string(); };
    {
        std::ofstream cnf(d / "expired-ca.cnf");
        cnf << "[ca]\ndefault_ca=d\n[d]\ndatabase=" << path("index.txt")
            << "\nnew_certs_dir=" << d.string() << "\nserial=" << path("serial")
            << "\ndefault_md=sha256\npolicy=p\n[p]\ncommonName=supplied\n";
        std::ofstream(d / "index.txt").flush();
        std::ofstream(d / "serial") << "01\n";
        std::ofstream(d / "expired.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
    }
    openssl_in(d,
               {"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                path("expired.key"), "-out", path("expired.csr"), "-subj", "/CN=localhost"});
    openssl_in(d, {"ca", "-batch", "-config", path("expired-ca.cnf"), "-cert", path("ca.crt"),
                   "-keyfile", path("ca.key"), "-in", path("expired.csr"), "-out",
                   path("expired.crt"), "-startdate", "20200101000000Z", "-enddate",
                   "20200102000000Z", "-extfile", path("expired.ext")});
    s.cli({"CONFIG", "SET", "tls-cert-file", path("expired.crt"), "tls-key-file",
           path("expired.key")});
    // redis-cli verifies too from now on: --insecure for the test's own look at the server.
    const auto pings = [&] {
        const auto stats = s.cli({"--insecure", "INFO", "commandstats"});
        const auto at = stats.find("cmdstat_ping:calls=");
        return at == std::string::npos ? 0 : std::stoll(stats.substr(at + 19));
    };
    ASSERT_EQ(s.cli({"--insecure", "CONFIG", "GET", "tls-cert-file"}),
              "tls-cert-file\n" + path("expired.crt"));
    const auto before = pings();
    dlock::client c(o);
    std::error_code ec;
    dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
    EXPECT_EQ(ec, errc::auth_failed) << ec.message();
    EXPECT_NE(c.last_error_detail().find("expired"), std::string::npos) << c.last_error_detail();
    EXPECT_EQ(pings(), before) << "a command ran over the unverified connection";
    EXPECT_EQ(s.cli({"--insecure", "CONFIG", "GET", "port"}), "port\n0"); // TLS only
}

namespace {

/// A CLUSTER SHARDS reply (RESP3): slots 0-8191 at 127.0.0.1:`a`, 8192-16383 at `b` (all
/// at `a` when `b` is 0).
std::string shards_reply(std::uint16_t a, std::uint16_t b) {
    const auto bulk = [](const std::string& s) {
        return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
    };
    const auto shard = [&](const char* id, std::uint16_t port, int from, int to) {
        return "%2\r\n" + bulk("slots") + "*2\r\n:" + std::to_string(from) +
               "\r\n:" + std::to_string(to) + "\r\n" + bulk("nodes") + "*1\r\n%5\r\n" + bulk("id") +
               bulk(id) + bulk("port") + ":" + std::to_string(port) + "\r\n" + bulk("ip") +
               bulk("127.0.0.1") + bulk("role") + bulk("master") + bulk("health") + bulk("online");
    };
    if (b == 0) return "*1\r\n" + shard("m1", a, 0, 16383);
    return "*2\r\n" + shard("m1", a, 0, 8191) + shard("m2", b, 8192, 16383);
}

/// A fake Cluster node: CLUSTER SHARDS as shards_reply(a, b), ROLE master, GET answered
/// MOVED to `moved_to` (and counted), anything else +OK.
dlock::test::fake_resp_server::script redirecting_node(const std::atomic<std::uint16_t>& a,
                                                       const std::atomic<std::uint16_t>& b,
                                                       const std::atomic<std::uint16_t>& moved_to,
                                                       std::atomic<int>& gets) {
    return [&a, &b, &moved_to, &gets](const std::vector<std::string>& cmd) {
        dlock::test::fake_resp_server::action r;
        const std::string verb = cmd.empty() ? "" : cmd[0];
        if (verb == "CLUSTER") {
            r.bytes = shards_reply(a.load(), b.load());
        } else if (verb == "ROLE") {
            r.bytes = "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n";
        } else if (verb == "GET" && cmd.size() == 2) {
            ++gets;
            r.bytes = "-MOVED " + std::to_string(dlock::detail::key_slot(cmd[1])) +
                      " 127.0.0.1:" + std::to_string(moved_to.load()) + "\r\n";
        } else {
            r.bytes = "+OK\r\n";
        }
        return r;
    };
}

/// The outcome of a redirect that cannot end: a typed error code, or the MOVED reply itself
/// (errc::moved by its first word) once the redirects are used up.
bool typed_redirect_failure(std::error_code ec, const dlock::resp3::value& v) {
    if (ec) return ec == errc::moved || ec == errc::unavailable || ec == errc::timeout;
    return v.is_error() && dlock::classify_server_error(v.str) == errc::moved;
}

} // namespace

// B13: two masters that send each other's address in MOVED forever: the client follows a
// bounded number of redirects (both nodes see the command), then the caller gets the MOVED
// reply (errc::moved) well within the command timeout.
TEST(connection, moved_ping_pong_between_two_nodes_stops_after_bounded_redirects) {
    std::atomic<std::uint16_t> a_port{0}, b_port{0};
    std::atomic<int> a_gets{0}, b_gets{0};
    fake_resp_server a(redirecting_node(a_port, b_port, b_port, a_gets));
    fake_resp_server b(redirecting_node(a_port, b_port, a_port, b_gets));
    a_port = a.port();
    b_port = b.port();
    const std::string key = "k"; // slot 7629: node a by the map
    ASSERT_LT(dlock::detail::key_slot(key), 8192);
    dlock::client c(fast_options("redis-cluster://127.0.0.1:" + std::to_string(a.port())));
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    const auto v = dlock::redis::command(c, std::vector<std::string_view>{"GET", key}, ec);
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_TRUE(typed_redirect_failure(ec, v)) << ec.message() << " / " << v.str;
    EXPECT_GE(b_gets.load(), 1) << "the MOVED to a known master was not followed";
    // The first send and max_redirects (5) more, alternating: a, b, a, b, a, b.
    EXPECT_EQ(a_gets.load(), 1 + dlock::detail::cluster::max_redirects / 2);
    EXPECT_EQ(a_gets.load() + b_gets.load(), 1 + dlock::detail::cluster::max_redirects);
    EXPECT_LT(took, 3s);
}

// B13: MOVED to an address where nothing listens and that no map names: the client asks the
// map again (which still says node a) instead of trusting the address, and after a bounded
// number of redirects the caller gets a typed failure within the command timeout.
TEST(connection, moved_to_an_unreachable_host_fails_typed_within_the_deadline) {
    std::atomic<std::uint16_t> a_port{0}, none{0}, dead{dlock::test::free_port()};
    std::atomic<int> a_gets{0};
    fake_resp_server a(redirecting_node(a_port, none, dead, a_gets));
    a_port = a.port();
    dlock::client c(fast_options("redis-cluster://127.0.0.1:" + std::to_string(a.port())));
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    const auto v = dlock::redis::command(c, std::vector<std::string_view>{"GET", "k"}, ec);
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_TRUE(typed_redirect_failure(ec, v)) << ec.message() << " / " << v.str;
    EXPECT_EQ(a_gets.load(), 1 + dlock::detail::cluster::max_redirects); // never more
    EXPECT_LT(took, 3s);
}

TEST(connection, an_unreachable_server_is_unavailable_or_timeout_within_bounds) {
    const auto port = dlock::test::free_port();
    auto o = fast_options("redis://127.0.0.1:" + std::to_string(port));
    o.command_timeout = 300ms;
    dlock::client c(o);
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
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
        (void)dlock::redis::command(c, {"PING"});
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
    dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
    EXPECT_EQ(ec, errc::unavailable) << ec.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
    EXPECT_EQ(c.last_error_detail().rfind("resolve no-such-host.invalid:6379: ", 0), 0u)
        << c.last_error_detail();
}

TEST(connection, a_missing_unix_socket_fails_at_once) {
    dlock::client c("unix:///nonexistent/dlock-test.sock");
    std::error_code ec;
    const auto t0 = std::chrono::steady_clock::now();
    dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
    EXPECT_EQ(ec, errc::unavailable) << ec.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
    EXPECT_NE(c.last_error_detail().find("No such file or directory"), std::string::npos)
        << c.last_error_detail();
}

TEST(connection, the_last_error_reply_is_kept_for_messages_and_bounded) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_server s;
    dlock::client c(fast_options(s.url()));
    EXPECT_TRUE(dlock::redis::command(c, {"SET", "k", "v"}).is_ok());
    EXPECT_EQ(c.last_error_detail(), "");
    ASSERT_TRUE(dlock::redis::command(c, {"HGET", "k", "f"}).is_error());
    EXPECT_NE(c.last_error_detail().find(": WRONGTYPE "), std::string::npos)
        << c.last_error_detail();
    const std::string long_name(1000, 'x');
    ASSERT_TRUE(dlock::redis::command(c, {"NOSUCHCOMMAND", long_name}).is_error());
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
    dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
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
    dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
    EXPECT_TRUE(ec == errc::protocol_error || ec == errc::ambiguous) << ec.message();
    fake_resp_server g([](const std::vector<std::string>&) {
        return fake_resp_server::action{.bytes = "$99999999999\r\n"};
    });
    dlock::client c2(fast_options(g.url()));
    dlock::redis::command(c2, std::vector<std::string_view>{"PING"}, ec);
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
    EXPECT_EQ(dlock::redis::command(c, {"PING"}).str, "PONG");
    // The stray +OK must not be taken as the reply to the next command.
    EXPECT_TRUE(dlock::test::eventually([&] { return f.connections() >= 2; }, 5s));
    std::error_code ec;
    auto v = dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
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
    dlock::redis::command(c, std::vector<std::string_view>{"GET", "k"}, ec);
    EXPECT_EQ(ec, errc::ambiguous);
}

TEST(connection_faults, a_reply_then_reset_delivers_the_reply) {
    fake_resp_server f([](const std::vector<std::string>&) {
        return fake_resp_server::action{.bytes = "+PONG\r\n", .reset = true};
    });
    dlock::client c(fast_options(f.url()));
    std::error_code ec;
    auto v = dlock::redis::command(c, std::vector<std::string_view>{"PING"}, ec);
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
    dlock::redis::command(c, std::vector<std::string_view>{"SET", "k", "v"}, ec);
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(ec, errc::ambiguous);
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 1s);
}
