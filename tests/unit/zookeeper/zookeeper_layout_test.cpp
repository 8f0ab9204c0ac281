// The ZooKeeper backend's sans-I/O parts: URL parsing, Curator child names, queue order,
// who holds, which child a waiter watches, protected-mode lookup.
#include "zookeeper/names.hpp"
#include "zookeeper/url.hpp"

#include <dlock/error.hpp>

#include <gtest/gtest.h>

namespace dlock::detail::zk {
namespace {

using namespace std::chrono_literals;

const std::string u1 = "72f2a1b4-0c1d-4e5f-8a9b-0123456789ab";
const std::string u2 = "bee6a1b4-0c1d-4e5f-8a9b-0123456789ab";
const std::string u3 = "99370000-0c1d-4e5f-8a9b-0123456789ab";

std::string child(const std::string& uuid, std::string_view infix, int seq) {
    char digits[16];
    std::snprintf(digits, sizeof digits, "%010d", seq);
    return node_prefix(uuid, infix) + digits;
}

TEST(zk_url, hosts_chroot_and_parameters) {
    std::error_code ec;
    std::string why;
    auto u = parse_zk_url("zk://a:1,b:2,[::1]:3/locks/x?session_timeout=4000&connect_timeout=700",
                          ec, &why);
    ASSERT_FALSE(ec) << why;
    ASSERT_EQ(u.hosts.size(), 3u);
    EXPECT_EQ(u.hosts[1].name, "b");
    EXPECT_EQ(u.hosts[1].port, 2);
    EXPECT_EQ(u.hosts[2].name, "[::1]");
    EXPECT_EQ(u.chroot, "/locks/x");
    EXPECT_EQ(u.session_timeout, 4000ms);
    EXPECT_EQ(u.connect_timeout, 700ms);
    EXPECT_EQ(u.connect_string(), "a:1,b:2,[::1]:3/locks/x");
    EXPECT_FALSE(u.server_lag) << "asked of the server unless told";
    u = parse_zk_url("zk://a:1,b:2?session_timeout=4000&server_lag=2600", ec, &why);
    ASSERT_FALSE(ec) << why;
    EXPECT_EQ(u.server_lag, 2600ms);

    u = parse_zk_url("zk://h", ec, &why);
    ASSERT_FALSE(ec);
    EXPECT_EQ(u.hosts[0].port, 2181);
    EXPECT_EQ(u.chroot, "");
    u = parse_zk_url("zk://h:5/", ec, &why);
    ASSERT_FALSE(ec);
    EXPECT_EQ(u.chroot, "");
}

TEST(zk_url, bad_inputs_are_typed_errors) {
    std::error_code ec;
    std::string why;
    const auto expect = [&](std::string_view url, errc e) {
        parse_zk_url(url, ec, &why);
        EXPECT_EQ(ec, make_error_code(e)) << url;
        EXPECT_FALSE(why.empty()) << url;
        why.clear();
    };
    expect("redis://h:1", errc::configuration_error);
    expect("zk://", errc::configuration_error);
    expect("zk://h:0", errc::configuration_error);
    expect("zk://h:70000", errc::configuration_error);
    expect("zk://h:1,,h:2", errc::configuration_error);
    expect("zk://h:1/a//b", errc::configuration_error);
    expect("zk://h:1/a/../b", errc::configuration_error);
    expect("zk://h:1?session_timeout=abc", errc::configuration_error);
    expect("zk://h:1?session_timeout=0", errc::configuration_error);
    expect("zk://h:1?colour=blue", errc::configuration_error);
    expect("zk://h:1?server_lag=-1", errc::configuration_error);
    // The lease leaves the lag out: a session must outlast 1.5 x it.
    expect("zk://h:1?server_lag=7000", errc::configuration_error); // the default 10 s session
    expect("zk://h:1?session_timeout=4000&server_lag=2700", errc::configuration_error);
    // TLS and SASL: Debian's C client has neither.
    expect("zks://h:1", errc::unsupported);
    expect("zk://user:secret@h:1", errc::unsupported);
    expect("zk://h:1?tls=1", errc::unsupported);
    expect("zk://h:1?sasl=GSSAPI", errc::unsupported);
    parse_zk_url("zk://user:secret@h:1", ec, &why);
    EXPECT_EQ(why.find("secret"), std::string::npos) << "never print a password";
}

TEST(zk_names, lock_directory) {
    std::string why;
    EXPECT_EQ(lock_dir("orders", &why), "/orders");
    EXPECT_EQ(lock_dir("/orders/", &why), "/orders");
    EXPECT_EQ(lock_dir("a/b/c", &why), "/a/b/c");
    for (const char* bad : {"", "/", "a//b", "a/./b", "..", "zookeeper/quota", "a\nb"}) {
        why.clear();
        EXPECT_EQ(lock_dir(bad, &why), "") << bad;
        EXPECT_FALSE(why.empty()) << bad;
    }
}

TEST(zk_names, curator_child_names_parse) {
    const auto n = child(u1, mutex_infix, 7);
    EXPECT_EQ(n, "_c_" + u1 + "-lock-0000000007");
    auto c = parse_child(n);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->seq, 7);
    EXPECT_FALSE(c->shared);
    EXPECT_EQ(c->owner, "_c_" + u1);

    c = parse_child(child(u2, read_infix, 12));
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->shared);
    EXPECT_EQ(c->seq, 12);

    // Other clients' nodes: Kazoo, ZooKeeper's own recipe, .NET DistributedLock.
    c = parse_child("3f2a9c__lock__0000000003");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->seq, 3);
    EXPECT_EQ(c->owner, "3f2a9c__lock__");
    ASSERT_TRUE(parse_child("x-72057594037927936-0000000004"));
    ASSERT_TRUE(parse_child("lock-0000000005"));
    EXPECT_EQ(parse_child("lock-0000000005")->seq, 5);
    // Not lock nodes.
    EXPECT_FALSE(parse_child("config"));
    EXPECT_FALSE(parse_child("leases"));
    EXPECT_FALSE(parse_child("lock-000000001x"));
    EXPECT_FALSE(parse_child("123"));
}

TEST(zk_names, sorts_by_sequence_not_by_name) {
    std::vector<std::string> strangers;
    const auto sorted = sort_children({child(u3, mutex_infix, 2), "zz__lock__0000000001", "config",
                                       child(u1, mutex_infix, 10), child(u2, mutex_infix, 0)},
                                      &strangers);
    ASSERT_EQ(sorted.size(), 4u);
    EXPECT_EQ(sorted[0].seq, 0);
    EXPECT_EQ(sorted[1].name, "zz__lock__0000000001"); // a Kazoo node keeps its place
    EXPECT_EQ(sorted[2].seq, 2);
    EXPECT_EQ(sorted[3].seq, 10);
    ASSERT_EQ(strangers.size(), 1u);
    EXPECT_EQ(strangers[0], "config");
}

TEST(zk_names, latch_children_sort_as_curators_leader_latch_sorts_them) {
    // By what follows the last "latch-" (the sequence), not by the whole name; a child without
    // it by its whole name (Curator's fixForSorting), so it sorts after the sequences.
    const auto sorted = sort_latch({child(u3, latch_infix, 2), "stray", child(u1, latch_infix, 10),
                                    child(u2, latch_infix, 0)});
    ASSERT_EQ(sorted.size(), 4u);
    EXPECT_EQ(sorted[0], child(u2, latch_infix, 0));
    EXPECT_EQ(sorted[1], child(u3, latch_infix, 2));
    EXPECT_EQ(sorted[2], child(u1, latch_infix, 10));
    EXPECT_EQ(sorted[3], "stray");
    EXPECT_EQ(node_prefix(u1, latch_infix), "_c_" + u1 + "-latch-");
}

TEST(zk_names, mutex_holder_is_first_and_waiters_watch_their_predecessor) {
    const std::vector<std::string> names{child(u1, mutex_infix, 0), child(u2, mutex_infix, 1),
                                         child(u3, mutex_infix, 2)};
    const auto sorted = sort_children(names);
    auto d = decide(sorted, names[0]);
    EXPECT_TRUE(d.found && d.holds);
    EXPECT_EQ(d.position, 0u);
    d = decide(sorted, names[1]);
    EXPECT_TRUE(d.found);
    EXPECT_FALSE(d.holds);
    EXPECT_EQ(d.watch, names[0]);
    d = decide(sorted, names[2]);
    EXPECT_FALSE(d.holds);
    EXPECT_EQ(d.watch, names[1]) << "only the predecessor: no herd";
    d = decide(sorted, "gone-0000000009");
    EXPECT_FALSE(d.found);
}

TEST(zk_names, a_waiter_whose_predecessor_went_holds_without_listing_only_when_it_is_first) {
    const std::vector<std::string> names{child(u1, mutex_infix, 0), child(u2, mutex_infix, 1),
                                         child(u3, mutex_infix, 2)};
    const auto sorted = sort_children(names);
    auto d = decide_without(sorted, names[1], names[0]);
    EXPECT_TRUE(d.found && d.holds) << "the holder went: the second is first";
    EXPECT_FALSE(decide_without(sorted, names[2], names[1]).holds)
        << "a waiter before it went: the holder is still there";
    EXPECT_EQ(decide_without(sorted, names[2], names[1]).watch, names[0]);
    EXPECT_FALSE(decide_without(sorted, "gone-0000000009", names[0]).found);
    // A writer before it may have downgraded: its read node sits at the writer's sequence,
    // made after the listing, so only a new listing can tell.
    const std::vector<std::string> rw{child(u1, write_infix, 5), child(u2, write_infix, 6)};
    const auto srw = sort_children(rw);
    EXPECT_FALSE(decide_without(srw, rw[1], rw[0]).holds);
    const std::vector<std::string> mixed{child(u1, write_infix, 5), child(u2, mutex_infix, 6)};
    EXPECT_FALSE(decide_without(sort_children(mixed), mixed[1], mixed[0]).holds);
}

TEST(zk_names, read_write_rules_of_curator) {
    // READ 0, READ 1, WRIT 2, READ 3: both first readers hold, the writer waits for the reader
    // before it, the late reader waits for the writer (writers are not starved).
    const std::vector<std::string> names{child(u1, read_infix, 0), child(u2, read_infix, 1),
                                         child(u3, write_infix, 2), child(u1, read_infix, 3)};
    const auto sorted = sort_children(names);
    EXPECT_TRUE(decide(sorted, names[0]).holds);
    EXPECT_TRUE(decide(sorted, names[1]).holds);
    auto w = decide(sorted, names[2]);
    EXPECT_FALSE(w.holds);
    EXPECT_EQ(w.watch, names[1]);
    auto r = decide(sorted, names[3]);
    EXPECT_FALSE(r.holds);
    EXPECT_EQ(r.watch, names[2]) << "a blocked reader watches the first writer";

    // A writer first: nobody else holds.
    const std::vector<std::string> wfirst{child(u1, write_infix, 0), child(u2, read_infix, 1)};
    const auto s2 = sort_children(wfirst);
    EXPECT_TRUE(decide(s2, wfirst[0]).holds);
    EXPECT_FALSE(decide(s2, wfirst[1]).holds);
    EXPECT_EQ(decide(s2, wfirst[1]).watch, wfirst[0]);
    // A foreign node (not __READ__) counts as exclusive for readers.
    const std::vector<std::string> foreign{"k__lock__0000000000", child(u2, read_infix, 1)};
    EXPECT_FALSE(decide(sort_children(foreign), foreign[1]).holds);
}

TEST(zk_names, a_downgrades_read_node_shares_its_writers_sequence) {
    // WRIT 5 holds; its holder's read node READ 5 (plain ephemeral at the writer's sequence,
    // whatever its name sorts like); a queued writer WRIT 6 and a reader READ 7.
    const std::vector<std::string> names{child(u3, write_infix, 6), child(u2, read_infix, 5),
                                         child(u1, read_infix, 7), child(u1, write_infix, 5)};
    const auto sorted = sort_children(names);
    EXPECT_EQ(sorted[0].name, names[3]) << "the writer sorts before its read node";
    EXPECT_TRUE(decide(sorted, names[3]).holds);
    EXPECT_TRUE(decide(sorted, names[1]).holds) << "the downgrade's read hold";
    auto w = decide(sorted, names[0]);
    EXPECT_FALSE(w.holds);
    EXPECT_EQ(w.watch, names[1]) << "the queued writer waits for the read hold too";
    auto r = decide(sorted, names[2]);
    EXPECT_FALSE(r.holds) << "a later reader waits: the writer still holds";
    // The writer released: the read node holds alone, the queued writer still waits for it.
    const std::vector<std::string> after{names[0], names[1], names[2]};
    const auto s2 = sort_children(after);
    EXPECT_TRUE(decide(s2, names[1]).holds);
    EXPECT_FALSE(decide(s2, names[0]).holds);
    EXPECT_FALSE(decide(s2, names[2]).holds) << "behind the queued writer";
    // Another writer's sequence does not count: READ 5 behind WRIT 4 waits.
    const std::vector<std::string> other{child(u3, write_infix, 4), child(u2, read_infix, 5)};
    EXPECT_FALSE(decide(sort_children(other), other[1]).holds);
}

TEST(zk_names, protected_mode_finds_own_node_by_prefix) {
    const auto prefix = node_prefix(u2, mutex_infix).substr(0, protected_length);
    EXPECT_EQ(prefix, "_c_" + u2 + "-");
    const std::vector<std::string> children{child(u1, mutex_infix, 0), child(u2, mutex_infix, 1)};
    EXPECT_EQ(find_protected(children, prefix), children[1]);
    EXPECT_FALSE(find_protected(children, node_prefix(u3, mutex_infix).substr(0, 40)));
}

TEST(zk_names, glob_and_session_hex) {
    EXPECT_TRUE(glob_match("", "anything"));
    EXPECT_TRUE(glob_match("or*", "orders"));
    EXPECT_TRUE(glob_match("a/?/c", "a/b/c"));
    EXPECT_FALSE(glob_match("or*x", "orders"));
    EXPECT_EQ(session_hex(0x100000a2b3c0001), "0x0100000a2b3c0001");
}

} // namespace
} // namespace dlock::detail::zk
