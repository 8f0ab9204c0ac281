// The ZooKeeper backend against a real server (Debian's zookeeper 3.8 run by the fixture):
// Curator's node layout, exclusion among threads, clients and processes, FIFO hand-off with
// exactly one watch fired per release (no herd), try-once and bounded waits, loss on session
// expiry, on the session deadline while the server is unreachable and on a deleted node,
// inspection, the read-write rules, and typed errors for every bad input.
#include "critical_section_checker.hpp"
#include "zookeeper_fault_proxy.hpp"
#include "zookeeper_test_util.hpp"

#include <dlock/error.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dlock::test {
namespace {

using detail::hold;

class zk_lock : public ::testing::Test {
protected:
    void SetUp() override {
        DLOCK_SKIP_WITHOUT_ZOOKEEPER();
        server_ = std::make_unique<zk_server>();
    }
    std::string url(const std::string& params = "?session_timeout=4000&connect_timeout=10000") {
        return server_->url() + params;
    }
    std::unique_ptr<zk_server> server_;
};

TEST_F(zk_lock, nodes_follow_curators_layout_and_the_token_is_the_czxid) {
    raw_zk raw(server_->host_port());
    ASSERT_EQ(raw.create("/svc"), ZOK);
    auto b = zk_backend_for(server_->url("/svc"));
    std::error_code ec;
    auto h = b->acquire("locks/orders", waiting(5s), ec);
    ASSERT_FALSE(ec) << b->last_error_detail();
    ASSERT_TRUE(h);
    const auto kids = raw.children("/svc/locks/orders");
    ASSERT_EQ(kids.size(), 1u);
    // _c_<36-character uuid>-lock-<10 digits>
    const auto& n = kids[0];
    ASSERT_EQ(n.size(), 3u + 36 + 6 + 10) << n;
    EXPECT_TRUE(n.starts_with("_c_")) << n;
    EXPECT_EQ(n.substr(39, 6), "-lock-") << n;
    EXPECT_TRUE(std::all_of(n.begin() + 45, n.end(), [](char c) { return c >= '0' && c <= '9'; }))
        << n;
    EXPECT_EQ(std::count(n.begin() + 3, n.begin() + 39, '-'), 4) << n;
    Stat st{};
    ASSERT_TRUE(raw.exists("/svc/locks/orders/" + kids[0], &st));
    EXPECT_EQ(h->fencing_token(), static_cast<std::uint64_t>(st.czxid));
    EXPECT_EQ(st.ephemeralOwner, b->current_session()->id());
    EXPECT_EQ(raw.get("/svc/locks/orders/" + kids[0]), b->node_data()); // the host's address
    EXPECT_GT(h->valid_until(), std::chrono::steady_clock::now());
    EXPECT_LE(h->valid_until(), std::chrono::steady_clock::now() + 4s);
    // The parent is a container: persistent-looking (no ephemeral owner).
    Stat parent{};
    ASSERT_TRUE(raw.exists("/svc/locks/orders", &parent));
    EXPECT_EQ(parent.ephemeralOwner, 0);

    h->release_blocking(ec);
    EXPECT_FALSE(ec);
    EXPECT_TRUE(h->released());
    EXPECT_TRUE(raw.children("/svc/locks/orders").empty());
    h->release_blocking(ec); // twice: nothing
    EXPECT_FALSE(ec);
}

TEST_F(zk_lock, exclusion_among_threads_of_two_clients_with_increasing_tokens) {
    auto b1 = zk_backend_for(url());
    auto b2 = zk_backend_for(url());
    critical_section_checker check;
    std::mutex mu;
    std::uint64_t last_token = 0;
    int inversions = 0;
    int acquired = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t)
        threads.emplace_back([&, t] {
            auto& b = t % 2 ? *b1 : *b2;
            for (int i = 0; i < 10; ++i) {
                std::error_code ec;
                auto h = b.acquire("excl", waiting(20s), ec);
                if (ec || !h) continue;
                {
                    auto in = check.enter_write();
                    std::lock_guard lk(mu);
                    if (*h->fencing_token() <= last_token) ++inversions;
                    last_token = *h->fencing_token();
                    ++acquired;
                }
                h->release_blocking(ec);
            }
        });
    for (auto& t : threads)
        t.join();
    EXPECT_EQ(acquired, 60);
    EXPECT_EQ(check.violations(), 0);
    EXPECT_EQ(inversions, 0);
}

TEST_F(zk_lock, exclusion_among_eight_processes) {
    // Children fork before any backend exists in this process (no threads to lose).
    void* mem = ::mmap(nullptr, sizeof(critical_section_checker), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    auto* check = new (mem) critical_section_checker();
    const auto u = url();
    const int failed = run_processes(8, [&] {
        int got = 0;
        std::error_code ec;
        auto b = detail::make_zookeeper_backend(u, ec, nullptr);
        for (int i = 0; b && i < 5; ++i) {
            auto h = b->acquire("procs", waiting(30s), ec);
            if (ec || !h) break;
            {
                auto in = check->enter_write();
                ++got;
            }
            h->release_blocking(ec);
        }
        if (b) b->shutdown();
        return got == 5;
    });
    EXPECT_EQ(failed, 0);
    EXPECT_EQ(check->violations(), 0);
    ::munmap(mem, sizeof(critical_section_checker));
}

TEST_F(zk_lock, protected_mode_adopts_the_node_of_a_create_whose_answer_was_lost) {
    zk_fault_proxy proxy(server_->port());
    auto b = zk_backend_for("zk://127.0.0.1:" + std::to_string(proxy.port()) +
                            "?session_timeout=4000&connect_timeout=3000");
    std::error_code ec;
    // Connect (and check the chroot) first and make the directory, so that the armed create
    // is the lock node's.
    EXPECT_FALSE(b->is_locked("protected", lock_kind::reentrant, ec));
    ASSERT_FALSE(ec) << b->last_error_detail();
    raw_zk raw(server_->host_port());
    ASSERT_EQ(raw.create("/protected"), ZOK);
    proxy.arm();
    auto h = b->acquire("protected", waiting(10s), ec);
    ASSERT_TRUE(h) << ec.message() << ": " << b->last_error_detail();
    EXPECT_EQ(proxy.dropped(), 1) << "the create's answer was lost";
    EXPECT_GE(b->metrics().reconnects, 1u);
    const auto kids = raw.children("/protected");
    ASSERT_EQ(kids.size(), 1u) << "the node was found by its _c_<uuid> prefix, not created twice";
    Stat st{};
    ASSERT_TRUE(raw.exists("/protected/" + kids[0], &st));
    EXPECT_EQ(h->fencing_token(), static_cast<std::uint64_t>(st.czxid));
    h->release_blocking(ec);
    EXPECT_FALSE(ec);
    EXPECT_TRUE(raw.children("/protected").empty());
}

TEST_F(zk_lock, fifo_hand_off_fires_one_watch_per_release) {
    auto holder_b = zk_backend_for(url());
    std::error_code ec;
    auto holder = holder_b->acquire("fifo", waiting(5s), ec);
    ASSERT_TRUE(holder) << holder_b->last_error_detail();
    constexpr int n = 5;
    std::vector<std::shared_ptr<detail::zk::zk_backend>> clients;
    std::vector<std::thread> waiters;
    std::mutex mu;
    std::vector<int> order;
    for (int i = 0; i < n; ++i) {
        clients.push_back(zk_backend_for(url()));
        waiters.emplace_back([&, i] {
            std::error_code e;
            auto h = clients[static_cast<std::size_t>(i)]->acquire("fifo", waiting(30s), e);
            if (!h) return;
            {
                std::lock_guard lk(mu);
                order.push_back(i);
            }
            h->release_blocking(e);
        });
        // The next waiter queues only after this one's node exists (arrival order).
        ASSERT_TRUE(eventually([&] {
            std::error_code e;
            return holder_b->inspect("fifo", lock_kind::reentrant, e).contenders.size() ==
                   static_cast<std::size_t>(i + 2);
        }));
    }
    holder->release_blocking(ec);
    EXPECT_FALSE(ec);
    for (auto& t : waiters)
        t.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
    std::uint64_t wakes = holder_b->wakes();
    for (auto& c : clients)
        wakes += c->wakes();
    EXPECT_EQ(wakes, static_cast<std::uint64_t>(n)) << "each release wakes its successor only";
}

TEST_F(zk_lock, waiting_without_a_deadline_is_woken_by_the_release) {
    // Threads of one client, lock() without a wait bound (acquire_options{}): nothing but the
    // backend keeps a waiting acquisition alive while it sits on its watch.
    auto b = zk_backend_for(url());
    critical_section_checker check;
    std::atomic<int> done{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 5; ++i) {
                std::error_code ec;
                auto h = b->acquire("forever", acquire_options{}, ec);
                if (!h) return;
                { auto in = check.enter_write(); }
                h->release_blocking(ec);
                ++done;
            }
        });
    for (auto& t : threads)
        t.join();
    EXPECT_EQ(done, 15);
    EXPECT_EQ(check.violations(), 0);
}

TEST_F(zk_lock, try_once_and_bounded_wait_leave_no_node_behind) {
    auto a = zk_backend_for(url());
    auto b = zk_backend_for(url());
    std::error_code ec;
    auto h = a->acquire("try", waiting(5s), ec);
    ASSERT_TRUE(h);
    auto none = b->acquire("try", waiting(0ms), ec);
    EXPECT_FALSE(none);
    EXPECT_FALSE(ec) << "not acquired is not an error";
    const auto t0 = std::chrono::steady_clock::now();
    none = b->acquire("try", waiting(300ms), ec);
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_FALSE(none);
    EXPECT_FALSE(ec);
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 2300ms);
    raw_zk raw(server_->host_port());
    EXPECT_EQ(raw.children("/try").size(), 1u) << "the waiter deleted its node";
    h->release_blocking(ec);
    auto now_free = b->acquire("try", waiting(0ms), ec);
    EXPECT_TRUE(now_free);
}

TEST_F(zk_lock, session_expiry_while_holding_signals_loss_and_frees_the_lock) {
    auto a = zk_backend_for(url());
    auto b = zk_backend_for(url());
    std::error_code ec;
    auto h = a->acquire("expiry", waiting(5s), ec);
    ASSERT_TRUE(h);
    std::atomic<bool> called{false};
    h->on_lost([&] { called = true; });
    auto stop = h->stop_token();
    expire_session(server_->host_port(), *a);
    // lost() turns true before the callbacks run (on the I/O thread): wait for both.
    ASSERT_TRUE(eventually([&] { return h->lost() && called; }, 5s));
    EXPECT_TRUE(stop.stop_requested());
    EXPECT_LT(h->valid_until(), std::chrono::steady_clock::now());
    auto h2 = b->acquire("expiry", waiting(5s), ec);
    EXPECT_TRUE(h2) << "the expired holder's node is gone";
    h->release_blocking(ec);
    EXPECT_EQ(ec, make_error_code(errc::not_owner));
    // The backend opens a new session for later acquisitions.
    h2->release_blocking(ec);
    auto h3 = a->acquire("expiry", waiting(5s), ec);
    EXPECT_TRUE(h3) << a->last_error_detail();
}

TEST_F(zk_lock, deadline_passing_while_the_server_is_unreachable_is_loss) {
    // session_timeout 1000 ms (tickTime 200: allowed); the server is frozen, so no answer comes.
    // The connect bound is the other tests' (a first connect under ASan on a busy machine took
    // longer than 1 s once); the loss below is the session's deadline, not the connect bound.
    auto a = zk_backend_for(url("?session_timeout=1000&connect_timeout=10000"));
    std::error_code ec;
    auto h = a->acquire("deadline", waiting(10s), ec);
    ASSERT_TRUE(h) << ec.message() << ": " << a->last_error_detail();
    const auto vu = h->valid_until();
    server_->pause();
    ASSERT_TRUE(eventually([&] { return h->lost(); }, 5s));
    const auto lost_at = std::chrono::steady_clock::now();
    server_->resume();
    EXPECT_GE(lost_at, vu - 50ms) << "not lost before its deadline";
    EXPECT_LT(lost_at, vu + 1500ms);
    // The server expires the old session; a new acquisition works.
    auto h2 = a->acquire("deadline", waiting(10s), ec);
    EXPECT_TRUE(h2) << a->last_error_detail();
}

TEST_F(zk_lock, force_unlock_deletes_the_holders_node_and_the_holder_loses_it) {
    auto a = zk_backend_for(url());
    auto b = zk_backend_for(url());
    std::error_code ec;
    auto h = a->acquire("forced", waiting(5s), ec);
    ASSERT_TRUE(h);
    EXPECT_TRUE(b->is_locked("forced", lock_kind::reentrant, ec));
    EXPECT_TRUE(b->force_unlock("forced", lock_kind::reentrant, ec));
    EXPECT_FALSE(ec);
    ASSERT_TRUE(eventually([&] { return h->lost(); }, 5s));
    EXPECT_FALSE(b->is_locked("forced", lock_kind::reentrant, ec));
    EXPECT_FALSE(b->force_unlock("forced", lock_kind::reentrant, ec));
}

TEST_F(zk_lock, inspect_and_list_show_the_queue) {
    auto a = zk_backend_for(url());
    auto b = zk_backend_for(url());
    std::error_code ec;
    auto h = a->acquire("jobs/nightly", waiting(5s), ec);
    ASSERT_TRUE(h);
    std::thread waiter([&] {
        std::error_code e;
        auto w = b->acquire("jobs/nightly", waiting(10s), e);
        if (w) w->release_blocking(e);
    });
    ASSERT_TRUE(eventually([&] {
        std::error_code e;
        return a->inspect("jobs/nightly", lock_kind::reentrant, e).contenders.size() == 2;
    }));
    const auto st = a->inspect("jobs/nightly", lock_kind::reentrant, ec);
    ASSERT_FALSE(ec);
    EXPECT_TRUE(st.exists);
    EXPECT_EQ(st.kind, "lock");
    ASSERT_EQ(st.contenders.size(), 2u);
    EXPECT_TRUE(st.contenders[0].holds);
    EXPECT_FALSE(st.contenders[1].holds);
    EXPECT_EQ(st.contenders[0].session, detail::zk::session_hex(a->current_session()->id()));
    EXPECT_EQ(st.contenders[1].session, detail::zk::session_hex(b->current_session()->id()));
    EXPECT_EQ(st.contenders[0].token, h->fencing_token());
    EXPECT_TRUE(st.contenders[0].owner.starts_with("_c_"));
    EXPECT_FALSE(a->remaining_lease("jobs/nightly", lock_kind::reentrant, ec));
    const auto all = a->list("jobs/*", ec);
    ASSERT_FALSE(ec);
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].name, "jobs/nightly");
    EXPECT_TRUE(a->list("other*", ec).empty());
    h->release_blocking(ec);
    waiter.join();
    EXPECT_FALSE(a->inspect("nothing/here", lock_kind::reentrant, ec).exists);
}

TEST_F(zk_lock, readers_share_and_a_queued_writer_blocks_later_readers) {
    auto a = zk_backend_for(url());
    std::error_code ec;
    auto r1 = a->acquire("rw", waiting(5s, lock_kind::read), ec);
    auto r2 = a->acquire("rw", waiting(5s, lock_kind::read), ec);
    ASSERT_TRUE(r1 && r2) << "readers share";
    EXPECT_FALSE(r1->fencing_token()) << "a read hold has no token";
    EXPECT_FALSE(a->acquire("rw", waiting(0ms, lock_kind::write), ec));
    std::atomic<bool> writer_got{false};
    std::thread writer([&] {
        std::error_code e;
        auto w = a->acquire("rw", waiting(10s, lock_kind::write), e);
        writer_got = static_cast<bool>(w);
        if (w) {
            EXPECT_TRUE(w->fencing_token());
            w->release_blocking(e);
        }
    });
    ASSERT_TRUE(eventually([&] {
        std::error_code e;
        return a->inspect("rw", lock_kind::write, e).contenders.size() == 3;
    }));
    EXPECT_FALSE(a->acquire("rw", waiting(0ms, lock_kind::read), ec))
        << "a reader behind a queued writer waits (writers are not starved)";
    r1->release_blocking(ec);
    r2->release_blocking(ec);
    writer.join();
    EXPECT_TRUE(writer_got);
}

TEST_F(zk_lock, bad_inputs_give_typed_errors) {
    std::error_code ec;
    std::string why;
    // Unreachable ensemble: unavailable within the connect timeout, with the address.
    const auto dead = "zk://127.0.0.1:" + std::to_string(free_port()) + "?connect_timeout=400";
    auto d = zk_backend_for(dead);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(d->acquire("x", waiting(0ms), ec));
    EXPECT_EQ(ec, make_error_code(errc::unavailable));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
    EXPECT_NE(d->last_error_detail().find("127.0.0.1"), std::string::npos)
        << d->last_error_detail();
    // A chroot that does not exist.
    auto c = zk_backend_for(server_->url("/missing/root") + "?connect_timeout=2000");
    EXPECT_FALSE(c->acquire("x", waiting(1s), ec));
    EXPECT_EQ(ec, make_error_code(errc::configuration_error));
    EXPECT_NE(c->last_error_detail().find("/missing/root"), std::string::npos);
    // A child that is not a lock node in the lock directory.
    raw_zk raw(server_->host_port());
    ASSERT_EQ(raw.create("/polluted"), ZOK);
    ASSERT_EQ(raw.create("/polluted/config"), ZOK);
    auto b = zk_backend_for(url());
    EXPECT_FALSE(b->acquire("polluted", waiting(1s), ec));
    EXPECT_EQ(ec, make_error_code(errc::configuration_error));
    EXPECT_NE(b->last_error_detail().find("config"), std::string::npos);
    EXPECT_EQ(raw.children("/polluted").size(), 1u) << "its own node was deleted again";
    // Bad names, kinds and options.
    EXPECT_FALSE(b->acquire("a//b", waiting(0ms), ec));
    EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
    EXPECT_FALSE(b->acquire("zookeeper/quota", waiting(0ms), ec));
    EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
    EXPECT_FALSE(b->acquire("x", waiting(0ms, lock_kind::simple), ec));
    EXPECT_EQ(ec, make_error_code(errc::unsupported));
    EXPECT_FALSE(b->supports(lock_kind::simple));
    auto fixed = waiting(0ms);
    fixed.lease = 10s;
    EXPECT_FALSE(b->acquire("x", fixed, ec));
    EXPECT_EQ(ec, make_error_code(errc::unsupported));
    // URLs asking for what Debian's client lacks.
    EXPECT_FALSE(detail::make_zookeeper_backend("zks://127.0.0.1:1", ec, &why));
    EXPECT_EQ(ec, make_error_code(errc::unsupported));
    EXPECT_FALSE(detail::make_zookeeper_backend("zk://u:p@127.0.0.1:1", ec, &why));
    EXPECT_EQ(ec, make_error_code(errc::unsupported));
    EXPECT_FALSE(detail::make_zookeeper_backend("zk://127.0.0.1:1?nope=1", ec, &why));
    EXPECT_EQ(ec, make_error_code(errc::configuration_error));
}

// Every answer renews the session; its holds hear of it once it moved by 1 % of the timeout
// (session.cpp), so a hold's valid_until trails the session's by less than that.
TEST_F(zk_lock, a_holds_valid_until_follows_its_sessions_within_a_hundredth_of_the_timeout) {
    auto a = zk_backend_for(url("?session_timeout=4000"));
    std::error_code ec;
    auto h = a->acquire("follows", waiting(5s), ec);
    ASSERT_TRUE(h) << a->last_error_detail();
    const auto s = a->current_session();
    ASSERT_EQ(s->negotiated(), 4000ms);
    const auto first = h->valid_until();
    // Requests (answered, so renewing) until the session moved 10 hundredths on.
    ASSERT_TRUE(eventually(
        [&] {
            (void)a->is_locked("follows", lock_kind::reentrant, ec);
            return s->valid_until() > first + 400ms;
        },
        5s));
    const auto hold_until = h->valid_until(); // first: the session's only grows
    const auto session_until = s->valid_until();
    EXPECT_GT(hold_until, first);
    EXPECT_LE(hold_until, session_until);
    EXPECT_GT(hold_until, session_until - 40ms);
}

TEST_F(zk_lock, negotiated_session_timeout_is_reported_and_clamped) {
    // tickTime 200 ms: the server allows 400 .. 4000 ms; 60 s is clamped to 4 s.
    auto a = zk_backend_for(url("?session_timeout=60000"));
    std::error_code ec;
    auto h = a->acquire("clamp", waiting(5s), ec);
    ASSERT_TRUE(h);
    EXPECT_EQ(a->current_session()->negotiated(), 4000ms);
    EXPECT_LE(h->valid_until(), std::chrono::steady_clock::now() + 4000ms);
}

// A URL without server_lag has the server asked (server_lag.hpp): a standalone server, also
// under a chroot (/zookeeper/config is read outside it), leaves the lease as it was; a lag the
// negotiated timeout cannot carry is refused, with what to change.
TEST_F(zk_lock, server_lag_is_read_from_a_standalone_server_and_checked_against_the_timeout) {
    raw_zk raw(server_->host_port());
    ASSERT_EQ(raw.create("/rooted"), ZOK);
    auto a = zk_backend_for(server_->url("/rooted") + "?session_timeout=4000");
    std::error_code ec;
    const auto before = std::chrono::steady_clock::now();
    auto h = a->acquire("lag", waiting(5s), ec);
    ASSERT_TRUE(h) << a->last_error_detail();
    // Lag 0: the lease counts from a request of this acquisition (with the ensemble's assumed
    // 12 s the session would have been refused: 4 s is not above 18 s).
    EXPECT_GT(h->valid_until(), before + 3900ms);
    h->release_blocking(ec);
    EXPECT_FALSE(ec);

    // 3 s of lag fits the URL's 9 s, not the 4 s the server negotiates.
    auto b = zk_backend_for(url("?session_timeout=9000&server_lag=3000"));
    EXPECT_FALSE(b->acquire("lag", waiting(1s), ec));
    EXPECT_EQ(ec, make_error_code(errc::configuration_error));
    EXPECT_NE(b->last_error_detail().find("negotiated timeout (4000 ms)"), std::string::npos)
        << b->last_error_detail();
    EXPECT_FALSE(b->acquire("lag", waiting(1s), ec)) << "refused again, on a new session";
    EXPECT_EQ(ec, make_error_code(errc::configuration_error));
}

} // namespace
} // namespace dlock::test
