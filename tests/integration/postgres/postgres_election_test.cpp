// Leader election on a real PostgreSQL 15 in dlock's layout (postgres/election.hpp): the
// leader holds the advisory lock of the name and its row of dlock_election (any bytes as the
// value, the epoch from dlock_fence, the leader session's pid) is written in the batch that
// grants; a try on a held election draws no epoch; a leader whose session the server ends is
// lost and its row reads as vacant; observe() sees a leader leave without a resignation (its
// shared wait on the lock) and keeps up when its LISTEN session is ended; an observation may
// outlive its client. What every backend promises is in tests/conformance/election_test.cpp.
#include "postgres_test_util.hpp"
#include "seen_states.hpp"

#include <dlock/dlock.hpp>

#include <mutex>
#include <vector>

namespace dlock::test {
namespace {

class pg_election : public pg_suite {
protected:
    static std::unique_ptr<client> connect() { return std::make_unique<client>(server().url()); }
    static std::string row(const std::string& name, const std::string& columns) {
        return server().psql("SELECT " + columns + " FROM dlock_election WHERE name = '" + name +
                             "'");
    }
};

TEST_F(pg_election, the_leader_holds_the_names_lock_and_its_row_has_value_epoch_and_pid) {
    auto a = connect(), b = connect();
    const std::string value("bin\0\xff\x01value", 11);
    auto l = a->campaign("jobs/report", value, {.wait = 5s});
    ASSERT_TRUE(l) << a->last_error_detail();
    const auto li = b->leader("jobs/report");
    ASSERT_TRUE(li);
    EXPECT_EQ(li->value, value) << "any bytes";
    EXPECT_EQ(li->epoch, l.epoch());
    EXPECT_EQ(row("jobs/report", "encode(value, 'hex')"), "62696e00ff0176616c7565");
    EXPECT_EQ(row("jobs/report", "epoch"), std::to_string(l.epoch()));
    EXPECT_EQ(row("jobs/report", "pid"),
              server().psql("SELECT l.pid FROM pg_locks l JOIN dlock_election d ON d.pid = "
                            "l.pid WHERE l.locktype = 'advisory' AND l.granted AND d.name = "
                            "'jobs/report'"))
        << "the row's pid holds an advisory lock";
    EXPECT_EQ(std::stoull(server().psql("SELECT last_value FROM dlock_fence")), l.epoch());
    // The election is the lock of its name, as on ZooKeeper and etcd.
    EXPECT_FALSE(b->acquire("jobs/report", {.wait = 0ms}));
    std::error_code ec;
    const auto st = b->inspect("jobs/report", lock_kind::reentrant, ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_EQ(st.contenders.size(), 1u);
    EXPECT_EQ(st.contenders[0].session, row("jobs/report", "pid"));

    l.proclaim(std::string("\0", 1));
    EXPECT_EQ(b->leader("jobs/report")->value, std::string("\0", 1));
    l.resign();
    EXPECT_EQ(row("jobs/report", "count(*)"), "0") << "resign deletes the row";
    EXPECT_FALSE(b->leader("jobs/report"));
    EXPECT_TRUE(b->acquire("jobs/report", {.wait = 0ms})) << "and frees the lock";
}

TEST_F(pg_election, a_try_on_a_held_election_draws_no_epoch) {
    auto a = connect(), b = connect();
    auto l = a->campaign("tried", "a", {.wait = 5s});
    ASSERT_TRUE(l);
    const auto before = server().psql("SELECT last_value FROM dlock_fence");
    std::error_code ec;
    EXPECT_FALSE(b->campaign("tried", "b", {.wait = 0ms}, ec));
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(server().psql("SELECT last_value FROM dlock_fence"), before);
    EXPECT_EQ(b->leader("tried")->value, "a");
}

TEST_F(pg_election, a_leader_whose_session_ends_is_lost_and_its_row_reads_vacant) {
    auto a = connect(), b = connect();
    auto l = a->campaign("ended", "a", {.wait = 5s});
    ASSERT_TRUE(l);
    const auto epoch = l.epoch();
    EXPECT_EQ(server().psql("SELECT pg_terminate_backend(pid) FROM dlock_election WHERE name = "
                            "'ended'"),
              "t");
    EXPECT_TRUE(eventually([&] { return l.lease().lost(); }, 5s));
    std::error_code ec;
    EXPECT_FALSE(b->leader("ended", ec)) << "a dead leader's row is no leader";
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_EQ(row("ended", "count(*)"), "1") << "the row stays until the next leader";
    auto next = b->campaign("ended", "b", {.wait = 5s});
    ASSERT_TRUE(next);
    EXPECT_GT(next.epoch(), epoch);
    EXPECT_EQ(a->leader("ended")->value, "b");
    l.resign(ec);
    EXPECT_FALSE(ec) << "resigning a lost leadership is not an error";
    EXPECT_EQ(a->leader("ended")->value, "b") << "and does not touch the next leader's row";
}

// The server ends the leader's session: no NOTIFY is sent, and the observer's shared wait on
// the lock sees the leader go.
TEST_F(pg_election, observe_sees_a_leader_leave_without_resigning) {
    auto a = connect(), c = connect();
    seen_states seen;
    auto obs = c->observe("left", seen.callback());
    ASSERT_TRUE(obs);
    auto l = a->campaign("left", "a", {.wait = 5s});
    ASSERT_TRUE(l);
    ASSERT_TRUE(eventually([&] { return seen.size() == 2; }, 10s));
    EXPECT_FALSE(seen.at(0));
    EXPECT_EQ(seen.at(1)->value, "a");
    // The observer's session waits for the lock behind the leader.
    ASSERT_TRUE(eventually([&] { return waiting() >= 1; }, 10s));
    server().psql("SELECT pg_terminate_backend(pid) FROM dlock_election WHERE name = 'left'");
    ASSERT_TRUE(eventually([&] { return seen.size() == 3; }, 10s));
    EXPECT_FALSE(seen.at(2)) << "vacant";
    obs.stop();
}

// The engine's LISTEN session is ended by the server: the observation listens again and still
// sees the next leader and its proclaim.
TEST_F(pg_election, observe_keeps_up_when_its_listen_session_ends) {
    auto a = connect(), c = connect();
    seen_states seen;
    auto obs = c->observe("relisten", seen.callback());
    ASSERT_TRUE(obs);
    ASSERT_EQ(seen.size(), 1u);
    // The LISTEN session's last statement is its LISTEN; other tests' clients are gone.
    const auto listener = [] {
        return server().psql("SELECT coalesce(string_agg(pid::text, ','), '') FROM "
                             "pg_stat_activity WHERE query LIKE 'LISTEN dlock_election%'");
    };
    std::string first;
    ASSERT_TRUE(eventually(
        [&] {
            first = listener();
            return !first.empty() && first.find(',') == std::string::npos;
        },
        10s))
        << first;
    EXPECT_EQ(server().psql("SELECT pg_terminate_backend(" + first + ")"), "t");
    ASSERT_TRUE(eventually(
        [&] {
            const auto now = listener();
            return !now.empty() && now != first && now.find(',') == std::string::npos;
        },
        10s))
        << "listening again on a new session";
    auto l = a->campaign("relisten", "a", {.wait = 5s});
    ASSERT_TRUE(l);
    ASSERT_TRUE(eventually([&] { return seen.size() == 2; }, 10s));
    EXPECT_EQ(seen.at(1)->value, "a");
    l.proclaim("a2");
    ASSERT_TRUE(eventually([&] { return seen.size() == 3; }, 10s));
    EXPECT_EQ(seen.at(2)->value, "a2");
    EXPECT_EQ(seen.at(2)->epoch, l.epoch());
    obs.stop();
}

// An observation that outlives its client delivers nothing more and stops safely; its waiting
// session went with the client.
TEST_F(pg_election, an_observation_may_outlive_its_client) {
    auto a = connect();
    auto c = connect();
    seen_states seen;
    auto l = a->campaign("outlived", "a", {.wait = 5s});
    ASSERT_TRUE(l);
    auto obs = c->observe("outlived", seen.callback());
    ASSERT_TRUE(obs);
    ASSERT_EQ(seen.size(), 1u);
    ASSERT_TRUE(eventually([&] { return waiting() >= 1; }, 10s));
    c.reset();
    EXPECT_TRUE(eventually([&] { return waiting() == 0; }, 10s)) << "its session is closed";
    l.resign();
    EXPECT_EQ(seen.size(), 1u);
    obs.stop();
}

TEST_F(pg_election, bad_names_and_values) {
    auto a = std::make_unique<client>(server().url("dlock_key=int64"));
    std::error_code ec;
    EXPECT_FALSE(a->campaign("not-a-number", "v", {.wait = 0ms}, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_FALSE(a->leader("not-a-number", ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    auto o = a->observe(
        "not-a-number", [](const std::optional<leader_info>&) {}, ec);
    EXPECT_FALSE(o);
    EXPECT_EQ(ec, errc::invalid_argument);
    auto l = a->campaign("42", "v", {.wait = 5s}, ec);
    ASSERT_TRUE(l) << ec.message();
    l.proclaim(std::string(leadership::max_value_size + 1, 'x'), ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_FALSE(a->campaign("43", std::string(leadership::max_value_size + 1, 'x'), {}, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    l.resign();
}

} // namespace
} // namespace dlock::test
