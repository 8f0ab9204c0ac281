// A 3-node ZooKeeper ensemble on loopback (zk_fixture): a lock held and a lock waited for
// survive the leader's SIGKILL (the sessions move to a follower within their timeout), the
// waiter gets the lock when the holder releases after the election, and the fencing token
// still increases (a node created after the election carries the new epoch).
#include "zookeeper_test_util.hpp"

#include <future>

namespace dlock::test {
namespace {

TEST(zk_ensemble, leader_kill_keeps_held_and_waited_locks) {
    DLOCK_SKIP_WITHOUT_ZOOKEEPER();
    zk_ensemble ens;
    const auto url = ens.url() + "?session_timeout=4000&connect_timeout=4000&server_lag=" +
                     std::to_string(ens.server_lag().count());
    auto a = zk_backend_for(url);
    auto b = zk_backend_for(url);
    std::error_code ec;
    auto h = a->acquire("ens/lock", waiting(10s), ec);
    ASSERT_TRUE(h) << a->last_error_detail();
    auto waited = std::async(std::launch::async, [&] {
        std::error_code e;
        return b->acquire("ens/lock", waiting(30s), e);
    });
    ASSERT_TRUE(eventually([&] {
        std::error_code e;
        return a->inspect("ens/lock", lock_kind::reentrant, e).contenders.size() == 2;
    }));
    const auto old_leader = ens.wait_leader(10s);
    ens.server(old_leader).kill();
    const auto new_leader = ens.wait_leader(20s);
    EXPECT_NE(new_leader, old_leader);
    // Both sessions reconnect to a survivor: the hold is not lost, the waiter still waits.
    std::error_code e2;
    ASSERT_TRUE(eventually(
        [&] { return !a->inspect("ens/lock", lock_kind::reentrant, e2).contenders.empty() && !e2; },
        15s))
        << a->last_error_detail();
    EXPECT_FALSE(h->lost());
    EXPECT_EQ(waited.wait_for(0ms), std::future_status::timeout);
    const auto first_token = *h->fencing_token();
    h->release_blocking(ec);
    EXPECT_FALSE(ec);
    auto h2 = waited.get();
    ASSERT_TRUE(h2) << b->last_error_detail();
    EXPECT_GT(*h2->fencing_token(), first_token);
    // h2's node was created before the election (its czxid is its place in the queue); a node
    // created now carries the new leader's epoch in the zxid's high half.
    h2->release_blocking(ec);
    auto h3 = a->acquire("ens/lock", waiting(10s), ec);
    ASSERT_TRUE(h3);
    EXPECT_GT(*h3->fencing_token() >> 32, first_token >> 32) << "a new epoch after the election";
    EXPECT_GE(a->metrics().reconnects + b->metrics().reconnects, 1u);
}

// An ensemble (its /zookeeper/config names its servers) whose URL omits server_lag is assumed
// to lag as ZooKeeper's sample zoo.cfg, 12 s, which the fixture's 4 s sessions cannot carry:
// refused, with what to set; given, it locks.
TEST(zk_ensemble, an_ensemble_without_server_lag_is_refused_with_what_to_set) {
    DLOCK_SKIP_WITHOUT_ZOOKEEPER();
    zk_ensemble ens;
    auto a = zk_backend_for(ens.url() + "?session_timeout=4000&connect_timeout=4000");
    std::error_code ec;
    EXPECT_FALSE(a->acquire("ens/lag", waiting(2s), ec));
    EXPECT_EQ(ec, make_error_code(errc::configuration_error));
    const auto why = a->last_error_detail();
    EXPECT_NE(why.find("is an ensemble (quorum mode)"), std::string::npos) << why;
    EXPECT_NE(why.find("server_lag"), std::string::npos) << why;
    auto b = zk_backend_for(ens.url() + "?session_timeout=4000&connect_timeout=4000&server_lag=" +
                            std::to_string(ens.server_lag().count()));
    auto h = b->acquire("ens/lag", waiting(5s), ec);
    ASSERT_TRUE(h) << b->last_error_detail();
    EXPECT_FALSE(h->lost());
}

} // namespace
} // namespace dlock::test
