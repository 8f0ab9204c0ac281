// src/etcd/watch_hub: every watch of a client on one Watch stream, against a real etcd member,
// counted on the member's own metrics (etcd_debugging_mvcc_watch_stream_total: open Watch
// streams; etcd_debugging_mvcc_watcher_total: watches).
#include "etcd/rpc.hpp"
#include "etcd/url.hpp"
#include "etcd/watch.hpp"
#include "etcd/watch_hub.hpp"
#include "etcd_test_util.hpp"

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <algorithm>
#include <future>
#include <thread>

namespace {

using namespace std::chrono_literals;
using dlock::test::wait_until;

class etcd_watch_hub : public dlock::test::etcd_member_test {
protected:
    long long streams() const {
        return etcd_->member(0).metric("etcd_debugging_mvcc_watch_stream_total");
    }
    long long watchers() const {
        return etcd_->member(0).metric("etcd_debugging_mvcc_watcher_total");
    }
    /// `n` locks `<prefix>0`.. held by `c`, once each hold's watch is on the server.
    std::vector<dlock::lease> hold(dlock::client& c, const std::string& prefix, int n) const {
        std::vector<dlock::lease> held;
        for (int i = 0; i < n; ++i) {
            held.push_back(c.acquire(prefix + std::to_string(i), {.wait = 5s}));
            EXPECT_TRUE(held.back()) << i;
        }
        EXPECT_TRUE(wait_until([&] { return watchers() == n; }, 5s)) << watchers();
        return held;
    }
};

// 20 held locks and 2 waits of one client are 22 watches on one stream; another client adds a
// stream of its own. Every release takes its watch off the server (a cancel on the shared
// stream), so nothing is left once everything is released.
TEST_F(etcd_watch_hub, every_watch_of_a_client_shares_one_stream) {
    constexpr int held_locks = 20;
    auto a = connect(), b = connect();
    auto held = hold(*a, "hub-", held_locks);
    ASSERT_FALSE(HasFailure());
    EXPECT_EQ(streams(), 1);

    auto other = b->acquire("other", {.wait = 5s});
    ASSERT_TRUE(other);
    std::vector<std::future<dlock::lease>> waits;
    for (const char* name : {"other", "other"})
        waits.push_back(
            std::async(std::launch::async, [&a, name] { return a->acquire(name, {.wait = 20s}); }));
    // b's hold, and a's first waiter on b's key; a's second waits behind its first in the
    // client's own queue (one key per name and client), so it adds no watch.
    ASSERT_TRUE(wait_until([&] { return watchers() == held_locks + 2; }, 5s)) << watchers();
    EXPECT_EQ(streams(), 2) << "one stream per client";

    other.release();
    for (int served = 0; served < 2; ++served) { // in the client's queue order, unknown here
        auto ready = waits.end();
        ASSERT_TRUE(wait_until(
            [&] {
                ready = std::find_if(waits.begin(), waits.end(), [](auto& w) {
                    return w.valid() && w.wait_for(0s) == std::future_status::ready;
                });
                return ready != waits.end();
            },
            5s));
        auto l = ready->get();
        ASSERT_TRUE(l);
        l.release();
    }
    for (auto& l : held)
        l.release();
    EXPECT_TRUE(wait_until([&] { return watchers() == 0; }, 5s))
        << watchers() << " watches left on the server";
    EXPECT_EQ(streams(), 2) << "the streams stay open for the next watches";
}

// Answers go to their own watch: the key of one of many held locks deleted behind the client's
// back is the loss of that hold alone.
TEST_F(etcd_watch_hub, a_deleted_key_is_the_loss_of_its_own_hold_alone) {
    constexpr int held_locks = 12;
    auto a = connect(), b = connect();
    auto held = hold(*a, "own-", held_locks);
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(b->force_unlock("own-7", dlock::lock_kind::reentrant));
    EXPECT_TRUE(wait_until([&] { return held[7].lost(); }, 2s));
    for (int i = 0; i < held_locks; ++i) {
        if (i == 7) continue;
        EXPECT_FALSE(held[static_cast<std::size_t>(i)].lost()) << i;
    }
    ASSERT_TRUE(b->force_unlock("own-3", dlock::lock_kind::reentrant));
    EXPECT_TRUE(wait_until([&] { return held[3].lost(); }, 2s));
    for (int i = 0; i < held_locks; ++i) {
        if (i == 7 || i == 3) continue;
        EXPECT_FALSE(held[static_cast<std::size_t>(i)].lost()) << i;
    }
}

// When the member goes away every stream ends: the holds' watches are broken together, each
// hold reads its key again once a member answers, and watches it on a new stream; none is lost
// by it, and a deletion after the restart still reaches its own hold.
TEST_F(etcd_watch_hub, holds_watch_again_on_a_new_stream_after_the_member_restarts) {
    auto a = connect(), b = connect();
    auto held = hold(*a, "again-", 5);
    ASSERT_FALSE(HasFailure());
    EXPECT_EQ(a->metrics().watch_streams_broken, 0u);
    etcd_->member(0).stop();
    etcd_->member(0).start();
    ASSERT_TRUE(wait_until([&] { return watchers() == 5; }, 10s))
        << watchers() << " watches after the restart";
    EXPECT_EQ(streams(), 1);
    EXPECT_GE(a->metrics().watch_streams_broken, 1u);
    EXPECT_EQ(a->metrics().watches_cancelled, 0u) << "a broken stream cancels no watch";
    for (auto& l : held)
        EXPECT_FALSE(l.lost());
    ASSERT_TRUE(b->force_unlock("again-2", dlock::lock_kind::reentrant));
    EXPECT_TRUE(wait_until([&] { return held[2].lost(); }, 2s));
    EXPECT_FALSE(held[1].lost());
}

/// An Asio loop on a thread of its own for the backend's internals (rpc, key_watch), stopped
/// and joined at the end of the scope.
struct io_thread {
    asio::io_context io;
    asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
    std::thread t{[this] { io.run(); }};
    io_thread() = default;
    io_thread(const io_thread&) = delete;
    io_thread& operator=(const io_thread&) = delete;
    ~io_thread() {
        work.reset();
        io.stop();
        t.join();
    }
};

// A watch from a revision etcd has compacted away is created and then cancelled by etcd
// (compact_revision set in its answer): it ends `broken`, which its owner answers by reading
// again and watching anew, and the client counts it (metrics' watches_cancelled; fault row
// E07 asserts it under compactions). The stream itself is not broken by it.
TEST_F(etcd_watch_hub, a_watch_from_a_compacted_revision_ends_broken_and_is_counted) {
    namespace etcd = dlock::detail::etcd;
    for (int i = 0; i < 3; ++i)
        ASSERT_EQ(etcd_->etcdctl({"put", "compacted", std::to_string(i)}).second, 0);
    const auto [json, rc] = etcd_->etcdctl({"get", "compacted", "-w", "json"});
    ASSERT_EQ(rc, 0) << json;
    std::smatch rev;
    ASSERT_TRUE(std::regex_search(json, rev, std::regex(R"("revision":(\d+))"))) << json;
    ASSERT_EQ(etcd_->etcdctl({"compact", rev[1].str()}).second, 0);

    std::error_code ec;
    std::string why;
    const auto url = etcd::parse_etcd_url(etcd_->url(), ec, &why);
    ASSERT_FALSE(ec) << why;
    io_thread loop;
    etcd::rpc r(url, loop.io.get_executor(), ec, why);
    ASSERT_FALSE(ec) << why;
    std::promise<etcd::key_watch::result> ended;
    auto w = std::make_shared<etcd::key_watch>(r, "compacted", 1,
                                               [&](auto res) { ended.set_value(res); });
    asio::post(loop.io, [w] { w->start(); });
    auto f = ended.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "no answer to a compacted watch";
    EXPECT_EQ(f.get(), etcd::key_watch::result::broken);
    EXPECT_EQ(r.watches()->cancelled(), 1u);
    EXPECT_EQ(r.watches()->streams_broken(), 0u);

    // Watched from past the compaction the same key is not cancelled: its deletion ends it.
    std::promise<etcd::key_watch::result> deleted;
    auto w2 = std::make_shared<etcd::key_watch>(r, "compacted", std::stoll(rev[1].str()) + 1,
                                                [&](auto res) { deleted.set_value(res); });
    asio::post(loop.io, [w2] { w2->start(); });
    ASSERT_TRUE(wait_until([&] { return watchers() == 1; }, 5s)) << watchers();
    ASSERT_EQ(etcd_->etcdctl({"del", "compacted"}).second, 0);
    auto g = deleted.get_future();
    ASSERT_EQ(g.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(g.get(), etcd::key_watch::result::deleted);
    EXPECT_EQ(r.watches()->cancelled(), 1u);
    r.close();
}

} // namespace
