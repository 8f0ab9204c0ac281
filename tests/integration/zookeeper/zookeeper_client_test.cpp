// dlock::client on zk:// URLs end to end (the lead's client wiring over this backend): leases,
// lock objects with local re-entry, the read-write lock object, async acquisition,
// inspect/list, the Redis-only calls refused with errc::unsupported, and the multi-lock
// (acquire_all, multi_mutex) over ZooKeeper: sorted order, all or none, loss of any member;
// the fenced write (dlock::zookeeper::fenced_set): written while held, refused atomically once the
// lock node is gone; the read-write downgrade (CURATOR-621: a queued writer stays out).
#include "redis/client.hpp" // detail::access
#include "zookeeper_test_util.hpp"

#include <dlock/dlock.hpp>

#include <atomic>
#include <future>
#include <mutex>

namespace dlock::test {
namespace {

class zk_client : public ::testing::Test {
protected:
    void SetUp() override {
        DLOCK_SKIP_WITHOUT_ZOOKEEPER();
        server_ = std::make_unique<zk_server>();
        url_ = server_->url() + "?session_timeout=4000&connect_timeout=10000";
    }
    std::unique_ptr<zk_server> server_;
    std::string url_;
};

TEST_F(zk_client, leases_exclude_and_carry_the_czxid) {
    client a(url_);
    client b(url_);
    EXPECT_EQ(a.backend_name(), "zookeeper");
    auto l = a.acquire("orders", {.wait = 5s});
    ASSERT_TRUE(l) << a.last_error_detail();
    ASSERT_TRUE(l.token());
    EXPECT_GT(l.valid_until(), std::chrono::steady_clock::now());
    EXPECT_FALSE(b.acquire("orders", {.wait = 0ms}));
    raw_zk raw(server_->host_port());
    const auto kids = raw.children("/orders");
    ASSERT_EQ(kids.size(), 1u);
    Stat st{};
    ASSERT_TRUE(raw.exists("/orders/" + kids[0], &st));
    EXPECT_EQ(*l.token(), static_cast<std::uint64_t>(st.czxid));
    l.extend(10s); // the session renews itself: a no-op that succeeds
    l.release();
    auto l2 = b.acquire("orders", {.wait = 5s});
    ASSERT_TRUE(l2);
    EXPECT_GT(*l2.token(), st.czxid) << "tokens increase across holders";
}

// lease::async_release completes once the server deleted the node, although the handle gave
// its hold away (the release callback keeps the hold alive: a weak reference never completed).
TEST_F(zk_client, async_release_completes_and_frees_the_lock) {
    client a(url_);
    client b(url_);
    for (int i = 0; i < 3; ++i) {
        auto l = a.acquire("async/release", {.wait = 5s});
        ASSERT_TRUE(l) << a.last_error_detail();
        std::promise<std::error_code> done;
        l.async_release([&](std::error_code ec) { done.set_value(ec); });
        auto f = done.get_future();
        ASSERT_EQ(f.wait_for(10s), std::future_status::ready) << "round " << i;
        EXPECT_FALSE(f.get());
        EXPECT_FALSE(l);
        auto other = b.acquire("async/release", {.wait = 0ms});
        EXPECT_TRUE(other) << "round " << i;
    }
}

TEST_F(zk_client, mutex_reenters_locally_with_one_node) {
    client a(url_);
    client b(url_);
    auto m = a.make_mutex("jobs/m");
    m.lock();
    m.lock(); // re-entry: counted here, no second node
    raw_zk raw(server_->host_port());
    EXPECT_EQ(raw.children("/jobs/m").size(), 1u);
    auto other = b.make_mutex("jobs/m");
    EXPECT_FALSE(other.try_lock());
    m.unlock();
    EXPECT_FALSE(other.try_lock()) << "still held once";
    m.unlock();
    EXPECT_TRUE(other.try_lock_for(5s));
    other.unlock();
}

TEST_F(zk_client, read_write_lock_object) {
    client a(url_);
    client b(url_);
    auto rw1 = a.make_rw_mutex("rw");
    auto rw2 = b.make_rw_mutex("rw");
    rw1.lock_shared();
    EXPECT_TRUE(rw2.try_lock_shared_for(5s));
    EXPECT_FALSE(rw2.try_lock_for(0ms));
    rw2.unlock_shared();
    rw1.unlock_shared();
    EXPECT_TRUE(rw2.try_lock_for(5s));
    EXPECT_FALSE(rw1.try_lock_shared_for(0ms));
    rw2.unlock();
}

TEST_F(zk_client, async_acquire_inspect_list_and_unsupported_calls) {
    client a(url_);
    std::promise<std::pair<std::error_code, lease>> p;
    a.async_acquire("async/x", {.wait = 5s}, [&](std::error_code ec, lease l) {
        p.set_value({ec, std::move(l)});
    });
    auto [ec, l] = p.get_future().get();
    ASSERT_FALSE(ec);
    ASSERT_TRUE(l);
    std::error_code e;
    const auto st = a.inspect("async/x", lock_kind::reentrant, e);
    ASSERT_FALSE(e);
    ASSERT_EQ(st.contenders.size(), 1u);
    EXPECT_TRUE(st.contenders[0].holds);
    EXPECT_EQ(st.contenders[0].token, l.token());
    const auto all = a.list("async/*", e);
    ASSERT_FALSE(e);
    ASSERT_EQ(all.size(), 1u);
    const std::string_view ping[] = {"PING"};
    dlock::redis::command(a, ping, e);
    EXPECT_EQ(e, make_error_code(errc::unsupported));
    EXPECT_THROW(client("zks://127.0.0.1:2181"), dlock::error);
}

TEST_F(zk_client, multi_lock_takes_all_in_sorted_order_or_none) {
    client a(url_);
    client b(url_);
    raw_zk raw(server_->host_port());
    auto blocker = b.acquire("acct/2", {.wait = 5s});
    ASSERT_TRUE(blocker);
    // Not within the wait: nothing stays held.
    std::error_code ec;
    const lock_ref three[] = {{"acct/3"}, {"acct/1"}, {"acct/2"}};
    auto none = a.acquire_all(three, {.wait = 300ms}, ec);
    EXPECT_FALSE(none);
    EXPECT_FALSE(ec) << "not acquired is not an error";
    EXPECT_TRUE(raw.children("/acct/1").empty()) << "the member taken first was released";
    EXPECT_EQ(raw.children("/acct/2").size(), 1u);
    EXPECT_FALSE(raw.exists("/acct/3")) << "members after the blocked one are not touched";
    // Waiting: acct/1 (first by name) is held while acct/2 is awaited; acct/3 comes last.
    std::promise<std::pair<std::error_code, multi_lease>> p;
    a.async_acquire_all({{"acct/3"}, {"acct/1"}, {"acct/2", lock_kind::write}}, {.wait = 10s},
                        [&](std::error_code e, multi_lease m) {
                            p.set_value({e, std::move(m)});
                        });
    ASSERT_TRUE(eventually([&] { return raw.children("/acct/2").size() == 2; }));
    EXPECT_EQ(raw.children("/acct/1").size(), 1u);
    EXPECT_FALSE(raw.exists("/acct/3"));
    blocker.release();
    auto [e, m] = p.get_future().get();
    ASSERT_FALSE(e) << a.last_error_detail();
    ASSERT_TRUE(m);
    ASSERT_EQ(m.members().size(), 3u);
    EXPECT_EQ(m.members()[0].name(), "acct/1");
    EXPECT_EQ(m.members()[2].name(), "acct/3");
    EXPECT_TRUE(m.members()[1].token()) << "a write member has its czxid token";
    EXPECT_GT(m.valid_until(), std::chrono::steady_clock::now());
    EXPECT_FALSE(b.acquire("acct/3", {.wait = 0ms}));
    // Losing any member loses the set.
    std::atomic<bool> called{false};
    m.on_lost([&] { called = true; });
    const auto kids = raw.children("/acct/3");
    ASSERT_EQ(kids.size(), 1u);
    ASSERT_EQ(raw.remove("/acct/3/" + kids[0]), ZOK);
    // lost() turns true before the callbacks run (on the I/O thread): wait for both.
    ASSERT_TRUE(eventually([&] { return m.lost() && called; }, 5s));
    EXPECT_TRUE(m.stop_token().stop_requested());
    m.release(ec);
    EXPECT_EQ(ec, make_error_code(errc::not_owner));
    EXPECT_TRUE(raw.children("/acct/1").empty() && raw.children("/acct/2").empty())
        << "the other members were released";
    // multi_mutex over ZooKeeper; a kind ZooKeeper does not offer is unsupported.
    multi_mutex both(a, {{"acct/1"}, {"acct/2"}});
    {
        std::scoped_lock g(both);
        EXPECT_FALSE(b.acquire("acct/1", {.wait = 0ms}));
    }
    EXPECT_TRUE(b.acquire("acct/1", {.wait = 0ms}));
    const lock_ref odd[] = {{"x"}, {"y", lock_kind::simple}};
    a.acquire_all(odd, {.wait = 0ms}, ec);
    EXPECT_EQ(ec, make_error_code(errc::unsupported));
}

TEST_F(zk_client, fenced_set_writes_only_while_the_lock_node_exists) {
    client a(url_);
    client b(url_);
    raw_zk raw(server_->host_port());
    auto l = a.acquire("fenced/lock", {.wait = 5s});
    ASSERT_TRUE(l);
    std::error_code ec;
    EXPECT_FALSE(dlock::zookeeper::fenced_set(a, l, "res/value", "v1", ec));
    EXPECT_EQ(ec, make_error_code(errc::configuration_error)) << "the parent /res is missing";
    ASSERT_EQ(raw.create("/res"), ZOK);
    dlock::zookeeper::fenced_set(a, l, "res/value", "v1"); // created
    EXPECT_EQ(raw.get("/res/value"), "v1");
    dlock::zookeeper::fenced_set(a, l, "/res/value", "v2"); // set
    EXPECT_EQ(raw.get("/res/value"), "v2");
    EXPECT_FALSE(dlock::zookeeper::fenced_set(a, l, "fenced/lock/x", "v", ec));
    EXPECT_EQ(ec, make_error_code(errc::invalid_argument)) << "not inside the lock directory";
    EXPECT_FALSE(dlock::zookeeper::fenced_set(a, lease{}, "res/value", "v", ec));
    EXPECT_EQ(ec, make_error_code(errc::invalid_argument));

    // The server refuses the write once the node is gone, whatever the holder believes: the
    // backend's own call, made right after the node was deleted, does not look at lost().
    const auto kids = raw.children("/fenced/lock");
    ASSERT_EQ(kids.size(), 1u);
    const auto node = "/fenced/lock/" + kids[0];
    auto* zb = dynamic_cast<detail::zk::zk_backend*>(detail::access::backend(a).get());
    ASSERT_NE(zb, nullptr);
    ASSERT_EQ(raw.remove(node), ZOK); // unlock --force
    EXPECT_EQ(zb->fenced_set(node, "res/value", "stale"), make_error_code(errc::not_owner));
    EXPECT_EQ(raw.get("/res/value"), "v2") << "the resource is unchanged";
    ASSERT_TRUE(eventually([&] { return l.lost(); }, 5s));
    EXPECT_FALSE(dlock::zookeeper::fenced_set(a, l, "res/value", "stale", ec));
    EXPECT_EQ(ec, make_error_code(errc::not_owner));
    EXPECT_THROW(dlock::zookeeper::fenced_set(a, l, "res/value", "stale"), dlock::error);

    // Session expiry: the new holder writes, the expired one cannot.
    auto l2 = a.acquire("fenced/lock", {.wait = 5s});
    ASSERT_TRUE(l2);
    const auto node2 = "/fenced/lock/" + raw.children("/fenced/lock").at(0);
    expire_session(server_->host_port(), *zb);
    // Once the holder knows (before that, a write may see only a dropped connection: ambiguous).
    ASSERT_TRUE(eventually([&] { return l2.lost(); }, 5s));
    auto l3 = b.acquire("fenced/lock", {.wait = 5s});
    ASSERT_TRUE(l3) << "the expired holder's node is gone";
    dlock::zookeeper::fenced_set(b, l3, "res/value", "v3");
    EXPECT_EQ(zb->fenced_set(node2, "res/value", "stale"), make_error_code(errc::not_owner));
    EXPECT_EQ(raw.get("/res/value"), "v3");
    // Not a ZooKeeper client.
    client r("redis://127.0.0.1:1");
    EXPECT_FALSE(dlock::zookeeper::fenced_set(r, l3, "res/value", "v", ec));
    EXPECT_EQ(ec, make_error_code(errc::unsupported));
}

TEST_F(zk_client, downgrade_from_write_to_read_keeps_a_queued_writer_out) {
    client a(url_);
    client b(url_);
    client c(url_);
    raw_zk raw(server_->host_port());
    auto rw = a.make_rw_mutex("catalog");
    rw.lock();
    std::atomic<bool> b_got{false};
    std::thread writer([&] {
        auto w = b.make_rw_mutex("catalog");
        if (w.try_lock_for(20s)) {
            b_got = true;
            w.unlock();
        }
    });
    ASSERT_TRUE(eventually([&] { return raw.children("/catalog").size() == 2; }));
    // The writer takes a read hold at once: a plain ephemeral node at its own sequence.
    ASSERT_TRUE(rw.try_lock_shared_for(0ms)) << a.last_error_detail();
    const auto a_session = dynamic_cast<detail::zk::zk_backend*>(detail::access::backend(a).get())
                               ->current_session()
                               ->id();
    std::string write_node;
    std::string read_node;
    for (const auto& k : raw.children("/catalog")) {
        Stat st{};
        ASSERT_TRUE(raw.exists("/catalog/" + k, &st));
        if (st.ephemeralOwner != a_session) continue;
        (k.find("__READ__") != std::string::npos ? read_node : write_node) = k;
    }
    ASSERT_FALSE(read_node.empty());
    ASSERT_FALSE(write_node.empty());
    EXPECT_EQ(read_node.substr(read_node.size() - 10), write_node.substr(write_node.size() - 10))
        << "the read node shares the writer's sequence";
    // The write hold ends; the read hold keeps the queued writer (and new readers) out.
    rw.unlock();
    EXPECT_FALSE(eventually([&] { return b_got.load(); }, 500ms))
        << "the queued writer slipped in between (CURATOR-621)";
    EXPECT_FALSE(c.acquire("catalog", {.wait = 0ms, .kind = lock_kind::read}))
        << "a new reader waits behind the queued writer";
    std::error_code ec;
    const auto st = a.inspect("catalog", lock_kind::write, ec);
    ASSERT_EQ(st.contenders.size(), 2u);
    EXPECT_TRUE(st.contenders[0].holds);
    EXPECT_FALSE(st.contenders[1].holds);
    rw.unlock_shared();
    writer.join();
    EXPECT_TRUE(b_got);
}

} // namespace
} // namespace dlock::test
