// Leader election on zk:// (dlock/election.hpp, src/zookeeper/election.cpp and observe.cpp) against
// real servers: one leader at a time among three clients; a closed or killed leader replaced
// within the session timeout by one with a larger epoch; loss on session expiry and on the node
// deleted; resign twice; leader() and proclaim; observe() in order (leader, vacant, new leader)
// and across a session expiry; one attempt on a held election; bad names; and one election
// shared with a real Apache Curator 5.4.0 LeaderLatch (CuratorPeer.java), both directions.
#include "access.hpp"
#include "zookeeper_fault_proxy.hpp"
#include "zookeeper_peer.hpp"
#include "zookeeper_test_util.hpp"

#include <dlock/dlock.hpp>

#include <asio/use_future.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <poll.h>
#include <sys/wait.h>
#include <thread>

namespace dlock::test {
namespace {

using clock = std::chrono::steady_clock;

class zk_election : public ::testing::Test {
protected:
    void SetUp() override {
        DLOCK_SKIP_WITHOUT_ZOOKEEPER();
        server_ = std::make_unique<zk_server>();
        url_ = server_->url() + "?session_timeout=4000&connect_timeout=10000";
    }
    detail::zk::zk_backend& zk_of(client& c) {
        return *std::dynamic_pointer_cast<detail::zk::zk_backend>(detail::access::backend(c));
    }
    std::unique_ptr<zk_server> server_;
    std::string url_;
    static constexpr auto session_timeout = 4000ms;
};

/// Records what an observation reports, for bounded waits on it.
struct recorder {
    std::mutex mu;
    std::vector<std::optional<leader_info>> seen;
    void operator()(const std::optional<leader_info>& v) {
        std::lock_guard lk(mu);
        seen.push_back(v);
    }
    std::size_t size() {
        std::lock_guard lk(mu);
        return seen.size();
    }
    std::vector<std::optional<leader_info>> copy() {
        std::lock_guard lk(mu);
        return seen;
    }
    /// The last report is the leader with `value` (or vacant when empty).
    bool last_is(const std::string& value) {
        std::lock_guard lk(mu);
        if (seen.empty()) return false;
        const auto& l = seen.back();
        return value.empty() ? !l.has_value() : (l && l->value == value);
    }
};

TEST_F(zk_election, one_leader_at_a_time_among_three_clients) {
    client c0(url_), c1(url_), c2(url_);
    client* clients[] = {&c0, &c1, &c2};
    std::atomic<int> leading{0};
    std::atomic<int> overlaps{0};
    std::mutex mu;
    std::vector<std::uint64_t> epochs;
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i)
        threads.emplace_back([&, i] {
            for (int round = 0; round < 3; ++round) {
                auto l = clients[i]->campaign("elect/one", "p" + std::to_string(i), {.wait = 30s});
                if (!l) continue;
                if (leading.fetch_add(1) != 0) ++overlaps;
                {
                    std::lock_guard lk(mu);
                    epochs.push_back(l.epoch());
                }
                const auto seen = clients[i]->leader("elect/one");
                if (!seen || seen->value != "p" + std::to_string(i) || seen->epoch != l.epoch())
                    ++overlaps;
                leading.fetch_sub(1);
                l.resign();
            }
        });
    for (auto& t : threads)
        t.join();
    EXPECT_EQ(overlaps.load(), 0);
    ASSERT_EQ(epochs.size(), 9u);
    for (std::size_t i = 1; i < epochs.size(); ++i)
        EXPECT_GT(epochs[i], epochs[i - 1]) << "epochs increase across successive leaders";
}

TEST_F(zk_election, a_closed_leaders_successor_leads_with_a_larger_epoch) {
    auto a = std::make_unique<client>(url_);
    client b(url_);
    auto la = a->campaign("elect/close", "a", {.wait = 5s});
    ASSERT_TRUE(la) << a->last_error_detail();
    EXPECT_GT(la.epoch(), 0u);
    EXPECT_EQ(la.lease().token(), la.epoch());
    EXPECT_EQ(la.name(), "elect/close");
    leadership lb;
    std::thread waiter([&] { lb = b.campaign("elect/close", "b", {.wait = 20s}); });
    raw_zk raw(server_->host_port());
    ASSERT_TRUE(eventually([&] { return raw.children("/elect/close").size() == 2; }));
    const auto epoch_a = la.epoch();
    const auto closed = clock::now();
    a.reset(); // closes the session: its node goes at once
    waiter.join();
    ASSERT_TRUE(lb) << b.last_error_detail();
    EXPECT_LT(clock::now() - closed, session_timeout);
    EXPECT_GT(lb.epoch(), epoch_a);
}

TEST_F(zk_election, a_killed_leader_is_replaced_within_the_session_timeout) {
    // The leader is a child process (forked before this process makes a client), killed.
    int pipefd[2];
    ASSERT_EQ(::pipe(pipefd), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::close(pipefd[0]);
        try {
            client c(url_);
            auto l = c.campaign("elect/kill", "child", {.wait = 10s});
            const std::string msg = l ? std::to_string(l.epoch()) + "\n" : "none\n";
            (void)!::write(pipefd[1], msg.data(), msg.size());
            ::pause();
        } catch (...) {
        }
        ::_exit(1);
    }
    ::close(pipefd[1]);
    std::string line;
    pollfd p{pipefd[0], POLLIN, 0};
    if (::poll(&p, 1, 20000) > 0) {
        char buf[64];
        const auto n = ::read(pipefd[0], buf, sizeof buf);
        if (n > 0) line.assign(buf, static_cast<std::size_t>(n));
    }
    ::close(pipefd[0]);
    if (line.empty() || line == "none\n") {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        FAIL() << "the child did not lead: '" << line << "'";
    }
    const auto child_epoch = std::stoull(line);
    client b(url_);
    EXPECT_EQ(b.leader("elect/kill")->value, "child");
    leadership lb;
    std::thread waiter([&] { lb = b.campaign("elect/kill", "b", {.wait = 30s}); });
    raw_zk raw(server_->host_port());
    ASSERT_TRUE(eventually([&] { return raw.children("/elect/kill").size() == 2; }));
    const auto killed = clock::now();
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    waiter.join();
    ASSERT_TRUE(lb) << b.last_error_detail();
    // The server expires the session `timeout` after the last packet, checked once per tick.
    EXPECT_LT(clock::now() - killed, session_timeout + 2s);
    EXPECT_GT(lb.epoch(), child_epoch);
}

TEST_F(zk_election, leadership_is_lost_when_the_session_expires) {
    client a(url_);
    client b(url_);
    auto l = a.campaign("elect/expire", "a", {.wait = 5s});
    ASSERT_TRUE(l);
    std::atomic<bool> called{false};
    l.lease().on_lost([&] { called = true; });
    expire_session(server_->host_port(), zk_of(a));
    // lost() turns true before the callbacks run (on the I/O thread): wait for both.
    ASSERT_TRUE(eventually([&] { return l.lease().lost() && called.load(); }));
    EXPECT_TRUE(l.lease().stop_token().stop_requested());
    EXPECT_LE(l.lease().valid_until(), clock::now());
    std::error_code ec;
    l.proclaim("again", ec);
    EXPECT_EQ(ec, make_error_code(errc::not_owner));
    auto lb = b.campaign("elect/expire", "b", {.wait = 10s});
    ASSERT_TRUE(lb);
    EXPECT_GT(lb.epoch(), l.epoch());
    l.resign(ec);
    EXPECT_FALSE(ec) << "resigning a lost leadership is not an error";
}

TEST_F(zk_election, leadership_is_lost_when_its_node_is_deleted) {
    client a(url_);
    auto l = a.campaign("elect/deleted", "a", {.wait = 5s});
    ASSERT_TRUE(l);
    raw_zk raw(server_->host_port());
    const auto kids = raw.children("/elect/deleted");
    ASSERT_EQ(kids.size(), 1u);
    EXPECT_EQ(raw.remove("/elect/deleted/" + kids[0]), ZOK);
    ASSERT_TRUE(eventually([&] { return l.lease().lost(); }));
    EXPECT_TRUE(l.lease().stop_token().stop_requested());
}

TEST_F(zk_election, resigning_twice_is_fine) {
    client a(url_);
    client b(url_);
    auto l = a.campaign("elect/resign", "a", {.wait = 5s});
    ASSERT_TRUE(l);
    std::error_code ec;
    l.resign(ec);
    EXPECT_FALSE(ec);
    EXPECT_FALSE(l);
    l.resign(ec);
    EXPECT_FALSE(ec);
    EXPECT_NO_THROW(l.resign());
    EXPECT_FALSE(l.lease().lost()) << "a resign is not a loss";
    EXPECT_FALSE(a.leader("elect/resign"));
    auto lb = b.campaign("elect/resign", "b", {.wait = 0ms});
    EXPECT_TRUE(lb) << "the resigned leader's node is gone";
    leadership moved = std::move(lb);
    EXPECT_FALSE(lb);
    EXPECT_NO_THROW(lb.resign());
    EXPECT_TRUE(moved);
}

TEST_F(zk_election, leader_shows_value_and_epoch_and_vacant_is_nullopt) {
    client a(url_);
    client o(url_);
    EXPECT_FALSE(o.leader("elect/who")) << "no directory: vacant";
    auto l = a.campaign("elect/who", "host-a:8080", {.wait = 5s});
    ASSERT_TRUE(l);
    const auto li = o.leader("elect/who");
    ASSERT_TRUE(li);
    EXPECT_EQ(li->value, "host-a:8080");
    EXPECT_EQ(li->epoch, l.epoch());
    raw_zk raw(server_->host_port());
    const auto kids = raw.children("/elect/who");
    ASSERT_EQ(kids.size(), 1u);
    EXPECT_TRUE(kids[0].starts_with("_c_")) << kids[0];
    EXPECT_NE(kids[0].find("-latch-"), std::string::npos) << kids[0];
    Stat st{};
    ASSERT_TRUE(raw.exists("/elect/who/" + kids[0], &st));
    EXPECT_EQ(li->epoch, static_cast<std::uint64_t>(st.czxid)) << "the epoch is the czxid";
    EXPECT_EQ(raw.get("/elect/who/" + kids[0]), "host-a:8080") << "the node's data is the value";
    l.resign();
    EXPECT_FALSE(o.leader("elect/who")) << "no participant: vacant";
}

TEST_F(zk_election, proclaim_changes_the_value_not_the_epoch) {
    client a(url_);
    client o(url_);
    auto l = a.campaign("elect/proclaim", "v1", {.wait = 5s});
    ASSERT_TRUE(l);
    l.proclaim("v2");
    const auto li = o.leader("elect/proclaim");
    ASSERT_TRUE(li);
    EXPECT_EQ(li->value, "v2");
    EXPECT_EQ(li->epoch, l.epoch());
    EXPECT_FALSE(l.lease().lost()) << "its own data change is not a loss";
    l.resign();
    std::error_code ec;
    l.proclaim("v3", ec);
    EXPECT_EQ(ec, make_error_code(errc::not_owner));
    leadership empty;
    empty.proclaim("v4", ec);
    EXPECT_EQ(ec, make_error_code(errc::not_owner));
}

TEST_F(zk_election, observe_sees_leader_vacant_new_leader_in_order) {
    client a(url_);
    client b(url_);
    client o(url_);
    recorder rec;
    auto obs = o.observe("elect/watch", [&](const std::optional<leader_info>& v) { rec(v); });
    ASSERT_TRUE(obs);
    ASSERT_EQ(rec.size(), 1u) << "the first state is delivered before observe() returns";
    EXPECT_TRUE(rec.last_is(""));
    auto la = a.campaign("elect/watch", "a", {.wait = 5s});
    ASSERT_TRUE(la);
    const auto epoch_a = la.epoch();
    ASSERT_TRUE(eventually([&] { return rec.last_is("a"); }));
    la.proclaim("a2");
    ASSERT_TRUE(eventually([&] { return rec.last_is("a2"); }));
    la.resign();
    ASSERT_TRUE(eventually([&] { return rec.last_is(""); }));
    auto lb = b.campaign("elect/watch", "b", {.wait = 5s});
    ASSERT_TRUE(lb);
    ASSERT_TRUE(eventually([&] { return rec.last_is("b"); }));
    const auto seen = rec.copy();
    ASSERT_EQ(seen.size(), 5u);
    EXPECT_FALSE(seen[0]);
    ASSERT_TRUE(seen[1] && seen[2] && seen[4]);
    EXPECT_EQ(seen[1]->value, "a");
    EXPECT_EQ(seen[1]->epoch, epoch_a);
    EXPECT_EQ(seen[2]->value, "a2");
    EXPECT_EQ(seen[2]->epoch, seen[1]->epoch);
    EXPECT_FALSE(seen[3]);
    EXPECT_EQ(seen[4]->epoch, lb.epoch());
    EXPECT_GT(seen[4]->epoch, seen[1]->epoch);
    // Stopped: nothing more, although the leader changes.
    obs.stop();
    EXPECT_FALSE(obs);
    lb.resign();
    auto la2 = a.campaign("elect/watch", "a3", {.wait = 5s});
    ASSERT_TRUE(la2);
    ASSERT_TRUE(eventually([&] { return a.leader("elect/watch")->value == "a3"; }));
    EXPECT_EQ(rec.size(), 5u);
}

TEST_F(zk_election, observe_follows_an_election_whose_directory_was_reaped_and_made_again) {
    client a(url_);
    client o(url_);
    raw_zk raw(server_->host_port());
    recorder rec;
    auto la = a.campaign("elect/reaped/e", "a", {.wait = 5s});
    ASSERT_TRUE(la);
    auto obs = o.observe("elect/reaped/e", [&](const std::optional<leader_info>& v) { rec(v); });
    ASSERT_TRUE(rec.last_is("a"));
    la.resign();
    ASSERT_TRUE(eventually([&] { return rec.last_is(""); }));
    // The empty CONTAINER directory is reaped by the server (every second in the fixture).
    ASSERT_TRUE(eventually([&] { return !raw.exists("/elect/reaped/e"); }, 10s));
    auto lb = a.campaign("elect/reaped/e", "b", {.wait = 5s});
    ASSERT_TRUE(lb);
    ASSERT_TRUE(eventually([&] { return rec.last_is("b"); }))
        << "the exists watch on the missing directory sees it made again";
    EXPECT_EQ(rec.size(), 3u);
}

TEST_F(zk_election, observe_catches_up_after_its_session_expired) {
    client a(url_);
    client o(url_);
    auto la = a.campaign("elect/catchup", "a", {.wait = 5s});
    ASSERT_TRUE(la);
    recorder rec;
    auto obs = o.observe("elect/catchup", [&](const std::optional<leader_info>& v) { rec(v); });
    ASSERT_TRUE(rec.last_is("a"));
    expire_session(server_->host_port(), zk_of(o));
    la.proclaim("a-after-expiry");
    ASSERT_TRUE(eventually([&] { return rec.last_is("a-after-expiry"); }, 20s));
    la.resign();
    ASSERT_TRUE(eventually([&] { return rec.last_is(""); }, 20s)) << "and it keeps observing";
}

TEST_F(zk_election, observe_catches_up_after_a_reconnect_within_its_session) {
    // A server that allows 20 s sessions; the observer's connection goes through a proxy that
    // cuts it and refuses reconnects while the leader proclaims.
    server_ = std::make_unique<zk_server>(zk_options{.tick_ms = 1000, .extra_config = {}});
    zk_fault_proxy proxy(server_->port());
    client a(server_->url() + "?session_timeout=8000&connect_timeout=10000");
    client o("zk://127.0.0.1:" + std::to_string(proxy.port()) +
             "?session_timeout=8000&connect_timeout=10000");
    auto la = a.campaign("elect/reconnect", "a", {.wait = 5s});
    ASSERT_TRUE(la);
    recorder rec;
    auto obs = o.observe("elect/reconnect", [&](const std::optional<leader_info>& v) { rec(v); });
    ASSERT_TRUE(rec.last_is("a"));
    const auto s = zk_of(o).current_session();
    ASSERT_TRUE(s);
    const auto id = s->id();
    proxy.refuse(true);
    proxy.cut();
    ASSERT_TRUE(eventually([&] { return !s->connected(); }));
    la.proclaim("a-while-disconnected");
    proxy.refuse(false);
    ASSERT_TRUE(eventually([&] { return rec.last_is("a-while-disconnected"); }, 20s))
        << "the re-registered watch fires for the change made meanwhile";
    EXPECT_EQ(zk_of(o).current_session()->id(), id) << "the same session: a reconnect";
    EXPECT_GE(s->reconnects(), 1u);
    la.resign();
    ASSERT_TRUE(eventually([&] { return rec.last_is(""); }, 20s));
}

TEST_F(zk_election, observe_stopped_from_inside_its_callback_calls_no_more) {
    client a(url_);
    client o(url_);
    std::atomic<int> calls{0};
    observation obs;
    std::atomic<bool> stop_next{false};
    obs = o.observe("elect/stop", [&](const std::optional<leader_info>&) {
        ++calls;
        if (stop_next) obs.stop(); // NOLINT: the handle outlives the callbacks
    });
    ASSERT_EQ(calls.load(), 1);
    stop_next = true;
    auto l = a.campaign("elect/stop", "a", {.wait = 5s});
    ASSERT_TRUE(eventually([&] { return calls.load() == 2; }));
    l.proclaim("b");
    ASSERT_TRUE(eventually([&] { return a.leader("elect/stop")->value == "b"; }));
    EXPECT_EQ(calls.load(), 2);
}

TEST_F(zk_election, async_campaign_completes_when_elected) {
    client a(url_);
    client b(url_);
    auto la = a.campaign("elect/async", "a", {.wait = 5s});
    ASSERT_TRUE(la);
    std::promise<std::pair<std::error_code, leadership>> p;
    b.async_campaign("elect/async", "b", {.wait = 20s}, [&](std::error_code ec, leadership l) {
        p.set_value({ec, std::move(l)});
    });
    auto f = p.get_future();
    raw_zk raw(server_->host_port());
    ASSERT_TRUE(eventually([&] { return raw.children("/elect/async").size() == 2; }));
    EXPECT_EQ(f.wait_for(0s), std::future_status::timeout) << "a still leads";
    la.resign();
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    auto [ec, lb] = f.get();
    EXPECT_FALSE(ec);
    ASSERT_TRUE(lb);
    EXPECT_EQ(b.leader("elect/async")->value, "b");
    // Errors come through the handler too.
    auto bad = b.async_campaign("", "x", {}, asio::use_future);
    EXPECT_THROW(bad.get(), std::system_error);
}

TEST_F(zk_election, campaign_with_zero_wait_on_a_held_election_returns_empty) {
    client a(url_);
    client b(url_);
    auto la = a.campaign("elect/busy", "a", {.wait = 5s});
    ASSERT_TRUE(la);
    std::error_code ec;
    auto lb = b.campaign("elect/busy", "b", {.wait = 0ms}, ec);
    EXPECT_FALSE(lb);
    EXPECT_FALSE(ec) << "not elected is not an error";
    const auto t0 = clock::now();
    EXPECT_FALSE(b.campaign("elect/busy", "b", {.wait = 300ms}));
    EXPECT_GE(clock::now() - t0, 300ms);
    raw_zk raw(server_->host_port());
    EXPECT_EQ(raw.children("/elect/busy").size(), 1u) << "the loser's node is removed";
    EXPECT_EQ(b.leader("elect/busy")->value, "a");
}

TEST_F(zk_election, bad_names_are_invalid_argument_with_the_reason) {
    client a(url_);
    std::error_code ec;
    EXPECT_FALSE(a.campaign("", "v", {.wait = 0ms}, ec));
    EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
    EXPECT_FALSE(a.leader("a/../b", ec));
    EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
    EXPECT_FALSE(a.observe(
        "x/\x01", [](const std::optional<leader_info>&) {}, ec));
    EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
    try {
        (void)a.campaign("zookeeper/config", "v", {.wait = 0ms});
        FAIL() << "a name under /zookeeper was accepted";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), make_error_code(errc::invalid_argument));
        EXPECT_NE(std::string(e.what()).find("reserved"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(a.campaign("ok", std::string(leadership::max_value_size + 1, 'x'), {}, ec));
    EXPECT_EQ(ec, make_error_code(errc::invalid_argument));
}

// ---- one election with a real Curator 5.4.0 LeaderLatch -------------------------------------

class zk_election_curator : public zk_election {
protected:
    void SetUp() override {
        DLOCK_SKIP_WITHOUT_ZOOKEEPER();
        if (curator_class_path().empty())
            GTEST_SKIP() << "Debian's libcurator-recipes-java not installed";
        server_ = std::make_unique<zk_server>(zk_options{.tick_ms = 2000, .extra_config = {}});
        url_ = server_->url() + "?session_timeout=4000&connect_timeout=10000";
    }
    /// A LeaderLatch participant `id` on /interop/latch (CuratorPeer.java, latch mode).
    std::unique_ptr<curator_peer> latch(const std::string& id) {
        return std::make_unique<curator_peer>(server_->host_port(), "/interop/latch", "latch:" + id,
                                              "run", 0ms);
    }
};

TEST_F(zk_election_curator, curator_leads_while_dlock_waits_then_dlock_leads) {
    client d(url_);
    auto peer = latch("curator-1");
    peer->send("await 20000");
    ASSERT_EQ(peer->line(), "LEADER");
    const auto li = d.leader("interop/latch");
    ASSERT_TRUE(li);
    EXPECT_EQ(li->value, "curator-1") << "the LeaderLatch node's data is its id";
    EXPECT_FALSE(d.campaign("interop/latch", "dlock-1", {.wait = 0ms})) << "Curator leads";
    leadership l;
    std::thread waiter([&] { l = d.campaign("interop/latch", "dlock-1", {.wait = 30s}); });
    raw_zk raw(server_->host_port());
    ASSERT_TRUE(eventually([&] { return raw.children("/interop/latch").size() == 2; }, 20s));
    peer->send("await 0");
    EXPECT_EQ(peer->line(), "LEADER") << "still Curator's while dlock waits";
    peer->send("leader");
    EXPECT_EQ(peer->line(), "LEADER_IS curator-1");
    peer->send("close");
    EXPECT_EQ(peer->line(), "CLOSED");
    waiter.join();
    ASSERT_TRUE(l) << d.last_error_detail();
    EXPECT_GT(l.epoch(), li->epoch);
    EXPECT_EQ(d.leader("interop/latch")->value, "dlock-1");
}

TEST_F(zk_election_curator, dlock_leads_while_curator_waits_and_curator_sees_dlocks_id) {
    client d(url_);
    auto l = d.campaign("interop/latch", "dlock-1", {.wait = 5s});
    ASSERT_TRUE(l);
    const auto epoch = l.epoch();
    // Before the Curator participant joins: a proclaim while it waits right behind this leader
    // would consume its one-shot watch (LeaderLatch reacts to NodeDeleted only; election.hpp).
    l.proclaim("dlock-2");
    auto peer = latch("curator-2");
    peer->send("await 500");
    EXPECT_EQ(peer->line(), "NOT_LEADER");
    peer->send("leader");
    EXPECT_EQ(peer->line(), "LEADER_IS dlock-2") << "Curator reads dlock's (proclaimed) value";
    l.resign();
    peer->send("await 20000");
    EXPECT_EQ(peer->line(), "LEADER");
    const auto li = d.leader("interop/latch");
    ASSERT_TRUE(li);
    EXPECT_EQ(li->value, "curator-2");
    EXPECT_GT(li->epoch, epoch);
    peer->send("close");
    EXPECT_EQ(peer->line(), "CLOSED");
}

} // namespace
} // namespace dlock::test
