// The pure parts of the Cluster router: CLUSTER SHARDS / CLUSTER SLOTS replies into shards, and
// MOVED / ASK error texts (topology/cluster.hpp). No sockets.
#include "redis/locks/names.hpp"
#include "redis/topology/cluster.hpp"

#include <gtest/gtest.h>

namespace {

using dlock::resp3::type;
using dlock::resp3::value;

value str(std::string s) {
    value v;
    v.kind = type::bulk_string;
    v.str = std::move(s);
    return v;
}
value num(std::int64_t n) {
    value v;
    v.kind = type::integer;
    v.integer = n;
    return v;
}
value agg(std::vector<value> e, type k = type::array) {
    value v;
    v.kind = k;
    v.elements = std::move(e);
    return v;
}
value node_map(std::string id, int port, std::string role, std::string health) {
    return agg({str("id"), str(std::move(id)), str("port"), num(port), str("ip"), str("127.0.0.1"),
                str("role"), str(std::move(role)), str("health"), str(std::move(health))},
               type::map);
}

} // namespace

TEST(cluster_map, shards_reply_gives_each_shards_online_master_its_ranges_and_member_ids) {
    const auto reply =
        agg({agg({str("slots"), agg({num(0), num(5460), num(10923), num(10923)}), str("nodes"),
                  agg({node_map("r1", 7004, "replica", "online"),
                       node_map("m1", 7001, "master", "online")})},
                 type::map),
             agg({str("slots"), agg({num(5461), num(10922)}), str("nodes"),
                  agg({node_map("m2", 7002, "master", "fail"),
                       node_map("r2", 7005, "replica", "online")})},
                 type::map)});
    const auto shards = dlock::detail::parse_cluster_shards(reply);
    ASSERT_TRUE(shards);
    ASSERT_EQ(shards->size(), 1u); // the second shard has no online master right now
    const auto& s = shards->front();
    EXPECT_EQ(s.master.host, "127.0.0.1");
    EXPECT_EQ(s.master.port, 7001);
    ASSERT_EQ(s.ranges.size(), 2u);
    EXPECT_EQ(s.ranges[0], std::make_pair(std::uint16_t{0}, std::uint16_t{5460}));
    EXPECT_EQ(s.ranges[1], std::make_pair(std::uint16_t{10923}, std::uint16_t{10923}));
    ASSERT_EQ(s.ids.size(), 2u);
    EXPECT_EQ(s.ids[0], "m1"); // master first
    EXPECT_EQ(s.ids[1], "r1");
}

TEST(cluster_map, malformed_shards_replies_and_slot_numbers_out_of_range_are_refused) {
    EXPECT_FALSE(dlock::detail::parse_cluster_shards(str("ERR unknown subcommand")));
    const auto bad_range = agg({agg({str("slots"), agg({num(0), num(16384)}), str("nodes"),
                                     agg({node_map("m1", 7001, "master", "online")})},
                                    type::map)});
    EXPECT_FALSE(dlock::detail::parse_cluster_shards(bad_range));
    const auto bad_port = agg({agg({str("slots"), agg({num(0), num(1)}), str("nodes"),
                                    agg({node_map("m1", 70000, "master", "online")})},
                                   type::map)});
    EXPECT_FALSE(dlock::detail::parse_cluster_shards(bad_port));
}

TEST(cluster_map, slots_reply_merges_the_ranges_of_one_master_into_one_shard) {
    const auto reply = agg({
        agg({num(0), num(100), agg({str("127.0.0.1"), num(7001), str("m1")}),
             agg({str("127.0.0.1"), num(7004), str("r1")})}),
        agg({num(101), num(200), agg({str("127.0.0.1"), num(7002), str("m2")})}),
        agg({num(201), num(300), agg({str("127.0.0.1"), num(7001), str("m1")})}),
    });
    const auto shards = dlock::detail::parse_cluster_slots(reply);
    ASSERT_TRUE(shards);
    ASSERT_EQ(shards->size(), 2u);
    EXPECT_EQ((*shards)[0].master.port, 7001);
    EXPECT_EQ((*shards)[0].ranges.size(), 2u);
    EXPECT_EQ((*shards)[0].ids, (std::vector<std::string>{"m1", "r1"}));
    EXPECT_EQ((*shards)[1].master.port, 7002);
}

TEST(cluster_map, moved_and_ask_errors_name_the_slot_and_the_address_to_go_to) {
    bool ask = true;
    std::uint16_t slot = 0;
    dlock::net::target to;
    ASSERT_TRUE(dlock::detail::parse_redirect("MOVED 3999 127.0.0.1:6381", ask, slot, to));
    EXPECT_FALSE(ask);
    EXPECT_EQ(slot, 3999);
    EXPECT_EQ(to.host, "127.0.0.1");
    EXPECT_EQ(to.port, 6381);
    ASSERT_TRUE(dlock::detail::parse_redirect("ASK 1 ::1:7000", ask, slot, to));
    EXPECT_TRUE(ask);
    EXPECT_EQ(to.host, "::1");
    EXPECT_EQ(to.port, 7000);
    EXPECT_FALSE(dlock::detail::parse_redirect("MOVED 16384 h:1", ask, slot, to));
    EXPECT_FALSE(dlock::detail::parse_redirect("MOVED 1 h", ask, slot, to));
    EXPECT_FALSE(dlock::detail::parse_redirect("CLUSTERDOWN The cluster is down", ask, slot, to));
}

TEST(cluster_map, every_key_of_every_lock_kind_shares_the_slot_of_the_lock_name) {
    // The {name} tags: the lock's channel, token, queue and timeout keys hash like its name.
    for (const std::string name : {"orders:42", "a{b}c", "x"}) {
        const auto slot = dlock::detail::key_slot(name);
        for (const std::string prefix :
             {"redisson_lock__channel", "redisson_lock_token", "redisson_lock_queue",
              "redisson_lock_timeout", "redisson_rwlock"})
            EXPECT_EQ(dlock::detail::key_slot(dlock::detail::prefix_name(prefix, name)), slot)
                << prefix << " " << name;
    }
}

TEST(cluster_map, a_tls_client_takes_the_masters_tls_port) {
    auto master = node_map("m1", 7001, "master", "online");
    master.elements.push_back(str("tls-port"));
    master.elements.push_back(num(8001));
    const auto reply = agg(
        {agg({str("slots"), agg({num(0), num(16383)}), str("nodes"), agg({master})}, type::map)});
    EXPECT_EQ(dlock::detail::parse_cluster_shards(reply, false)->front().master.port, 7001);
    EXPECT_EQ(dlock::detail::parse_cluster_shards(reply, true)->front().master.port, 8001);
}
