// The ZooKeeper semaphore (lock_kind::semaphore, Curator's InterProcessSemaphoreV2 layout)
// against a real server: the node layout and the lease's czxid token, N permits admitting
// exactly N of N+k processes at once, a freed permit waking the one client that counts (watch
// count, no polling), a bounded wait that leaves no node behind, loss on session expiry, and
// inspect / list / force_unlock.
#include "critical_section_checker.hpp"
#include "zookeeper_test_util.hpp"

#include <dlock/error.hpp>

#include <algorithm>
#include <atomic>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dlock::test {
namespace {

acquire_options permits(unsigned n, std::chrono::milliseconds wait) {
    auto o = waiting(wait, lock_kind::semaphore);
    o.permits = n;
    return o;
}

bool protected_name(const std::string& n, std::string_view infix) {
    // _c_<36-character uuid>-<infix><10 digits>
    if (n.size() != 3 + 36 + 1 + infix.size() + 10 || !n.starts_with("_c_")) return false;
    if (n.substr(39, 1 + infix.size()) != "-" + std::string(infix)) return false;
    return std::all_of(n.end() - 10, n.end(), [](char c) { return c >= '0' && c <= '9'; });
}

class zk_semaphore : public ::testing::Test {
protected:
    void SetUp() override {
        DLOCK_SKIP_WITHOUT_ZOOKEEPER();
        server_ = std::make_unique<zk_server>();
    }
    std::string url() const {
        return server_->url() + "?session_timeout=4000&connect_timeout=10000";
    }
    std::unique_ptr<zk_server> server_;
};

TEST_F(zk_semaphore, layout_is_curators_semaphore_v2_and_the_token_is_the_lease_czxid) {
    auto b = zk_backend_for(url());
    std::error_code ec;
    auto h1 = b->acquire("pool", permits(2, 5s), ec);
    auto h2 = b->acquire("pool", permits(2, 5s), ec);
    ASSERT_TRUE(h1 && h2) << ec.message() << ": " << b->last_error_detail();
    raw_zk raw(server_->host_port());
    auto leases = raw.children("/pool/leases");
    ASSERT_EQ(leases.size(), 2u);
    for (const auto& n : leases)
        EXPECT_TRUE(protected_name(n, "lease-")) << n;
    // The gate (Curator's internal InterProcessMutex) is released once the lease is held.
    EXPECT_TRUE(eventually([&] { return raw.children("/pool/locks").empty(); }));
    std::sort(leases.begin(), leases.end(), [](const std::string& a, const std::string& c) {
        return a.substr(45) < c.substr(45);
    });
    Stat st{};
    ASSERT_TRUE(raw.exists("/pool/leases/" + leases[0], &st));
    EXPECT_EQ(h1->fencing_token(), static_cast<std::uint64_t>(st.czxid));
    EXPECT_EQ(st.ephemeralOwner, b->current_session()->id());
    EXPECT_EQ(raw.get("/pool/leases/" + leases[0]), b->node_data());
    Stat parent{};
    ASSERT_TRUE(raw.exists("/pool/leases", &parent));
    EXPECT_EQ(parent.ephemeralOwner, 0) << "a container, as Curator 5.4 creates it";
    // A third lease does not fit in 2 permits.
    EXPECT_FALSE(b->acquire("pool", permits(2, 0ms), ec));
    EXPECT_FALSE(ec);
    EXPECT_EQ(raw.children("/pool/leases").size(), 2u) << "the refused lease node was deleted";
    h1->release_blocking(ec);
    EXPECT_FALSE(ec);
    auto h3 = b->acquire("pool", permits(2, 0ms), ec);
    EXPECT_TRUE(h3);
    EXPECT_GT(*h3->fencing_token(), *h2->fencing_token());
    // Bad permits and kinds.
    EXPECT_FALSE(b->acquire("pool", permits(0, 0ms), ec));
    EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
    EXPECT_FALSE(b->reentrant(lock_kind::semaphore));
    EXPECT_TRUE(b->supports(lock_kind::semaphore));
}

TEST_F(zk_semaphore, n_permits_admit_exactly_n_of_n_plus_k_processes_at_once) {
    constexpr int n = 3;
    constexpr int procs = 6;
    struct shared {
        critical_section_checker check{n}; // more than n inside at once is a violation
        std::atomic<int> inside{0};
        std::atomic<int> peak{0};
    };
    void* mem =
        ::mmap(nullptr, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    auto* sh = new (mem) shared();
    const auto u = url();
    const int failed = run_processes(procs, [&] {
        int got = 0;
        std::error_code ec;
        auto b = detail::make_zookeeper_backend(u, ec, nullptr);
        for (int i = 0; b && i < 2; ++i) {
            auto h = b->acquire("procs", permits(n, 30s), ec);
            if (ec || !h) break;
            {
                auto in = sh->check.enter_read();
                const int now = ++sh->inside;
                int seen = sh->peak.load();
                while (now > seen && !sh->peak.compare_exchange_weak(seen, now)) {
                }
                // The first round stays until n holders were inside together (bounded), and a
                // moment longer, in which a wrong count would admit one more.
                if (i == 0) {
                    eventually([&] { return sh->peak.load() >= n; }, 10s);
                    eventually([&] { return sh->peak.load() > n; }, 700ms);
                }
                --sh->inside;
                ++got;
            }
            h->release_blocking(ec);
        }
        if (b) b->shutdown();
        return got == 2;
    });
    EXPECT_EQ(failed, 0);
    EXPECT_EQ(sh->check.violations(), 0) << "never more than " << n << " holders";
    EXPECT_EQ(sh->peak.load(), n) << "n holders at once";
    ::munmap(mem, sizeof(shared));
}

TEST_F(zk_semaphore, a_freed_permit_wakes_the_counting_client_only_by_watches) {
    auto a = zk_backend_for(url());
    auto b = zk_backend_for(url());
    auto c = zk_backend_for(url());
    std::error_code ec;
    auto held = a->acquire("one", permits(1, 5s), ec);
    ASSERT_TRUE(held);
    raw_zk raw(server_->host_port());
    std::atomic<int> got{0};
    std::shared_ptr<detail::hold> hb;
    std::shared_ptr<detail::hold> hc;
    std::thread tb([&] {
        std::error_code e;
        hb = b->acquire("one", permits(1, 20s), e);
        ++got;
    });
    // b holds the gate and counts 2 leases > 1 permit: it waits on the leases' watch.
    ASSERT_TRUE(eventually([&] { return raw.children("/one/leases").size() == 2; }));
    std::thread tc([&] {
        std::error_code e;
        hc = c->acquire("one", permits(1, 20s), e);
        ++got;
    });
    // c queues on the gate behind b (a predecessor watch).
    ASSERT_TRUE(eventually([&] { return raw.children("/one/locks").size() == 2; }));
    ASSERT_TRUE(eventually([&] { return b->waits() == 1 && c->waits() == 1; }))
        << "b waits on the leases, c on the gate";
    EXPECT_EQ(got, 0);
    EXPECT_EQ(a->wakes() + b->wakes() + c->wakes(), 0u) << "nobody polls";
    held->release_blocking(ec);
    tb.join();
    ASSERT_TRUE(hb) << b->last_error_detail();
    // b released the gate: c took it and now counts 2 leases > 1.
    ASSERT_TRUE(eventually([&] {
        return raw.children("/one/leases").size() == 2 && raw.children("/one/locks").size() == 1;
    }));
    // ... and its count's watch is set (before it, a release of b's lease would let c in
    // without a wake).
    ASSERT_TRUE(eventually([&] { return c->waits() == 2; }));
    EXPECT_EQ(got, 1);
    hb->release_blocking(ec);
    tc.join();
    ASSERT_TRUE(hc) << c->last_error_detail();
    // One wake per freed permit (b, then c) and one for c's turn at the gate: 3 in all.
    EXPECT_EQ(a->wakes() + b->wakes() + c->wakes(), 3u);
    hc->release_blocking(ec);
}

TEST_F(zk_semaphore, a_bounded_wait_leaves_no_node_behind) {
    auto a = zk_backend_for(url());
    auto b = zk_backend_for(url());
    std::error_code ec;
    auto held = a->acquire("bounded", permits(1, 5s), ec);
    ASSERT_TRUE(held);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(b->acquire("bounded", permits(1, 300ms), ec));
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_FALSE(ec);
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 2300ms);
    raw_zk raw(server_->host_port());
    EXPECT_EQ(raw.children("/bounded/leases").size(), 1u);
    EXPECT_TRUE(eventually([&] { return raw.children("/bounded/locks").empty(); }));
}

TEST_F(zk_semaphore, session_expiry_loses_the_lease_and_frees_the_permit) {
    auto a = zk_backend_for(url());
    auto b = zk_backend_for(url());
    std::error_code ec;
    auto h = a->acquire("expiring", permits(1, 5s), ec);
    ASSERT_TRUE(h);
    std::atomic<bool> called{false};
    h->on_lost([&] { called = true; });
    std::shared_ptr<detail::hold> h2;
    std::thread waiter([&] {
        std::error_code e;
        h2 = b->acquire("expiring", permits(1, 10s), e);
    });
    raw_zk raw(server_->host_port());
    ASSERT_TRUE(eventually([&] { return raw.children("/expiring/leases").size() == 2; }));
    expire_session(server_->host_port(), *a);
    // lost() turns true before the callbacks run (on the I/O thread): wait for both.
    ASSERT_TRUE(eventually([&] { return h->lost() && called; }, 5s));
    EXPECT_TRUE(h->stop_token().stop_requested());
    waiter.join();
    EXPECT_TRUE(h2) << "the expired holder's lease is gone: the waiter holds";
    h->release_blocking(ec);
    EXPECT_EQ(ec, make_error_code(errc::not_owner));
}

TEST_F(zk_semaphore, inspect_list_and_force_unlock_show_the_leases) {
    auto a = zk_backend_for(url());
    auto b = zk_backend_for(url());
    std::error_code ec;
    auto h1 = a->acquire("jobs/pool", permits(2, 5s), ec);
    auto h2 = b->acquire("jobs/pool", permits(2, 5s), ec);
    ASSERT_TRUE(h1 && h2);
    // An acquisition returns once its lease exists; its gate node (the mutex Curator releases in
    // `finally`) is deleted right after, without the caller waiting: another session may still
    // see it for a moment.
    ASSERT_TRUE(eventually([&] {
        std::error_code e;
        return a->inspect("jobs/pool", lock_kind::semaphore, e).contenders.size() == 2;
    }));
    auto st = a->inspect("jobs/pool", lock_kind::semaphore, ec);
    ASSERT_FALSE(ec) << a->last_error_detail();
    EXPECT_EQ(st.kind, "semaphore");
    ASSERT_EQ(st.contenders.size(), 2u);
    EXPECT_TRUE(st.contenders[0].holds && st.contenders[1].holds);
    EXPECT_NE(st.contenders[0].entry.find("/jobs/pool/leases/_c_"), std::string::npos);
    EXPECT_EQ(st.contenders[0].token, h1->fencing_token());
    // The default kind finds the semaphore too (dlock status without --kind).
    EXPECT_EQ(a->inspect("jobs/pool", lock_kind::reentrant, ec).kind, "semaphore");
    // A third client counting (it holds the gate and waits for a permit) is a waiter.
    std::thread waiter([&] {
        std::error_code e;
        auto c = zk_backend_for(url());
        auto w = c->acquire("jobs/pool", permits(2, 10s), e);
        if (w) w->release_blocking(e);
    });
    ASSERT_TRUE(eventually([&] {
        std::error_code e;
        return a->inspect("jobs/pool", lock_kind::semaphore, e).contenders.size() == 4;
    }));
    st = a->inspect("jobs/pool", lock_kind::semaphore, ec);
    EXPECT_EQ(std::count_if(st.contenders.begin(), st.contenders.end(),
                            [](const lock_contender& c) { return c.holds; }),
              2);
    const auto all = a->list("jobs/*", ec);
    ASSERT_FALSE(ec);
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].name, "jobs/pool");
    EXPECT_EQ(all[0].kind, "semaphore");
    // unlock --force ends every lease holder; the waiter then holds.
    EXPECT_TRUE(a->force_unlock("jobs/pool", lock_kind::semaphore, ec));
    ASSERT_TRUE(eventually([&] { return h1->lost() && h2->lost(); }, 5s));
    waiter.join();
}

} // namespace
} // namespace dlock::test
