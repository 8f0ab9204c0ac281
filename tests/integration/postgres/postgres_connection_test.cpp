// pg::connection (postgres/connection.hpp) against a real server: statements with parameters
// are prepared once per session and then run by name; what the server refuses at the Parse
// reads as the statement's own error; dlock_prepare=off sends everything unnamed.
#include "postgres/connection.hpp"
#include "postgres_test_util.hpp"

#include <asio/io_context.hpp>

#include <algorithm>

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

} // namespace
} // namespace dlock::test
