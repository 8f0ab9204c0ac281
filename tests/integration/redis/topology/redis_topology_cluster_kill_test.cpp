// Redis Cluster: a master killed with SIGKILL (no manual failover) while its slot's lock is held,
// its replica stopped so that the grant never reached it (fault row F25C's schedule, on the
// fixture's three masters with a replica each). Checks the client's recovery: once the replica
// is promoted, a waiter that slept through the outage and an acquisition started during it
// are served by the promoted replica within a cluster-node-timeout plus a map refresh, and
// neither fails with errc::unavailable while its wait allows retrying. And while the dead
// master is not replaced, the client's reconnects load the slot map at most once per
// cluster::min_refresh_gap.
#include "redis/client.hpp"
#include "redis/locks/names.hpp"
#include "redis/topology/cluster.hpp"
#include "redis/topology/router.hpp"
#include "test_util.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <future>
#include <utility>

namespace {

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::test::fast_options;
using dlock::test::redis_cluster;
using clock_type = std::chrono::steady_clock;

struct outcome {
    dlock::lease lease;
    std::error_code ec;
    clock_type::time_point at;
};

std::future<outcome> acquire_async(dlock::client& c, const std::string& name,
                                   std::chrono::milliseconds wait) {
    return std::async(std::launch::async, [&c, name, wait] {
        outcome o;
        o.lease = c.acquire(name, {.wait = wait}, o.ec);
        o.at = clock_type::now();
        return o;
    });
}

bool subscribed(dlock::test::redis_server& s, const std::string& channel) {
    return s.cli({"PUBSUB", "SHARDNUMSUB", channel}).find("\n1") != std::string::npos;
}

/// The replica reports ROLE master and its view of the cluster is whole again.
bool promoted(dlock::test::redis_server& r) {
    return r.cli({"ROLE"}).starts_with("master") &&
           r.cli({"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
}

} // namespace

TEST(cluster, a_killed_masters_slot_is_served_by_the_promoted_replica_to_waiters_and_new_calls) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_cluster c; // cluster-node-timeout 2000
    auto opts = fast_options(c.url());
    opts.failover_lock_delay = 0ms; // no lock-delay: the promoted replica grants at once
    dlock::client holder(opts);
    dlock::client waiter(opts);
    dlock::client late(opts);
    const std::string name = "c-kill";
    const auto slot = dlock::detail::key_slot(name);
    const auto master = c.master_of(slot);
    const auto replica = c.replica_of(master);

    c.node(replica).pause();
    // The master drops the link: else the grant below would wait in the socket's buffer and
    // reach the replica when it resumes.
    c.node(master).cli({"CLIENT", "KILL", "TYPE", "replica"});
    auto held = holder.acquire(name, {.lease = 60s});
    ASSERT_TRUE(held);
    auto first = acquire_async(waiter, name, 40s);
    ASSERT_TRUE(eventually(
        [&] { return subscribed(c.node(master), "redisson_lock__channel:{" + name + "}"); }, 5s));

    c.node(master).kill();
    auto second = acquire_async(late, name, 40s); // started during the outage
    c.node(replica).resume();
    ASSERT_TRUE(eventually([&] { return promoted(c.node(replica)); }, 30s));
    const auto promoted_at = clock_type::now();

    // The promoted replica never saw the hold: one of the two gets the lock there (the
    // overlap a failover without lock-delay allows) within node-timeout + a map refresh of the
    // promotion, not when the lost holder's 60 s lease would have ended; which one is a race.
    // The waiter sleeps on a timer of that lease: only its subscription, followed to the
    // promoted replica, can wake it in time, whether it is served first or after the release.
    auto one = first.wait_until(promoted_at + 4s) == std::future_status::ready ? &first : &second;
    auto other = one == &first ? &second : &first;
    ASSERT_EQ(one->wait_until(promoted_at + 4s), std::future_status::ready)
        << "no grant within 4 s of the promotion";
    auto got = one->get();
    ASSERT_TRUE(got.lease) << got.ec.message();
    EXPECT_FALSE(got.ec);
    // The other is served as soon as that one releases; neither reports unavailable with
    // most of its 40 s wait left.
    const auto released_at = clock_type::now();
    got.lease.release();
    auto next = other->get();
    ASSERT_TRUE(next.lease) << next.ec.message();
    EXPECT_FALSE(next.ec);
    EXPECT_LT(next.at - released_at, 2s);
    EXPECT_EQ(c.node(replica).cli({"EXISTS", name}), "1");
}

TEST(cluster, reconnects_to_a_dead_master_load_the_map_at_most_once_per_gap) {
    DLOCK_SKIP_WITHOUT_REDIS();
    redis_cluster c;
    dlock::client cl(fast_options(c.url())); // reconnects every 5-50 ms
    const std::string name = "c-dead";
    const auto master = c.master_of(dlock::detail::key_slot(name));
    c.node(c.replica_of(master)).pause(); // no failover during the measurement
    ASSERT_TRUE(cl.acquire(name, {.wait = 0ms, .lease = 1s}));
    auto* map = dlock::detail::access::impl(cl)->router().cluster_map();
    c.node(master).kill();
    const auto before = map->refreshes();
    const auto t0 = clock_type::now();
    std::error_code ec;
    auto l = cl.acquire(name, {.wait = 2s}, ec); // its node refuses every connect
    const auto elapsed = clock_type::now() - t0;
    const auto loads = map->refreshes() - before;
    EXPECT_FALSE(l);
    EXPECT_TRUE(ec);
    EXPECT_GE(loads, 2u); // it did look again
    EXPECT_LE(loads,
              2u + static_cast<std::uint64_t>(elapsed / dlock::detail::cluster::min_refresh_gap))
        << "over " << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()
        << " ms";
}
