// pg::connection (postgres/connection.hpp) against a real server: statements with parameters
// are prepared once per session and then run by name; what the server refuses at the Parse
// reads as the statement's own error; dlock_prepare=off sends everything unnamed, which is
// what a pooler in transaction mode needs (Debian's PgBouncer 1.18 in front of the server).
#include "postgres/connection.hpp"
#include "postgres_test_util.hpp"
#include "process.hpp"
#include "redis_fixture.hpp" // free_port()

#include <asio/io_context.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>
#include <unistd.h>

namespace dlock::test {
namespace {

namespace pg = detail::pg;

class pg_connection : public pg_suite {
protected:
    /// An open session on the suite's server (`params` appended to the URL's query).
    std::shared_ptr<pg::connection> open(std::string_view params = {}) {
        std::error_code ec;
        std::string why;
        auto s = std::make_shared<const pg::settings>(
            pg::parse_settings(server().url(params), ec, &why));
        EXPECT_FALSE(ec) << why;
        auto c = std::make_shared<pg::connection>(io_, s);
        std::optional<std::error_code> done;
        c->connect([&](std::error_code e) { done = e; });
        drive([&] { return done.has_value(); });
        EXPECT_TRUE(done && !*done) << c->error_text();
        return c;
    }

    /// Runs one batch and waits for it.
    std::vector<pg::result> run(pg::connection& c, std::vector<pg::statement> stmts) {
        std::optional<std::error_code> done;
        std::vector<pg::result> out;
        c.run(std::move(stmts), 5s, [&](std::error_code e, std::vector<pg::result>& r) {
            done = e;
            out = r;
        });
        drive([&] { return done.has_value(); });
        EXPECT_TRUE(done && !*done);
        return out;
    }

    /// The statements this session has prepared, as `pg_prepared_statements` lists them.
    std::vector<std::string> prepared(pg::connection& c) {
        auto r = run(c, {{"SELECT statement FROM pg_prepared_statements ORDER BY statement"}});
        std::vector<std::string> out;
        if (r.size() != 1 || !r[0].ok()) {
            ADD_FAILURE() << "pg_prepared_statements unreadable";
            return out;
        }
        for (int i = 0; i < r[0].rows(); ++i)
            out.emplace_back(r[0].value(i, 0));
        return out;
    }

    /// Runs the loop until `cond` holds (10 s at most: a hard limit, not a wait).
    template <class F>
    void drive(F cond) {
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (!cond() && std::chrono::steady_clock::now() < until) {
            io_.restart();
            io_.run_one_for(100ms);
        }
        ASSERT_TRUE(cond()) << "no answer within 10 s";
    }

    asio::io_context io_;
};

const std::string add_one = "SELECT $1::int + 1";

TEST_F(pg_connection, a_statement_with_parameters_is_prepared_once_and_then_run_by_name) {
    auto c = open();
    for (int i = 0; i < 3; ++i) {
        auto r = run(*c, {{add_one, {std::to_string(i)}}});
        ASSERT_EQ(r.size(), 1u);
        ASSERT_TRUE(r[0].ok()) << r[0].message();
        EXPECT_EQ(r[0].int_value(0, 0), i + 1);
    }
    // One named statement for the three calls; a statement without parameters is not kept.
    EXPECT_EQ(prepared(*c), std::vector<std::string>{add_one});
}

TEST_F(pg_connection, with_dlock_prepare_off_every_statement_goes_unnamed) {
    auto c = open("dlock_prepare=off");
    for (int i = 0; i < 2; ++i)
        EXPECT_EQ(run(*c, {{add_one, {"41"}}})[0].int_value(0, 0), 42);
    EXPECT_TRUE(prepared(*c).empty());
}

TEST_F(pg_connection, a_refused_parse_is_the_statements_own_error_and_is_tried_again_later) {
    server().psql("DROP TABLE IF EXISTS conn_later");
    auto c = open();
    const std::string read = "SELECT v FROM conn_later WHERE k = $1";
    auto r = run(*c, {{read, {"a"}}, {add_one, {"1"}}});
    ASSERT_EQ(r.size(), 2u);
    EXPECT_FALSE(r[0].ok());
    EXPECT_EQ(r[0].sqlstate(), "42P01"); // undefined_table, as an unnamed statement reports it
    EXPECT_TRUE(r[1].aborted());
    EXPECT_TRUE(prepared(*c).empty());

    server().psql("CREATE TABLE conn_later(k text PRIMARY KEY, v int); "
                  "INSERT INTO conn_later VALUES ('a', 7)");
    r = run(*c, {{read, {"a"}}, {add_one, {"1"}}});
    ASSERT_EQ(r.size(), 2u);
    ASSERT_TRUE(r[0].ok()) << r[0].message();
    EXPECT_EQ(r[0].int_value(0, 0), 7);
    EXPECT_EQ(r[1].int_value(0, 0), 2);
    auto names = prepared(*c);
    std::sort(names.begin(), names.end());
    std::vector<std::string> want{read, add_one};
    std::sort(want.begin(), want.end());
    EXPECT_EQ(names, want);
}

TEST_F(pg_connection, batches_sent_before_the_parse_is_answered_run_the_sql_unnamed) {
    auto c = open();
    // Three batches pipelined at once, the same new statement twice in the first: the first
    // use prepares it; the others cannot know yet whether the server accepted it.
    int answered = 0;
    std::vector<std::int64_t> got;
    auto collect = [&](std::error_code e, std::vector<pg::result>& r) {
        EXPECT_FALSE(e);
        for (auto& x : r) {
            EXPECT_TRUE(x.ok()) << x.message();
            got.push_back(x.int_value(0, 0).value_or(-1));
        }
        ++answered;
    };
    c->run({{add_one, {"1"}}, {add_one, {"2"}}}, 5s, collect);
    c->run({{add_one, {"3"}}}, 5s, collect);
    c->run({{add_one, {"4"}}}, 5s, collect);
    drive([&] { return answered == 3; });
    EXPECT_EQ(got, (std::vector<std::int64_t>{2, 3, 4, 5}));
    EXPECT_EQ(prepared(*c), std::vector<std::string>{add_one});
    EXPECT_EQ(run(*c, {{add_one, {"9"}}})[0].int_value(0, 0), 10); // by name now
}

TEST_F(pg_connection, a_statement_the_session_forgot_says_what_to_do_about_it) {
    auto c = open();
    ASSERT_EQ(run(*c, {{add_one, {"1"}}})[0].int_value(0, 0), 2); // prepared as dlock_1
    ASSERT_TRUE(run(*c, {{"DEALLOCATE ALL"}})[0].ok());           // as a pooler's reset would
    auto r = run(*c, {{add_one, {"2"}}});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].sqlstate(), "26000");
    EXPECT_NE(r[0].message().find("add dlock_prepare=off to the URL"), std::string::npos)
        << r[0].message();
}

/// PgBouncer in transaction mode in front of the suite's server: every transaction may run on
/// another server session, so a statement prepared by one is unknown to the next.
class pg_behind_pgbouncer : public pg_suite {
protected:
    static constexpr const char* binary = "/usr/sbin/pgbouncer";

    void SetUp() override {
        pg_suite::SetUp();
        if (IsSkipped()) return;
        if (::access(binary, X_OK) != 0)
            GTEST_SKIP() << "pgbouncer not installed (Debian package pgbouncer)";
        const auto dir = server().dir();
        port_ = free_port();
        std::ofstream ini(dir / "pgbouncer.ini");
        // The server's Unix socket trusts its users; clients of the pooler are not asked for
        // a password (auth_type any logs in as the database's user). libpq's startup
        // `options` (dlock's server-side keepalive) are not passed through.
        ini << "[databases]\npostgres = host=" << dir.string() << " port=" << server().port()
            << " dbname=postgres user=postgres\n[pgbouncer]\nlisten_addr = 127.0.0.1\n"
            << "listen_port = " << port_ << "\nunix_socket_dir =\nauth_type = any\n"
            << "pool_mode = transaction\ndefault_pool_size = 3\n"
            << "ignore_startup_parameters = options,extra_float_digits\n";
        ini.close();
        ASSERT_TRUE(ini) << "cannot write pgbouncer.ini";
        // As the server's user: PgBouncer refuses to run as root.
        pid_ = server().spawn_as_server({binary, (dir / "pgbouncer.ini").string()},
                                        dir / "pgbouncer.log");
        ASSERT_TRUE(wait_until([&] { return answers(); }, 10s))
            << read_tail(dir / "pgbouncer.log", 2000);
    }
    void TearDown() override { stop_child(pid_); }

    std::string url(std::string_view params) const {
        return "postgresql://postgres:unused@127.0.0.1:" + std::to_string(port_) + "/postgres?" +
               std::string(params);
    }

    /// 4 threads take and give back 3 lease rows 40 times each through the pooler; the
    /// errors they met (not counting a row another thread held).
    int errors_of(const std::string& params) {
        auto b = backend_at(url(params));
        std::atomic<int> errors{0}, taken{0};
        std::vector<std::thread> ts;
        for (int t = 0; t < 4; ++t)
            ts.emplace_back([&, t] {
                for (int i = 0; i < 40; ++i) {
                    std::error_code ec;
                    auto h = b->acquire("pooled:" + std::to_string((t + i) % 3),
                                        wait_for(0ms, lock_kind::lease), ec);
                    if (ec) ++errors;
                    if (!h) continue;
                    ++taken;
                    h->release_blocking(ec);
                    if (ec) ++errors;
                }
            });
        for (auto& t : ts)
            t.join();
        EXPECT_GT(taken.load(), 0);
        return errors.load();
    }

private:
    /// Whether the pooler accepts a connection and answers a query (through the server).
    bool answers() const {
        auto [out, rc] = run_capture({pg_bin("psql"), "-X", "-q", "-A", "-t", "-h", "127.0.0.1",
                                      "-p", std::to_string(port_), "-U", "postgres", "-d",
                                      "postgres", "-c", "SELECT 1"});
        return rc == 0 && out == "1";
    }

    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
};

// With dlock_prepare=on the same run met 18-39 errors in three tries ("prepared statement ...
// does not exist": the next transaction ran on another server session).
TEST_F(pg_behind_pgbouncer, lease_rows_work_through_a_transaction_pooler_with_dlock_prepare_off) {
    EXPECT_EQ(errors_of("dlock_prepare=off&dlock_pool=4"), 0);
}

} // namespace
} // namespace dlock::test
