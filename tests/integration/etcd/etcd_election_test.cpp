// Leader election on etcd in concurrency.Election's layout, against etcd's own tool: `etcdctl
// elect NAME VALUE` (the Go client's Campaign, Resign on SIGTERM) and `etcdctl elect -l NAME`
// (Observe) share one election with dlock, both ways; the leader's key is "<name>/<lease hex>"
// with its value, the epoch its create revision; deleting the key or revoking the lease loses
// the leadership; an observation may outlive its client. What every backend promises is in
// tests/conformance/election_test.cpp.
#include "etcd_test_util.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
namespace fs = std::filesystem;
using dlock::test::slurp;

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds budget) {
    return dlock::test::wait_until(pred, budget);
}

class etcd_election : public dlock::test::etcdctl_test {
protected:
    /// `etcdctl elect <args...>` as a child with its output in `log`.
    pid_t etcdctl_elect(std::vector<std::string> args, const fs::path& log) {
        args.insert(args.begin(), "elect");
        return etcdctl_child(args, log);
    }
    /// The keys and values under "<name>/", as `etcdctl get --prefix` prints them.
    std::string keys(const std::string& name) const {
        return etcd_->etcdctl({"get", "--prefix", name + "/"}).first;
    }
    /// The create revision of `key`, as `etcdctl get -w json` shows it.
    std::optional<std::uint64_t> create_revision(const std::string& key) const {
        return create_revision_of({key});
    }
};

// etcdctl leads -> dlock reads it as the leader, is not elected, and leads once etcdctl resigns
// (within a second), with a larger epoch.
TEST_F(etcd_election, etcdctl_leads_dlock_waits) {
    auto c = connect();
    const auto log = file("elect.log");
    const auto pid = etcdctl_elect({"jobs", "from-etcdctl"}, log);
    // etcdctl prints its key and value once elected.
    ASSERT_TRUE(
        eventually([&] { return slurp(log).find("from-etcdctl") != std::string::npos; }, 10s))
        << slurp(log);
    const auto li = c->leader("jobs");
    ASSERT_TRUE(li);
    EXPECT_EQ(li->value, "from-etcdctl");
    const auto key = slurp(log).substr(0, slurp(log).find('\n'));
    EXPECT_EQ(li->epoch, create_revision(key)) << key;
    EXPECT_FALSE(c->campaign("jobs", "dlock", {.wait = 0ms}));
    auto waiter = std::async(std::launch::async, [&] {
        auto l = c->campaign("jobs", "dlock", {.wait = 10s});
        return std::make_pair(std::move(l), clock_type::now());
    });
    ASSERT_EQ(waiter.wait_for(300ms), std::future_status::timeout) << "elected while led";
    const auto resigned_at = clock_type::now();
    EXPECT_EQ(terminate(pid), 0) << slurp(log);
    ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
    auto [l, at] = waiter.get();
    ASSERT_TRUE(l);
    EXPECT_LT(at - resigned_at, 1s);
    EXPECT_GT(l.epoch(), li->epoch);
    EXPECT_EQ(c->leader("jobs")->value, "dlock");
}

// dlock leads -> `etcdctl elect -l` observes its value and its proclaim; `etcdctl elect` waits
// and leads once dlock resigns.
TEST_F(etcd_election, dlock_leads_etcdctl_observes_and_waits) {
    auto c = connect();
    auto l = c->campaign("sched", "dlock-a", {.wait = 5s});
    ASSERT_TRUE(l);
    const auto watch_log = file("observe.log"), elect_log = file("elect.log");
    const auto observer = etcdctl_elect({"-l", "sched"}, watch_log);
    ASSERT_TRUE(
        eventually([&] { return slurp(watch_log).find("dlock-a") != std::string::npos; }, 10s))
        << slurp(watch_log);
    l.proclaim("dlock-b");
    ASSERT_TRUE(
        eventually([&] { return slurp(watch_log).find("dlock-b") != std::string::npos; }, 10s))
        << slurp(watch_log);
    const auto waiter = etcdctl_elect({"sched", "from-etcdctl"}, elect_log);
    // etcdctl queues its key behind dlock's and is not elected.
    ASSERT_TRUE(
        eventually([&] { return keys("sched").find("from-etcdctl") != std::string::npos; }, 10s))
        << keys("sched");
    EXPECT_EQ(slurp(elect_log), "") << "etcdctl elected while dlock leads";
    EXPECT_EQ(c->leader("sched")->value, "dlock-b");
    l.resign();
    ASSERT_TRUE(
        eventually([&] { return slurp(elect_log).find("from-etcdctl") != std::string::npos; }, 5s))
        << slurp(elect_log);
    ASSERT_TRUE(
        eventually([&] { return slurp(watch_log).find("from-etcdctl") != std::string::npos; }, 5s))
        << slurp(watch_log);
    EXPECT_EQ(c->leader("sched")->value, "from-etcdctl");
    EXPECT_EQ(terminate(waiter), 0) << slurp(elect_log);
    (void)terminate(observer);
}

// The leader's key is the Mutex's "<name>/<lease hex>" (in the URL's prefix), with the value;
// the epoch is its create revision.
TEST_F(etcd_election, the_leader_key_follows_the_election_layout) {
    dlock::client c(etcd_->url("/app", "?ttl=5"));
    auto l = c.campaign("batch", "v1", {.wait = 5s});
    ASSERT_TRUE(l);
    std::error_code ec;
    const auto st = c.inspect("batch", dlock::lock_kind::reentrant, ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_EQ(st.contenders.size(), 1U);
    const auto& entry = st.contenders.front().entry;
    EXPECT_EQ(entry, "/app/batch/" + st.contenders.front().session);
    EXPECT_EQ(keys("/app/batch"), entry + "\nv1");
    EXPECT_EQ(create_revision(entry), l.epoch());
    l.proclaim("v2");
    EXPECT_EQ(keys("/app/batch"), entry + "\nv2");
    EXPECT_EQ(create_revision(entry), l.epoch()) << "a proclaim keeps the epoch";
}

// The leader's key deleted (an operator's `etcdctl del`) or its lease revoked: leadership lost;
// a proclaim then says not_owner and sets nothing.
TEST_F(etcd_election, deleting_the_key_or_revoking_the_lease_loses_the_leadership) {
    auto a = connect(), b = connect();
    auto l = a->campaign("lost", "a", {.wait = 5s});
    ASSERT_TRUE(l);
    auto [out, rc] = etcd_->etcdctl({"del", "--prefix", "lost/"});
    ASSERT_EQ(rc, 0) << out;
    EXPECT_TRUE(eventually([&] { return l.lease().stop_token().stop_requested(); }, 2s));
    std::error_code ec;
    l.proclaim("late", ec);
    EXPECT_EQ(ec, dlock::errc::not_owner);
    EXPECT_FALSE(b->leader("lost")) << "nothing was put back";
    l.resign(ec);
    EXPECT_FALSE(ec) << "resigning a lost leadership is no error";

    auto l2 = b->campaign("revoked", "b", {.wait = 5s});
    ASSERT_TRUE(l2);
    std::error_code ec2;
    const auto st = a->inspect("revoked", dlock::lock_kind::reentrant, ec2);
    ASSERT_EQ(st.contenders.size(), 1U);
    auto [out2, rc2] = etcd_->etcdctl({"lease", "revoke", st.contenders.front().session});
    ASSERT_EQ(rc2, 0) << out2;
    EXPECT_TRUE(eventually([&] { return l2.lease().lost(); }, 2s));
    EXPECT_TRUE(a->campaign("revoked", "a", {.wait = 2s}));
}

// observe() sees etcdctl fill a vacancy and leave it again; once its client is gone, the
// observation delivers nothing more and stops safely (its watch went with the backend).
TEST_F(etcd_election, observe_sees_a_vacancy_filled_and_outlives_its_client) {
    auto c = connect(), d = connect();
    std::mutex mu;
    std::vector<std::optional<dlock::leader_info>> seen;
    auto obs = c->observe("watched", [&](const std::optional<dlock::leader_info>& li) {
        std::lock_guard g(mu);
        seen.push_back(li);
    });
    ASSERT_TRUE(obs);
    const auto log = file("elect.log");
    const auto pid = etcdctl_elect({"watched", "from-etcdctl"}, log);
    // etcdctl prints its key once Campaign returned: a SIGTERM after that resigns (before it,
    // etcdctl only cancels its campaign and exits 1, its key left to its 60 s lease).
    ASSERT_TRUE(
        eventually([&] { return slurp(log).find("from-etcdctl") != std::string::npos; }, 10s))
        << slurp(log);
    ASSERT_TRUE(eventually(
        [&] {
            std::lock_guard g(mu);
            return seen.size() == 2 && seen[1] && seen[1]->value == "from-etcdctl";
        },
        10s));
    EXPECT_EQ(terminate(pid), 0) << slurp(log);
    ASSERT_TRUE(eventually(
        [&] {
            std::lock_guard g(mu);
            return seen.size() == 3 && !seen[2];
        },
        10s));
    c.reset(); // the observation outlives its client: no callback, and stop() is safe
    auto l = d->campaign("watched", "d", {.wait = 5s});
    ASSERT_TRUE(l);
    obs.stop();
    std::lock_guard g(mu);
    EXPECT_EQ(seen.size(), 3U);
}

TEST_F(etcd_election, bad_names_and_values_are_refused) {
    auto c = connect();
    for (const auto* bad : {"a/b", "", "x\n"}) {
        std::error_code ec;
        EXPECT_FALSE(c->campaign(bad, "v", {.wait = 0ms}, ec));
        EXPECT_EQ(ec, dlock::errc::invalid_argument) << bad;
        EXPECT_FALSE(c->leader(bad, ec));
        EXPECT_EQ(ec, dlock::errc::invalid_argument) << bad;
    }
    std::error_code ec;
    EXPECT_FALSE(c->campaign("big", std::string(dlock::leadership::max_value_size + 1, 'x'),
                             {.wait = 0ms}, ec));
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
}

} // namespace
