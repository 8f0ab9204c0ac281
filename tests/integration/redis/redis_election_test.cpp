// Leader election on a real Redis in dlock's layout (redis/locks/election/protocol.hpp): the
// leader holds the election's lock N (Redisson RLock's hash) and the grant writes its record
// dlock_election:{N} (owner, epoch from redisson_lock_token:{N}, any bytes as the value) in the
// same script; an election and a lock of one name exclude each other and share the counter; a
// try on a held election draws no epoch; a forced unlock is a loss and the stale record reads
// as vacant; observe() sees a leader whose lease lapsed (no message: its timer at N's PTTL) and
// keeps up across a reconnect of its pub/sub connection; both handles may outlive their
// client. What every backend promises is in
// tests/conformance/election_test.cpp.
#include "redis/locks/lock_test_util.hpp"
#include "seen_states.hpp"

#include <dlock/dlock.hpp>

#include <asio/use_future.hpp>

#include <mutex>
#include <vector>

namespace dlock::test {
namespace {

class redis_election : public shared_redis_suite {
protected:
    static std::string record_key(const std::string& name) {
        return "dlock_election:{" + name + "}";
    }
    static std::string field(const std::string& name, const std::string& f) {
        return server().cli({"HGET", record_key(name), f});
    }
};

TEST_F(redis_election, the_grant_writes_the_record_with_owner_epoch_and_value) {
    auto a = connect(), b = connect();
    const std::string name = "jobs/report";
    const std::string value("bin\0\xff\x01value", 11);
    auto l = a->campaign(name, value, {.wait = 5s});
    ASSERT_TRUE(l) << a->last_error_detail();
    const auto li = b->leader(name);
    ASSERT_TRUE(li);
    EXPECT_EQ(li->value, value) << "any bytes";
    EXPECT_EQ(li->epoch, l.epoch());
    EXPECT_EQ(server().cli({"TYPE", name}), "hash") << "the lock N, Redisson RLock's layout";
    const auto owner = field(name, "owner");
    EXPECT_EQ(server().cli({"HGET", name, owner}), "1") << "the record's owner holds N";
    EXPECT_EQ(owner.rfind(a->id() + ":", 0), 0u) << owner;
    EXPECT_EQ(field(name, "epoch"), std::to_string(l.epoch()));
    EXPECT_EQ(server().cli({"GET", "redisson_lock_token:{" + name + "}"}),
              std::to_string(l.epoch()))
        << "the epoch is the lock's fencing counter";
    EXPECT_EQ(server().cli({"HSTRLEN", record_key(name), "value"}), "11");
    l.resign();
    EXPECT_EQ(server().cli({"EXISTS", name, record_key(name)}), "0") << "resign deletes both";
    EXPECT_FALSE(b->leader(name));
}

TEST_F(redis_election, an_election_and_the_lock_of_its_name_exclude_each_other) {
    auto a = connect(), b = connect();
    const std::string name = "shared-name";
    auto lock = a->acquire(name, {.wait = 0ms});
    ASSERT_TRUE(lock);
    std::error_code ec;
    EXPECT_FALSE(b->campaign(name, "x", {.wait = 0ms}, ec)) << "the lock's holder blocks it";
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_FALSE(b->leader(name)) << "a lock holder is no leader";
    const auto lock_token = *lock.token();
    lock.release();
    auto l = b->campaign(name, "x", {.wait = 5s});
    ASSERT_TRUE(l);
    EXPECT_GT(l.epoch(), lock_token) << "one counter for the lock's tokens and the epochs";
    EXPECT_FALSE(a->acquire(name, {.wait = 0ms})) << "the leader blocks the lock";
}

TEST_F(redis_election, a_try_on_a_held_election_draws_no_epoch) {
    auto a = connect(), b = connect();
    const std::string name = "try-held";
    auto l = a->campaign(name, "a", {.wait = 5s});
    ASSERT_TRUE(l);
    const auto counter = server().cli({"GET", "redisson_lock_token:{" + name + "}"});
    for (int i = 0; i < 3; ++i)
        EXPECT_FALSE(b->campaign(name, "b", {.wait = 0ms}));
    EXPECT_EQ(server().cli({"GET", "redisson_lock_token:{" + name + "}"}), counter);
    EXPECT_EQ(field(name, "value"), "a") << "a refused campaign writes nothing";
}

TEST_F(redis_election, a_forced_unlock_is_a_loss_and_the_stale_record_reads_vacant) {
    auto a = connect(), b = connect();
    const std::string name = "forced";
    auto l = a->campaign(name, "a", {.wait = 5s});
    ASSERT_TRUE(l);
    ASSERT_EQ(server().cli({"DEL", name}), "1");
    EXPECT_FALSE(b->leader(name)) << "the record's owner no longer holds N";
    EXPECT_EQ(field(name, "value"), "a") << "the record stays until the next grant";
    ASSERT_TRUE(eventually([&] { return l.lease().lost(); }, 5s)) << "the watchdog sees it";
    std::error_code ec;
    l.proclaim("again", ec);
    EXPECT_EQ(ec, errc::not_owner);
    l.resign(ec);
    EXPECT_FALSE(ec) << "resigning a lost leadership is no error: " << ec.message();
    auto next = b->campaign(name, "b", {.wait = 5s});
    ASSERT_TRUE(next);
    EXPECT_GT(next.epoch(), l.epoch());
    EXPECT_EQ(field(name, "value"), "b");
}

TEST_F(redis_election, observe_sees_a_leader_whose_lease_lapsed_without_a_message) {
    // A leader that died: its N expires and nothing is published. Written from outside, so no
    // client of this process renews or resigns it.
    const std::string name = "lapsed";
    server().cli({"HSET", name, "dead:1", "1"});
    server().cli({"PEXPIRE", name, "600"});
    server().cli({"HSET", record_key(name), "owner", "dead:1", "epoch", "7", "value", "gone"});
    auto w = connect();
    seen_states seen;
    auto obs = w->observe(name, seen.callback());
    ASSERT_TRUE(obs);
    ASSERT_EQ(seen.size(), 1u);
    ASSERT_TRUE(seen.last());
    EXPECT_EQ(seen.last()->value, "gone");
    EXPECT_EQ(seen.last()->epoch, 7u);
    ASSERT_TRUE(eventually([&] { return seen.size() == 2; }, 5s)) << "one read at N's expiry";
    EXPECT_FALSE(seen.last()) << "vacant once N expired";
}

TEST_F(redis_election, observe_keeps_up_across_a_reconnect_of_its_pubsub_connection) {
    auto w = connect(), a = connect();
    const std::string name = "reconnect";
    seen_states seen;
    auto obs = w->observe(name, seen.callback());
    ASSERT_TRUE(obs);
    auto l = a->campaign(name, "one", {.wait = 5s});
    ASSERT_TRUE(l);
    ASSERT_TRUE(eventually([&] { return seen.size() == 2; }, 5s));
    // Drop every pub/sub connection, then change the value: the observer's subscription comes
    // back and a read after it catches up, whether or not the message reached it.
    EXPECT_NE(server().cli({"CLIENT", "KILL", "TYPE", "pubsub"}), "0");
    l.proclaim("two");
    ASSERT_TRUE(eventually([&] { return seen.last() && seen.last()->value == "two"; }, 10s));
    l.resign();
    ASSERT_TRUE(eventually([&] { return !seen.last(); }, 10s));
}

TEST_F(redis_election, async_campaign_waits_for_the_leader_to_resign) {
    auto a = connect(), b = connect();
    const std::string name = "async";
    auto first = a->campaign(name, "a", {.wait = 5s});
    ASSERT_TRUE(first);
    auto f = b->async_campaign(name, "b", {.wait = 10s}, asio::use_future);
    ASSERT_EQ(f.wait_for(200ms), std::future_status::timeout) << "a leads";
    first.resign();
    auto second = f.get();
    ASSERT_TRUE(second);
    EXPECT_GT(second.epoch(), first.epoch());
    EXPECT_EQ(b->leader(name)->value, "b");
}

TEST_F(redis_election, an_observation_and_a_leadership_may_outlive_their_client) {
    seen_states seen;
    observation obs;
    leadership l;
    {
        auto c = connect();
        obs = c->observe("outlive", seen.callback());
        ASSERT_TRUE(obs);
        l = c->campaign("outlive", "v", {.wait = 5s});
        ASSERT_TRUE(l);
        ASSERT_TRUE(eventually([&] { return seen.size() == 2; }, 5s));
    } // the client is gone: no more callbacks, and both handles stay safe to use and drop
    const auto n = seen.size();
    std::error_code ec;
    l.resign(ec);
    obs.stop();
    EXPECT_EQ(seen.size(), n);
}

TEST_F(redis_election, bad_names_and_values_are_refused) {
    auto c = connect();
    std::error_code ec;
    for (const std::string& bad : {std::string(), std::string("a}b"), std::string(5000, 'x')}) {
        EXPECT_FALSE(c->campaign(bad, "v", {.wait = 0ms}, ec));
        EXPECT_EQ(ec, errc::invalid_argument) << bad.size();
        EXPECT_FALSE(c->leader(bad, ec));
        EXPECT_EQ(ec, errc::invalid_argument);
        EXPECT_FALSE(c->observe(
            bad, [](const std::optional<leader_info>&) {}, ec));
        EXPECT_EQ(ec, errc::invalid_argument);
    }
    EXPECT_FALSE(
        c->campaign("big", std::string(leadership::max_value_size + 1, 'v'), {.wait = 0ms}, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    auto l = c->campaign("big", "small", {.wait = 0ms});
    ASSERT_TRUE(l);
    l.proclaim(std::string(leadership::max_value_size + 1, 'v'), ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_EQ(c->leader("big")->value, "small");
}

} // namespace
} // namespace dlock::test
