// dlock's etcd backend and etcd's own tools on the same lock names: `etcdctl lock` (etcd's
// concurrency.Mutex) and dlock exclude each other both ways, a release wakes the other side
// within a second, dlock's fencing token is its key's create revision as etcd reports it, and
// `etcdctl lease revoke` / `etcdctl del` of dlock's lease or key signal the loss.
#include "etcd_test_util.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
namespace fs = std::filesystem;
using dlock::test::slurp;

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds budget) {
    return dlock::test::wait_until(pred, budget);
}

/// Whether anyone holds `name` (inspect: the first contender holds).
bool locked(dlock::client& c, const std::string& name) {
    std::error_code ec;
    return c.inspect(name, dlock::lock_kind::reentrant, ec).exists && !ec;
}

class etcd_interop : public dlock::test::etcdctl_test {
protected:
    /// `etcdctl lock <name> [cmd...]` as a child with its output in `log`.
    pid_t etcdctl_lock(const std::string& name, const std::vector<std::string>& cmd,
                       const fs::path& log) {
        std::vector<std::string> args{"lock", name, "--ttl=5"};
        if (!cmd.empty()) args.push_back("--"); // the command's flags are not etcdctl's
        args.insert(args.end(), cmd.begin(), cmd.end());
        return etcdctl_child(args, log);
    }
    /// The create revision of the only key under "<name>/", as `etcdctl get -w json` shows it.
    std::optional<std::uint64_t> create_revision(const std::string& name) const {
        return create_revision_of({"--prefix", name + "/"});
    }
};

// etcdctl holds -> dlock is refused and waits; etcdctl's release wakes the waiter within 1 s.
TEST_F(etcd_interop, etcdctl_holds_dlock_waits) {
    auto c = connect();
    const auto pid = etcdctl_lock("orders", {}, file("etcdctl.log"));
    ASSERT_TRUE(eventually([&] { return locked(*c, "orders"); }, 10s))
        << slurp(file("etcdctl.log"));
    EXPECT_FALSE(c->acquire("orders", {.wait = 0ms}));
    auto waiter = std::async(std::launch::async, [&] {
        auto l = c->acquire("orders", {.wait = 10s});
        return std::make_pair(std::move(l), clock_type::now());
    });
    ASSERT_EQ(waiter.wait_for(300ms), std::future_status::timeout) << "granted while held";
    const auto released_at = clock_type::now();
    EXPECT_EQ(terminate(pid), 0) << slurp(file("etcdctl.log")); // etcdctl unlocks on SIGTERM
    ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
    auto [held, at] = waiter.get();
    ASSERT_TRUE(held);
    EXPECT_LT(at - released_at, 1s);
    EXPECT_EQ(held.token(), create_revision("orders"));
}

// dlock holds -> `etcdctl lock NAME cmd` waits; dlock's release lets it run within 1 s, and
// the revision etcdctl exports is after dlock's token.
TEST_F(etcd_interop, dlock_holds_etcdctl_waits) {
    auto c = connect();
    auto held = c->acquire("jobs", {.wait = 5s});
    ASSERT_TRUE(held);
    ASSERT_TRUE(held.token());
    EXPECT_EQ(held.token(), create_revision("jobs"));
    const auto out = file("rev.txt");
    const auto pid = etcdctl_lock("jobs", {"sh", "-c", "echo \"$ETCD_LOCK_REV\" > " + out.string()},
                                  file("etcdctl.log"));
    // etcdctl queues its key behind ours (two keys under jobs/), and does not run its command.
    ASSERT_TRUE(eventually(
        [&] {
            std::error_code ec;
            return c->inspect("jobs", dlock::lock_kind::reentrant, ec).contenders.size() == 2;
        },
        10s))
        << slurp(file("etcdctl.log"));
    EXPECT_FALSE(fs::exists(out));
    const auto token = *held.token();
    const auto released_at = clock_type::now();
    held.release();
    ASSERT_TRUE(eventually([&] { return fs::exists(out) && !slurp(out).empty(); }, 5s))
        << slurp(file("etcdctl.log"));
    EXPECT_LT(clock_type::now() - released_at, 1s);
    EXPECT_EQ(dlock::test::wait_child(pid), 0) << slurp(file("etcdctl.log"));
    std::erase(children_, pid);
    EXPECT_GT(std::stoull(slurp(out)), token);
    EXPECT_FALSE(locked(*c, "jobs")) << "etcdctl unlocked after its command";
}

// dlock's keys are etcd's Mutex keys: "<name>/<lease hex>", in the URL's prefix when it has one.
TEST_F(etcd_interop, keys_follow_the_mutex_layout) {
    dlock::client c(etcd_->url("/app", "?ttl=5"));
    auto held = c.acquire("batch", {.wait = 5s});
    ASSERT_TRUE(held);
    std::error_code ec;
    const auto st = c.inspect("batch", dlock::lock_kind::reentrant, ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_EQ(st.contenders.size(), 1U);
    const auto& holder = st.contenders.front();
    EXPECT_EQ(holder.entry, "/app/batch/" + holder.session);
    EXPECT_EQ(holder.token, held.token());
    auto [keys, rc] = etcd_->etcdctl({"get", "--prefix", "/app/", "--keys-only"});
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(keys, holder.entry);
    auto [lease, rc2] = etcd_->etcdctl({"lease", "timetolive", holder.session});
    EXPECT_EQ(rc2, 0);
    EXPECT_NE(lease.find("granted with TTL(5s)"), std::string::npos) << lease;
}

// `etcdctl lease revoke` of the holder's lease: the key goes, the hold is lost (stop token,
// on_lost) and another client gets the lock.
TEST_F(etcd_interop, lease_revoke_signals_loss) {
    auto a = connect(), b = connect();
    auto held = a->acquire("revoked", {.wait = 5s});
    ASSERT_TRUE(held);
    std::atomic<bool> called{false};
    held.on_lost([&] { called = true; });
    std::error_code ec;
    const auto st = b->inspect("revoked", dlock::lock_kind::reentrant, ec);
    ASSERT_EQ(st.contenders.size(), 1U);
    auto [out, rc] = etcd_->etcdctl({"lease", "revoke", st.contenders.front().session});
    ASSERT_EQ(rc, 0) << out;
    EXPECT_TRUE(eventually([&] { return called.load(); }, 2s));
    EXPECT_TRUE(held.lost());
    EXPECT_TRUE(held.stop_token().stop_requested());
    EXPECT_LE(held.valid_until(), clock_type::now());
    EXPECT_TRUE(b->acquire("revoked", {.wait = 2s}));
    // The revoked lease is not reused: the next acquisition of `a` gets a new one.
    auto again = a->acquire("other", {.wait = 5s});
    EXPECT_TRUE(again);
}

// `etcdctl del` of the holder's key (an operator's forced unlock): loss signalled.
TEST_F(etcd_interop, key_deleted_signals_loss) {
    auto a = connect();
    auto held = a->acquire("deleted", {.wait = 5s});
    ASSERT_TRUE(held);
    auto [out, rc] = etcd_->etcdctl({"del", "--prefix", "deleted/"});
    ASSERT_EQ(rc, 0) << out;
    EXPECT_TRUE(eventually([&] { return held.stop_token().stop_requested(); }, 2s));
    std::error_code ec;
    held.release(ec);
    EXPECT_EQ(ec, dlock::errc::not_owner);
}

// `etcdctl del` of a waiter's own key while it waits: when the holder releases, the waiter
// finds its key gone (the one read after the watch event compares its create revision) and
// queues again with a new key, which it then holds; it never holds on the deleted key.
TEST_F(etcd_interop, a_waiter_whose_key_was_deleted_holds_only_on_a_new_key) {
    auto a = connect(), b = connect();
    auto held = a->acquire("requeue", {.wait = 5s});
    ASSERT_TRUE(held);
    auto waiter =
        std::async(std::launch::async, [&] { return b->acquire("requeue", {.wait = 10s}); });
    std::error_code ec;
    ASSERT_TRUE(eventually(
        [&] {
            return a->inspect("requeue", dlock::lock_kind::reentrant, ec).contenders.size() == 2;
        },
        5s));
    const auto queued = a->inspect("requeue", dlock::lock_kind::reentrant, ec).contenders.back();
    auto [out, rc] = etcd_->etcdctl({"del", queued.entry});
    ASSERT_EQ(rc, 0) << out;
    ASSERT_EQ(waiter.wait_for(300ms), std::future_status::timeout) << "granted while held";
    held.release();
    ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
    auto got = waiter.get();
    ASSERT_TRUE(got);
    const auto now = a->inspect("requeue", dlock::lock_kind::reentrant, ec);
    ASSERT_EQ(now.contenders.size(), 1U);
    EXPECT_EQ(now.contenders.front().token, got.token());
    EXPECT_GT(*got.token(), *queued.token) << "held on the deleted key";
    EXPECT_FALSE(got.lost());
}

// Names are data: refused before anything is sent when they could mix with other locks.
TEST_F(etcd_interop, bad_names_are_refused) {
    auto c = connect();
    for (const auto* bad : {"a/b", "", "x\n"}) {
        std::error_code ec;
        EXPECT_FALSE(c->acquire(bad, {.wait = 0ms}, ec));
        EXPECT_EQ(ec, dlock::errc::invalid_argument) << bad;
    }
}

// Unreachable endpoints are errc::unavailable, bounded by connect_timeout.
TEST_F(etcd_interop, unreachable_is_unavailable) {
    dlock::client c("etcd://127.0.0.1:1?connect_timeout=500");
    std::error_code ec;
    const auto t0 = clock_type::now();
    EXPECT_FALSE(c.acquire("x", {.wait = 0ms}, ec));
    EXPECT_EQ(ec, dlock::errc::unavailable) << ec.message();
    EXPECT_LT(clock_type::now() - t0, 3s);
}

} // namespace
