// Interop with a real Apache Curator 5.4.0 (Debian's libcurator-recipes-java, run by Java 17's
// single-file launcher from CuratorPeer.java): a dlock holder excludes a Curator
// InterProcessMutex and the other way round, on the same lock path; the same for
// InterProcessReadWriteLock (readers share across the two, a writer excludes both), and
// for InterProcessSemaphoreV2 (the leases of both count against the same permits); and a
// Kazoo 2.8 Lock (Debian's python3-kazoo, kazoo_peer.py) on the same path, both directions.
// Skipped when java, the Curator jars or Kazoo are missing.
#include "zookeeper_peer.hpp"
#include "zookeeper_test_util.hpp"

#include <dlock/error.hpp>

namespace dlock::test {
namespace {

/// A Kazoo 2.8 Lock: kazoo_peer.py <connect> <path> <action> <ms>.
class kazoo_peer : public peer_process {
public:
    kazoo_peer(const std::string& connect, const std::string& path, const std::string& action,
               std::chrono::milliseconds wait)
        : peer_process({"/usr/bin/python3", std::string(DLOCK_KAZOO_PEER_SOURCE), connect, path,
                        action, std::to_string(wait.count())}) {}
};

bool kazoo_available() {
    return ::access("/usr/bin/python3", X_OK) == 0 &&
           ::access("/usr/lib/python3/dist-packages/kazoo/recipe/lock.py", R_OK) == 0;
}

class curator_interop : public ::testing::Test {
protected:
    void SetUp() override {
        DLOCK_SKIP_WITHOUT_ZOOKEEPER();
        if (curator_class_path().empty())
            GTEST_SKIP() << "Debian's libcurator-recipes-java not installed";
        server_ = std::make_unique<zk_server>(zk_options{.tick_ms = 2000, .extra_config = {}});
        backend_ = zk_backend_for(server_->url());
    }
    std::unique_ptr<zk_server> server_;
    std::shared_ptr<detail::zk::zk_backend> backend_;
};

TEST_F(curator_interop, mutex_both_directions) {
    // Curator holds: dlock cannot take it, then gets it once Curator releases.
    {
        curator_peer peer(server_->host_port(), "/interop/mutex", "mutex", "hold", 10s);
        ASSERT_EQ(peer.line(), "ACQUIRED");
        std::error_code ec;
        EXPECT_FALSE(backend_->acquire("interop/mutex", waiting(0ms), ec));
        EXPECT_FALSE(ec);
        peer.release();
        auto h = backend_->acquire("interop/mutex", waiting(20s), ec);
        EXPECT_TRUE(h) << backend_->last_error_detail();
        EXPECT_EQ(peer.line(), "RELEASED");
        // dlock holds: Curator's acquire(500 ms) fails, and succeeds after the release.
        curator_peer tryer(server_->host_port(), "/interop/mutex", "mutex", "try", 500ms);
        EXPECT_EQ(tryer.line(), "NOT_ACQUIRED");
        curator_peer waiter(server_->host_port(), "/interop/mutex", "mutex", "try", 20s);
        ASSERT_TRUE(eventually(
            [&] {
                std::error_code e;
                return backend_->inspect("interop/mutex", lock_kind::reentrant, e)
                           .contenders.size() == 2;
            },
            20s));
        h->release_blocking(ec);
        EXPECT_EQ(waiter.line(), "ACQUIRED");
    }
}

TEST_F(curator_interop, read_write_lock_both_directions) {
    std::error_code ec;
    curator_peer reader(server_->host_port(), "/interop/rw", "read", "hold", 10s);
    ASSERT_EQ(reader.line(), "ACQUIRED");
    auto r = backend_->acquire("interop/rw", waiting(5s, lock_kind::read), ec);
    EXPECT_TRUE(r) << "a dlock reader shares with a Curator reader";
    EXPECT_FALSE(backend_->acquire("interop/rw", waiting(0ms, lock_kind::write), ec));
    reader.release();
    EXPECT_EQ(reader.line(), "RELEASED");
    r->release_blocking(ec);
    auto w = backend_->acquire("interop/rw", waiting(5s, lock_kind::write), ec);
    ASSERT_TRUE(w);
    curator_peer blocked(server_->host_port(), "/interop/rw", "read", "try", 500ms);
    EXPECT_EQ(blocked.line(), "NOT_ACQUIRED") << "a dlock writer excludes Curator readers";
    w->release_blocking(ec);
    curator_peer after(server_->host_port(), "/interop/rw", "write", "try", 10s);
    EXPECT_EQ(after.line(), "ACQUIRED");
}

TEST_F(curator_interop, semaphore_v2_both_directions) {
    // Two permits. Curator holds one lease: dlock gets the second, not a third.
    std::error_code ec;
    auto sem = [](std::chrono::milliseconds w) {
        auto o = waiting(w, lock_kind::semaphore);
        o.permits = 2;
        return o;
    };
    curator_peer holder(server_->host_port(), "/interop/sem", "semaphore:2", "hold", 10s);
    ASSERT_EQ(holder.line(), "ACQUIRED");
    auto d1 = backend_->acquire("interop/sem", sem(5s), ec);
    ASSERT_TRUE(d1) << backend_->last_error_detail();
    EXPECT_FALSE(backend_->acquire("interop/sem", sem(0ms), ec)) << "Curator's lease counts";
    EXPECT_FALSE(ec);
    // dlock holds one and waits for another: Curator's release wakes it.
    std::shared_ptr<detail::hold> d2;
    std::thread waiter([&] {
        std::error_code e;
        d2 = backend_->acquire("interop/sem", sem(20s), e);
    });
    holder.release();
    EXPECT_EQ(holder.line(), "RELEASED");
    waiter.join();
    ASSERT_TRUE(d2) << "Curator's release freed a permit for dlock";
    // dlock holds both permits: Curator's acquire(500 ms) fails, and succeeds after a release,
    // woken while it waits as the counting client.
    curator_peer tryer(server_->host_port(), "/interop/sem", "semaphore:2", "try", 500ms);
    EXPECT_EQ(tryer.line(), "NOT_ACQUIRED");
    curator_peer later(server_->host_port(), "/interop/sem", "semaphore:2", "try", 20s);
    ASSERT_TRUE(eventually(
        [&] {
            std::error_code e;
            // Curator holds the gate and counts its lease node with ours: 3 leases + 1 gate.
            return backend_->inspect("interop/sem", lock_kind::semaphore, e).contenders.size() == 4;
        },
        20s));
    d1->release_blocking(ec);
    EXPECT_EQ(later.line(), "ACQUIRED");
    EXPECT_EQ(later.line(), "RELEASED");
    d2->release_blocking(ec);
}

class kazoo_interop : public ::testing::Test {
protected:
    void SetUp() override {
        DLOCK_SKIP_WITHOUT_ZOOKEEPER();
        if (!kazoo_available()) GTEST_SKIP() << "Debian's python3-kazoo not installed";
        server_ = std::make_unique<zk_server>(zk_options{.tick_ms = 2000, .extra_config = {}});
        backend_ = zk_backend_for(server_->url());
    }
    std::unique_ptr<zk_server> server_;
    std::shared_ptr<detail::zk::zk_backend> backend_;
};

TEST_F(kazoo_interop, lock_both_directions) {
    // Kazoo holds (a <hex>__lock__<seq10> node): dlock reads it as a contender (any name
    // ending in 10 digits) and waits for it.
    std::error_code ec;
    kazoo_peer holder(server_->host_port(), "/interop/kazoo", "hold", 10s);
    ASSERT_EQ(holder.line(), "ACQUIRED");
    raw_zk raw(server_->host_port());
    const auto kids = raw.children("/interop/kazoo");
    ASSERT_EQ(kids.size(), 1u);
    EXPECT_NE(kids[0].find("__lock__"), std::string::npos) << kids[0];
    EXPECT_FALSE(backend_->acquire("interop/kazoo", waiting(0ms), ec));
    EXPECT_FALSE(ec);
    std::shared_ptr<detail::hold> h;
    std::thread waiter([&] {
        std::error_code e;
        h = backend_->acquire("interop/kazoo", waiting(20s), e);
    });
    ASSERT_TRUE(eventually([&] { return raw.children("/interop/kazoo").size() == 2; }));
    holder.release();
    EXPECT_EQ(holder.line(), "RELEASED");
    waiter.join();
    ASSERT_TRUE(h) << "Kazoo's release wakes the dlock waiter";
    // dlock holds: Kazoo (with extra_lock_patterns=["-lock-"]) does not get it, then does.
    kazoo_peer tryer(server_->host_port(), "/interop/kazoo", "try", 500ms);
    EXPECT_EQ(tryer.line(), "NOT_ACQUIRED");
    kazoo_peer later(server_->host_port(), "/interop/kazoo", "try", 20s);
    ASSERT_TRUE(eventually([&] { return raw.children("/interop/kazoo").size() == 2; }, 20s));
    h->release_blocking(ec);
    EXPECT_EQ(later.line(), "ACQUIRED");
    EXPECT_EQ(later.line(), "RELEASED");
}

} // namespace
} // namespace dlock::test
