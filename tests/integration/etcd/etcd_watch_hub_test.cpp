// src/etcd/watch_hub: every watch of a client on one Watch stream, against a real etcd member,
// counted on the member's own metrics (etcd_debugging_mvcc_watch_stream_total: open Watch
// streams; etcd_debugging_mvcc_watcher_total: watches).
#include "etcd/own_watches.hpp"
#include "etcd/rpc.hpp"
#include "etcd/url.hpp"
#include "etcd/watch.hpp"
#include "etcd/watch_hub.hpp"
#include "etcd_test_util.hpp"

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>

#include <algorithm>
#include <atomic>
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
// stream of its own. A waiter's watch goes when it is granted; a released hold's watch of its
// Mutex key stays for the next hold of the name (own_watches.hpp): a's 21 keys and b's one.
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
    EXPECT_TRUE(wait_until([&] { return watchers() == held_locks + 2; }, 5s))
        << watchers() << " watches on the server";
    EXPECT_EQ(streams(), 2) << "the streams stay open for the next watches";
}

// The next hold of a name takes over the watch its client's last hold of it kept: 51 holds of
// one name send one watch request (a create) instead of 51 creates and 50 cancels. The kept
// watch brings a deletion to the hold of the moment, and a release's own deletion, whose event
// may come after the next grant, is not taken for that next hold's loss (its release would
// then answer not_owner).
TEST_F(etcd_watch_hub, the_next_hold_of_a_name_takes_over_the_watch_of_the_last) {
    auto a = connect(), b = connect();
    const auto watch_requests = [&] {
        return etcd_->member(0).metric("grpc_server_msg_received_total",
                                       "grpc_service=\"etcdserverpb.Watch\"");
    };
    const auto before = watch_requests();
    for (int i = 0; i < 50; ++i) {
        auto l = a->acquire("kept", {.wait = 5s});
        ASSERT_TRUE(l) << i;
        std::error_code ec;
        l.release(ec);
        ASSERT_FALSE(ec) << "pair " << i << ": " << ec.message();
    }
    auto held = a->acquire("kept", {.wait = 5s});
    ASSERT_TRUE(held);
    ASSERT_TRUE(b->force_unlock("kept", dlock::lock_kind::reentrant));
    EXPECT_TRUE(wait_until([&] { return held.lost(); }, 2s));
    EXPECT_EQ(watch_requests() - before, 1) << "watch requests for 51 holds of one name";
    EXPECT_EQ(watchers(), 1);
    EXPECT_EQ(a->metrics().losses[static_cast<std::size_t>(dlock::loss_cause::gone)], 1u);

    // After the loss the same watch serves the next hold too.
    auto again = a->acquire("kept", {.wait = 5s});
    ASSERT_TRUE(again);
    ASSERT_TRUE(b->force_unlock("kept", dlock::lock_kind::reentrant));
    EXPECT_TRUE(wait_until([&] { return again.lost(); }, 2s));
    EXPECT_EQ(watch_requests() - before, 1);
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

/// An rpc of `url` on a loop of its own (the backend's internals without the backend); `r` is
/// null (and the test failed) when the URL or the channel is refused.
struct internals {
    io_thread loop;
    std::unique_ptr<dlock::detail::etcd::rpc> r;
    explicit internals(const std::string& url_text) {
        namespace etcd = dlock::detail::etcd;
        std::error_code ec;
        std::string why;
        const auto url = etcd::parse_etcd_url(url_text, ec, &why);
        if (!ec) r = std::make_unique<etcd::rpc>(url, loop.io.get_executor(), ec, why);
        if (ec) {
            r.reset();
            ADD_FAILURE() << why;
        }
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

    internals in(etcd_->url());
    ASSERT_TRUE(in.r);
    auto& r = *in.r;
    auto& loop = in.loop;
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

/// Runs `f` on `loop`'s thread and waits for it.
void run_on(io_thread& loop, const std::function<void()>& f) {
    std::promise<void> done;
    asio::post(loop.io, [&] {
        f();
        done.set_value();
    });
    done.get_future().wait();
}

// own_watches (the kept watch of a Mutex key, hold.cpp): a deletion at or before the new
// holder's revision (the last hold's release, whose event can come after the next grant) is
// not the new holder's; a later one is. The I/O thread is kept busy while the key is deleted
// and put again, so that deletion's event is handled after the take-over; the deletion of
// another key on the same stream, later, shows when it has been handled.
TEST_F(etcd_watch_hub, a_kept_watch_gives_its_next_holder_only_the_deletions_after_its_key) {
    namespace etcd = dlock::detail::etcd;
    using result = etcd::key_watch::result;
    ASSERT_EQ(etcd_->etcdctl({"put", "own", ""}).second, 0);
    ASSERT_EQ(etcd_->etcdctl({"put", "marker", ""}).second, 0);
    internals in(etcd_->url());
    ASSERT_TRUE(in.r);
    auto& r = *in.r;
    auto& loop = in.loop;
    std::unique_ptr<etcd::own_watches> kept; // on the loop's thread only
    std::shared_ptr<etcd::key_watch> marker;
    std::atomic<int> first{0}, second{0};
    std::promise<void> marker_gone;
    std::uint64_t ticket = 0;
    run_on(loop, [&] {
        kept = std::make_unique<etcd::own_watches>(r);
        ticket = kept->attach("own", 0, 0, [&](result res) { first += res == result::deleted; });
        marker = std::make_shared<etcd::key_watch>(r, "marker", 0,
                                                   [&](result) { marker_gone.set_value(); });
        marker->start();
    });
    ASSERT_NE(ticket, 0u);
    ASSERT_TRUE(wait_until([&] { return watchers() == 2; }, 5s)) << watchers();
    run_on(loop, [&] {
        kept->detach("own", ticket);
        ASSERT_EQ(etcd_->etcdctl({"del", "own"}).second, 0);
        ASSERT_EQ(etcd_->etcdctl({"put", "own", ""}).second, 0);
        const auto [json, rc] = etcd_->etcdctl({"get", "own", "-w", "json"});
        std::smatch rev;
        ASSERT_TRUE(std::regex_search(json, rev, std::regex(R"("create_revision":(\d+))"))) << json;
        ticket = kept->attach("own", std::stoll(rev[1].str()), 0,
                              [&](result res) { second += res == result::deleted; });
        EXPECT_EQ(kept->size(), 1u) << "the idle watch taken over";
    });
    ASSERT_EQ(etcd_->etcdctl({"del", "marker"}).second, 0);
    ASSERT_EQ(marker_gone.get_future().wait_for(5s), std::future_status::ready);
    EXPECT_EQ(first, 0) << "the first holder was detached";
    EXPECT_EQ(second, 0) << "the last holder's deletion was given to the next";
    ASSERT_EQ(etcd_->etcdctl({"del", "own"}).second, 0);
    EXPECT_TRUE(wait_until([&] { return second == 1; }, 5s));
    EXPECT_EQ(watchers(), 1) << "one watch of the key throughout";
    run_on(loop, [&] {
        kept.reset();
        marker.reset();
    });
    r.close();
}

// own_watches' bounds: beyond `max_idle` idle watches the least recently released one goes
// (its cancel reaches etcd), and with a `linger` of 0 nothing stays idle past its release.
TEST_F(etcd_watch_hub, kept_watches_are_bounded_in_number_and_age) {
    namespace etcd = dlock::detail::etcd;
    const auto watch_requests = [&] {
        return etcd_->member(0).metric("grpc_server_msg_received_total",
                                       "grpc_service=\"etcdserverpb.Watch\"");
    };
    const auto before = watch_requests();
    internals in(etcd_->url());
    ASSERT_TRUE(in.r);
    std::unique_ptr<etcd::own_watches> few, brief; // on the loop's thread only
    const auto nothing = [](etcd::key_watch::result) {};
    run_on(in.loop, [&] {
        few = std::make_unique<etcd::own_watches>(*in.r, 2);
        for (const char* key : {"k1", "k2", "k3"})
            few->detach(key, few->attach(key, 0, 0, nothing));
        EXPECT_EQ(few->idle(), 2u);
        EXPECT_EQ(few->size(), 2u);
    });
    // Three creates and the first key's cancel, then two watches left on the server.
    ASSERT_TRUE(wait_until([&] { return watch_requests() - before == 4; }, 5s))
        << watch_requests() - before;
    EXPECT_EQ(watchers(), 2);
    run_on(in.loop, [&] {
        brief = std::make_unique<etcd::own_watches>(*in.r, 256, std::chrono::seconds(0));
        brief->detach("k4", brief->attach("k4", 0, 0, nothing));
        EXPECT_EQ(brief->idle(), 0u);
        EXPECT_EQ(brief->size(), 0u);
    });
    ASSERT_TRUE(wait_until([&] { return watch_requests() - before == 6; }, 5s))
        << watch_requests() - before;
    EXPECT_EQ(watchers(), 2);
    run_on(in.loop, [&] {
        few.reset();
        brief.reset();
    });
    in.r->close();
}

} // namespace
