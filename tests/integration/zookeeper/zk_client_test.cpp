// dlock::client on zk:// URLs end to end (the lead's client wiring over this backend): leases,
// lock objects with local re-entry, the read-write lock object, async acquisition,
// inspect/list, and the Redis-only calls refused with errc::unsupported.
#include "zk_test_util.hpp"

#include <dlock/dlock.hpp>

#include <future>

namespace dlock::test {
namespace {

class ZkClient : public ::testing::Test {
protected:
    void SetUp() override {
        DLOCK_SKIP_WITHOUT_ZOOKEEPER();
        server_ = std::make_unique<zk_server>();
        url_ = server_->url() + "?session_timeout=4000&connect_timeout=2000";
    }
    std::unique_ptr<zk_server> server_;
    std::string url_;
};

TEST_F(ZkClient, LeasesExcludeAndCarryTheCzxid) {
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

TEST_F(ZkClient, MutexReentersLocallyWithOneNode) {
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

TEST_F(ZkClient, ReadWriteLockObject) {
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

TEST_F(ZkClient, AsyncAcquireInspectListAndUnsupportedCalls) {
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
    a.command(ping, e);
    EXPECT_EQ(e, make_error_code(errc::unsupported));
    EXPECT_THROW(client("zks://127.0.0.1:2181"), dlock::error);
}

} // namespace
} // namespace dlock::test
