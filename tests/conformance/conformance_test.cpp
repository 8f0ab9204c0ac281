// The behaviours every backend of dlock::client promises, written once and run over every
// backend and every lock kind it offers (the table in backends.cpp): exclusion across clients,
// re-entry of lock objects, wait timeouts, fixed-lease expiry, the loss signal of a forced
// unlock, fencing tokens, inspect/list, waiters woken by a forced unlock, the multi-lock, bad
// names and URLs, errc::unsupported for every kind a backend lacks and for another backend's own
// calls (dlock/redis.hpp, dlock/redlock.hpp, dlock/zookeeper.hpp). Each backend's
// servers are started once per process; every test uses lock names of its own.
#include "backends.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace dlock::conformance {
namespace {

using clock = std::chrono::steady_clock;

bool any_holder(const lock_status& st) {
    return std::any_of(st.contenders.begin(), st.contenders.end(),
                       [](const lock_contender& c) { return c.holds; });
}

// ---- per (backend, offered kind) ----------------------------------------------------------

class kind : public ::testing::TestWithParam<kind_case> {
protected:
    void SetUp() override {
        CONFORMANCE_START(backend(), u);
        url_ = u;
        name_ = fresh_name(name_of(traits().kind));
    }
    const backend_entry& backend() const { return *GetParam().backend; }
    const kind_traits& traits() const { return GetParam().traits; }
    std::unique_ptr<client> connect() const { return backend().connect(url_); }
    acquire_options opts(std::optional<std::chrono::milliseconds> wait, lock_kind k) const {
        return {.wait = wait, .kind = k};
    }
    /// Takes the lock of the tested kind through `c` (asserted by the caller).
    lease hold(client& c) const { return c.acquire(name_, opts(5s, traits().kind)); }

    std::string url_;
    std::string name_;
};

// 1. While A holds, B's try (wait 0) of the rival kind fails; after A's release B gets it.
// A shared kind also admits a second holder of its own kind.
TEST_P(kind, excludes_across_clients) {
    auto a = connect(), b = connect();
    auto held = hold(*a);
    ASSERT_TRUE(held);
    EXPECT_FALSE(b->acquire(name_, opts(0ms, traits().rival)));
    if (traits().rival != traits().kind) { // shared: another holder of the same kind fits
        EXPECT_TRUE(b->acquire(name_, opts(0ms, traits().kind)));
    }
    held.release();
    auto next = b->acquire(name_, opts(0ms, traits().rival));
    EXPECT_TRUE(next);
}

// 2. The thread-bound object: a reentrant one counts holds (2, 1, 0); a simple one refuses its
// holder's second lock() with errc::invalid_argument. Another client gets the lock after.
TEST_P(kind, lock_object_reentry) {
    if (traits().obj == object::none) GTEST_SKIP() << "no lock object takes this kind";
    auto a = connect(), b = connect();
    lock_object m(*a, name_, traits().kind);
    m.get().lock();
    std::error_code ec;
    if (traits().obj == object::reentrant) {
        m.get().lock();
        EXPECT_EQ(m.get().hold_count(), 2);
        m.get().unlock();
        EXPECT_EQ(m.get().hold_count(), 1);
        EXPECT_FALSE(b->acquire(name_, opts(0ms, traits().rival))); // still held once
    } else {
        m.get().lock(ec);
        EXPECT_EQ(ec, errc::invalid_argument) << ec.message();
        EXPECT_THROW(m.get().lock(), dlock::error);
    }
    m.get().unlock();
    EXPECT_EQ(m.get().hold_count(), 0);
    EXPECT_TRUE(b->acquire(name_, opts(0ms, traits().rival)));
}

// 3. A wait of 200 ms on a held lock returns empty after about the wait, never much later.
TEST_P(kind, wait_times_out) {
    auto a = connect(), b = connect();
    auto held = hold(*a);
    ASSERT_TRUE(held);
    constexpr auto wait = 200ms;
    const auto t0 = clock::now();
    auto l = b->acquire(name_, opts(wait, traits().rival));
    const auto took = clock::now() - t0;
    EXPECT_FALSE(l);
    EXPECT_GE(took, wait - 10ms);
    EXPECT_LT(took, wait + 2s);
}

// 4. A fixed lease of 300 ms frees the lock without a release: another client, waiting a few
// seconds, gets it, and the first holder's lease is lost. A backend without leases refuses a
// fixed lease with errc::unsupported.
TEST_P(kind, fixed_lease_expires) {
    auto a = connect(), b = connect();
    auto o = opts(5s, traits().kind);
    o.lease = 300ms;
    std::error_code ec;
    auto held = a->acquire(name_, o, ec);
    if (!traits().fixed_lease) {
        EXPECT_EQ(ec, errc::unsupported) << ec.message();
        EXPECT_FALSE(held);
        return;
    }
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(held);
    const auto t0 = clock::now();
    auto w = opts(5s, traits().rival);
    w.lease = 300ms; // the same lease: the versioned kind's takeover waits one lease of its own
    auto next = b->acquire(name_, w, ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_TRUE(next);
    EXPECT_LT(clock::now() - t0, 4s);
    EXPECT_TRUE(eventually([&] { return held.lost(); }, 2s)) << "expired lease not marked lost";
}

// 5. client::force_unlock() by another client ends the hold: the holder's stop_token is
// requested and its on_lost callback runs (after an extend where only a renewal notices).
TEST_P(kind, forced_unlock_signals_loss) {
    auto a = connect(), c = connect();
    auto held = hold(*a);
    ASSERT_TRUE(held);
    std::atomic<bool> called{false};
    held.on_lost([&] { called = true; });
    std::error_code ec;
    EXPECT_TRUE(c->force_unlock(name_, traits().kind, ec)) << ec.message();
    EXPECT_FALSE(ec) << ec.message();
    if (traits().loss == loss_seen::on_extend) {
        held.extend(30s, ec);
        EXPECT_EQ(ec, errc::not_owner) << ec.message();
    }
    EXPECT_TRUE(eventually([&] { return held.stop_token().stop_requested(); }, 5s));
    EXPECT_TRUE(eventually([&] { return called.load(); }, 1s));
    EXPECT_TRUE(held.lost());
    EXPECT_LE(held.valid_until(), clock::now());
}

// 6. Successive holders (alternating clients) get strictly increasing fencing tokens; a kind
// without a token gives none.
TEST_P(kind, fencing_tokens_increase) {
    auto a = connect(), b = connect();
    std::optional<std::uint64_t> last;
    for (int i = 0; i < 4; ++i) {
        auto l = hold(i % 2 == 0 ? *a : *b);
        ASSERT_TRUE(l);
        if (!traits().fenced) {
            EXPECT_FALSE(l.token()) << "round " << i;
            continue;
        }
        ASSERT_TRUE(l.token()) << "round " << i;
        if (last) {
            EXPECT_GT(*l.token(), *last) << "round " << i;
        }
        last = l.token();
        l.release();
    }
}

// 7a. inspect() shows a held lock with a holder (and its remaining lease where the backend
// has one); after the release nothing holds it.
TEST_P(kind, inspect_shows_the_holder) {
    auto a = connect(), b = connect();
    auto held = hold(*a);
    ASSERT_TRUE(held);
    std::error_code ec;
    auto st = b->inspect(name_, traits().kind, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(st.exists);
    EXPECT_TRUE(any_holder(st));
    EXPECT_EQ(st.name, name_);
    EXPECT_EQ(st.backend, b->backend_name()); // one schema: every status names its backend
    EXPECT_NE(st.kind, "none");
    if (traits().status_lease) {
        EXPECT_TRUE(st.remaining_lease && st.remaining_lease->count() > 0);
    } else {
        EXPECT_FALSE(st.remaining_lease);
    }
    held.release();
    st = b->inspect(name_, traits().kind, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_FALSE(st.exists && any_holder(st));
}

// 7b. list() finds a held lock by a pattern of its name.
TEST_P(kind, list_finds_the_held_lock) {
    auto a = connect(), b = connect();
    auto held = hold(*a);
    ASSERT_TRUE(held);
    std::error_code ec;
    const auto found = b->list(name_.substr(0, name_.find('-') + 1) + "*", ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(std::any_of(found.begin(), found.end(),
                            [&](const lock_status& s) { return s.name == name_ && s.exists; }))
        << found.size() << " lock(s) listed";
}

// 8. A waiter (wait 10 s) gets the lock soon after a third client forces the holder's unlock.
TEST_P(kind, forced_unlock_wakes_waiters) {
    auto a = connect(), b = connect(), c = connect();
    auto held = hold(*a);
    ASSERT_TRUE(held);
    const auto rival = traits().rival;
    auto waiter = std::async(std::launch::async, [&] {
        auto l = b->acquire(name_, opts(10s, rival));
        return std::make_pair(static_cast<bool>(l), clock::now());
    });
    // Not granted while A holds (this also gives the waiter time to start waiting).
    ASSERT_EQ(waiter.wait_for(300ms), std::future_status::timeout);
    const auto forced_at = clock::now();
    std::error_code ec;
    EXPECT_TRUE(c->force_unlock(name_, traits().kind, ec)) << ec.message();
    ASSERT_EQ(waiter.wait_for(8s), std::future_status::ready) << "waiter not woken";
    const auto [got, at] = waiter.get();
    EXPECT_TRUE(got);
    EXPECT_LT(at - forced_at, 3s);
}

// 7c. The client's metrics count the acquisition in the kind's own slot (its label is the
// kind's name; the reentrant lock's is "reentrant").
TEST_P(kind, metrics_count_the_kind_in_its_own_slot) {
    auto a = connect();
    if (!a->metrics().enabled) GTEST_SKIP() << "built without metrics";
    auto held = hold(*a);
    ASSERT_TRUE(held);
    const auto label =
        traits().kind == lock_kind::reentrant ? std::string("reentrant") : name_of(traits().kind);
    const auto s = a->metrics();
    EXPECT_EQ(s.kind(label).acquired, 1U) << label;
    std::uint64_t all = 0;
    for (const auto& k : s.acquisitions)
        all += k.acquired;
    EXPECT_EQ(all, 1U) << "counted once, in its own slot";
}

INSTANTIATE_TEST_SUITE_P(conformance, kind, ::testing::ValuesIn(kind_params()),
                         [](const auto& i) { return param_name(i); });

// ---- per (backend, kind it lacks) -----------------------------------------------------------

class lacking : public ::testing::TestWithParam<lacking_case> {};

// Every way to take, end or read a lock of a kind the backend lacks is errc::unsupported.
TEST_P(lacking, kind_is_unsupported) {
    const auto& [entry, kind] = GetParam();
    CONFORMANCE_START(*entry, url);
    auto c = entry->connect(url);
    const auto name = fresh_name(name_of(kind));
    std::error_code ec;
    EXPECT_FALSE(c->acquire(name, {.wait = 0ms, .kind = kind}, ec));
    EXPECT_EQ(ec, errc::unsupported) << "acquire: " << ec.message();
    c->force_unlock(name, kind, ec);
    EXPECT_EQ(ec, errc::unsupported) << "force_unlock: " << ec.message();
    c->inspect(name, kind, ec);
    EXPECT_EQ(ec, errc::unsupported) << "inspect: " << ec.message();
    const lock_ref members[] = {{name + "-a"}, {name + "-b", kind}};
    EXPECT_FALSE(c->acquire_all(members, {.wait = 0ms}, ec));
    EXPECT_EQ(ec, errc::unsupported) << "acquire_all: " << ec.message();
    if (kind == lock_kind::simple) { // the one lacked kind with a lock object of its own
        try {
            auto m = c->make_simple_mutex(name);
            EXPECT_FALSE(m.try_lock(ec));
            EXPECT_EQ(ec, errc::unsupported) << "simple_mutex: " << ec.message();
        } catch (const dlock::error& e) {
            EXPECT_EQ(e.code(), errc::unsupported) << e.what();
        }
    }
}

INSTANTIATE_TEST_SUITE_P(conformance, lacking, ::testing::ValuesIn(lacking_params()),
                         [](const auto& i) { return param_name(i); });

// ---- per backend ----------------------------------------------------------------------------

class backend : public ::testing::TestWithParam<const backend_entry*> {};

/// The kind the per-backend tests take: the backend's first (the reentrant lock where it has
/// one; simple on Redlock, whose one kind it is).
lock_kind first_kind(const backend_entry& entry) {
    return entry.kinds.front().kind;
}

// 9. acquire_all() of two names takes both; a third client can take neither meanwhile; the
// release frees both together.
TEST_P(backend, multi_lock_takes_all_and_releases_together) {
    const auto& entry = *GetParam();
    CONFORMANCE_START(entry, url);
    auto a = entry.connect(url), c = entry.connect(url);
    const auto one = fresh_name("m1"), two = fresh_name("m2");
    const auto k = first_kind(entry);
    auto all = a->acquire_all({{one, k}, {two, k}}, {.wait = 5s});
    ASSERT_TRUE(all);
    EXPECT_EQ(all.members().size(), 2U);
    EXPECT_FALSE(c->acquire(one, {.wait = 0ms, .kind = k}));
    EXPECT_FALSE(c->acquire(two, {.wait = 0ms, .kind = k}));
    all.release();
    EXPECT_TRUE(c->acquire(one, {.wait = 0ms, .kind = k}));
    EXPECT_TRUE(c->acquire(two, {.wait = 0ms, .kind = k}));
}

// 9b. A read-write lock object tells whether either side is held, seen from another client
// (rw_mutex::is_locked), on every backend that offers both sides.
TEST_P(backend, read_write_lock_is_locked_in_either_mode) {
    const auto& entry = *GetParam();
    CONFORMANCE_START(entry, url);
    const auto offers = [&](lock_kind k) {
        return std::any_of(entry.kinds.begin(), entry.kinds.end(),
                           [k](const kind_traits& t) { return t.kind == k; });
    };
    if (!offers(lock_kind::read) || !offers(lock_kind::write))
        GTEST_SKIP() << entry.label << " has no read-write lock";
    auto a = entry.connect(url), b = entry.connect(url);
    const auto name = fresh_name("rw");
    auto mine = a->make_rw_mutex(name);
    auto theirs = b->make_rw_mutex(name);
    EXPECT_FALSE(theirs.is_locked());
    mine.lock();
    EXPECT_TRUE(theirs.is_locked());
    mine.unlock();
    EXPECT_FALSE(theirs.is_locked());
    mine.lock_shared();
    EXPECT_TRUE(theirs.is_locked());
    mine.unlock_shared();
    EXPECT_FALSE(theirs.is_locked());
}

// 10. An empty name is errc::invalid_argument (thrown by the lock object of the backend's
// first kind and by acquire());
// an unknown scheme is a dlock::error; a malformed URL of the backend's scheme is
// errc::configuration_error.
TEST_P(backend, bad_names_and_urls) {
    const auto& entry = *GetParam();
    CONFORMANCE_START(entry, url);
    auto c = entry.connect(url);
    const auto k = first_kind(entry);
    try {
        lock_object m(*c, "", k);
        m.get().lock();
        ADD_FAILURE() << "a lock object named \"\" locked";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
    }
    try {
        auto l = c->acquire("", {.wait = 0ms, .kind = k});
        ADD_FAILURE() << "acquire(\"\") returned " << (l ? "a lease" : "empty");
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
    }
    EXPECT_THROW(client("nosuch://x"), dlock::error);
    try {
        client bad(entry.bad_url);
        ADD_FAILURE() << entry.bad_url << " accepted";
    } catch (const dlock::error& e) {
        EXPECT_EQ(e.code(), errc::configuration_error) << entry.bad_url << ": " << e.what();
    }
}

// 11. What one backend alone has (dlock/redis.hpp, redlock.hpp, zookeeper.hpp) is errc::unsupported
// on a client of another backend, in both forms (async_command completes with it), and the thrown
// message names the call, the client it needs and the backend the client has. On its own
// backend it is served (the Redis calls here; the ZooKeeper fenced write in zookeeper_client_test).
TEST_P(backend, backend_only_calls_need_their_backend) {
    const auto& entry = *GetParam();
    CONFORMANCE_START(entry, url);
    auto c = entry.connect(url);
    const std::string have(c->backend_name());
    const auto refused = [&](const std::function<void()>& call, const std::string& what,
                             const std::string& needs) {
        try {
            call();
            ADD_FAILURE() << what << " on a " << have << " client";
        } catch (const dlock::error& e) {
            const std::string text = e.what();
            EXPECT_EQ(e.code(), errc::unsupported) << text;
            EXPECT_NE(text.find(what + " needs "), std::string::npos) << text;
            EXPECT_NE(text.find(needs), std::string::npos) << text;
            EXPECT_NE(text.find("this client's backend is " + have), std::string::npos) << text;
        }
    };
    std::error_code ec;
    const std::string_view ping[] = {"PING"};
    if (have == "redis") {
        EXPECT_EQ(dlock::redis::command(*c, {"PING"}).str, "PONG");
        EXPECT_GE(dlock::redis::masters(*c), 1U);
        EXPECT_EQ(dlock::redis::command_on_master(*c, 0, ping).str, "PONG");
    } else {
        refused([&] { (void)dlock::redis::command(*c, {"PING"}); }, "dlock::redis::command",
                "redis-cluster://");
        refused([&] { (void)dlock::redis::masters(*c); }, "dlock::redis::masters",
                "redis-sentinel://");
        refused([&] { (void)dlock::redis::command_on_master(*c, 0, ping); },
                "dlock::redis::command_on_master", "redis://");
        refused([&] { (void)dlock::redis::fenced_set(*c, "k", "k:fence", 1, "v"); },
                "dlock::redis::fenced_set", "rediss://");
        (void)dlock::redis::command(*c, ping, ec);
        EXPECT_EQ(ec, errc::unsupported);
        EXPECT_EQ(dlock::redis::masters(*c, ec), 0U);
        EXPECT_EQ(ec, errc::unsupported);
        (void)dlock::redis::command_on_master(*c, 0, ping, ec);
        EXPECT_EQ(ec, errc::unsupported);
        EXPECT_FALSE(dlock::redis::fenced_set(*c, "k", "k:fence", 1, "v", ec));
        EXPECT_EQ(ec, errc::unsupported);
        std::promise<std::error_code> done;
        dlock::redis::async_command(
            *c, {"PING"}, [&done](std::error_code e, resp3::value) { done.set_value(e); });
        auto f = done.get_future();
        ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
        EXPECT_EQ(f.get(), errc::unsupported);
    }
    if (have == "redlock") {
        EXPECT_GE(dlock::redlock::masters(*c), 1U);
    } else {
        refused([&] { (void)dlock::redlock::masters(*c); }, "dlock::redlock::masters",
                "redlock://");
        EXPECT_EQ(dlock::redlock::masters(*c, ec), 0U);
        EXPECT_EQ(ec, errc::unsupported);
    }
    if (have != "zookeeper") {
        auto held = c->acquire(fresh_name("zf"), {.wait = 5s, .kind = first_kind(entry)});
        ASSERT_TRUE(held);
        refused([&] { dlock::zookeeper::fenced_set(*c, held, "res", "v"); },
                "dlock::zookeeper::fenced_set", "zk://");
        EXPECT_FALSE(dlock::zookeeper::fenced_set(*c, held, "res", "v", ec));
        EXPECT_EQ(ec, errc::unsupported);
    }
}

/// A lease's warning and loss, in the order they came and when (from the callbacks).
struct ends_log {
    std::mutex mu;
    std::vector<std::pair<std::string, clock::time_point>> seen; // guarded by mu
    void watch(lease& l) {
        l.on_warning([this] { note("warning"); });
        l.on_lost([this] { note("lost"); });
    }
    void note(const char* what) {
        std::lock_guard g(mu);
        seen.emplace_back(what, clock::now());
    }
    /// The client's log records' messages, in order.
    std::vector<std::string> logged; // guarded by mu
    log_options sink() {
        return {.sink =
                    [this](const log_record& r) {
                        std::lock_guard g(mu);
                        logged.emplace_back(r.message);
                    },
                .level = log_level::warning};
    }
    /// Where `message` was first logged (logged.size(): never).
    std::size_t first(std::string_view message) {
        std::lock_guard g(mu);
        return static_cast<std::size_t>(std::find(logged.begin(), logged.end(), message) -
                                        logged.begin());
    }
};

// A lease that cannot renew (its server paused) warns, and then is lost, in that order and
// apart by about the margin; while renewals work it does not warn. The client's log says
// "lock renewal failed" before "lock lost", whatever renews the hold (Redis's batch script,
// Redlock's quorum, ZooKeeper's session ping, etcd's keep-alive, PostgreSQL's session check).
TEST_P(backend, a_lease_that_cannot_renew_warns_before_it_is_lost) {
    const auto& b = *GetParam();
    if (!b.available()) GTEST_SKIP() << b.label << ": server binaries not installed";
    if (!b.start_own) GTEST_SKIP() << b.label << ": covered by " << b.own_covered_by;
    auto s = b.start_own();
    ends_log log;
    auto c = b.connect(s.url, log.sink());
    constexpr auto margin = 400ms;
    auto l = c->acquire(fresh_name("warn"),
                        {.wait = 10s, .kind = b.kinds.front().kind, .warn_margin = margin});
    ASSERT_TRUE(l);
    log.watch(l);
    auto& mu = log.mu;
    auto& seen = log.seen;
    // Renewals work: the validity moves forward twice, and no warning comes.
    for (int i = 0; i < 2; ++i) {
        const auto before = l.valid_until();
        ASSERT_TRUE(eventually([&] { return l.valid_until() > before; }, 10s)) << "renewal " << i;
    }
    EXPECT_FALSE(l.warned());
    s.pause();
    // lost() turns true before the callbacks run (on the I/O thread): wait for the callback.
    const bool lost = eventually(
        [&] {
            std::lock_guard g(mu);
            return l.lost() && seen.size() == 2;
        },
        30s);
    s.resume();
    ASSERT_TRUE(lost);
    const auto failed = log.first("lock renewal failed; the locks are lost if it keeps failing");
    const auto lost_at = log.first("lock lost");
    std::lock_guard g(mu);
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0].first, "warning");
    EXPECT_EQ(seen[1].first, "lost");
    EXPECT_GE(seen[1].second - seen[0].second, margin / 2) << "the warning came with the loss";
    EXPECT_TRUE(l.warning_token().stop_requested());
    EXPECT_LT(failed, log.logged.size()) << "no \"lock renewal failed\" record";
    EXPECT_LT(failed, lost_at) << "\"lock renewal failed\" came after \"lock lost\"";
}

// acquire_options::max_hold (docs/design/warning.md): a lease warns a margin before grant +
// max_hold and is then lost with loss_cause::max_hold, never earlier and never valid past it,
// and its lock is released (a session backend would otherwise keep it while the session
// lives): another client gets it. Zero or negative is errc::invalid_argument.
TEST_P(backend, max_hold_ends_the_lease_after_a_warning_and_frees_the_lock) {
    const auto& b = *GetParam();
    CONFORMANCE_START(b, url);
    auto a = b.connect(url), other = b.connect(url);
    const auto k = b.kinds.front().kind;
    const auto name = fresh_name("maxhold");
    std::error_code ec;
    for (const auto bad : {0ms, -5ms}) {
        EXPECT_FALSE(a->acquire(name, {.wait = 0ms, .kind = k, .max_hold = bad}, ec));
        EXPECT_EQ(ec, errc::invalid_argument) << bad.count();
    }
    constexpr auto max_hold = 600ms;
    constexpr auto margin = 250ms;
    const auto asked = clock::now();
    auto l =
        a->acquire(name, {.wait = 10s, .kind = k, .warn_margin = margin, .max_hold = max_hold});
    const auto granted = clock::now();
    ASSERT_TRUE(l);
    ends_log log;
    log.watch(l);
    auto& mu = log.mu;
    auto& seen = log.seen;
    bool within = true; // valid_until() never passes grant + max_hold
    const bool ended = eventually(
        [&] {
            if (l.valid_until() > granted + max_hold) within = false;
            std::lock_guard g(mu);
            return l.lost() && seen.size() == 2;
        },
        10s);
    ASSERT_TRUE(ended) << "not lost after max_hold";
    EXPECT_TRUE(within);
    EXPECT_EQ(l.loss_cause(), loss_cause::max_hold);
    EXPECT_TRUE(l.stop_token().stop_requested());
    EXPECT_LT(l.valid_until(), clock::now());
    {
        std::lock_guard g(mu);
        ASSERT_EQ(seen.size(), 2u);
        EXPECT_EQ(seen[0].first, "warning");
        EXPECT_EQ(seen[1].first, "lost");
        EXPECT_GE(seen[1].second, asked + max_hold) << "lost before max_hold";
        EXPECT_GE(seen[1].second - seen[0].second, margin / 2) << "the warning came with the loss";
    }
    auto next = other->acquire(name, {.wait = 5s, .kind = k});
    EXPECT_TRUE(next) << "the lock was not released";
    const auto m = a->metrics();
    if (m.enabled) {
        EXPECT_EQ(m.losses[static_cast<std::size_t>(loss_cause::max_hold)], 1u);
        EXPECT_GE(m.warnings, 1u);
    }
}

// Run once per period (dlock/once.hpp): one claim per slot across clients; a released claim
// lets another in; a slot stays taken until its end; a stale release frees nothing. Backends
// without it say errc::unsupported (so far etcd and Redlock).
TEST_P(backend, once_per_period_admits_one_claim_per_slot) {
    const auto& b = *GetParam();
    CONFORMANCE_START(b, url);
    // etcd has no clock to align slots to: a slot there is a key with a lease of its own of
    // the period less 1 s (docs/design/once.md), so a period is at least 3 s and a slot given
    // back and claimed again is a new slot with a new index.
    const bool etcd = b.label == "etcd" || b.label == "etcd_cluster";
    const bool offered = b.label == "redis" || b.label == "sentinel" || b.label == "cluster" ||
                         b.label == "postgresql" || b.label == "zookeeper" || etcd;
    auto c1 = b.connect(url), c2 = b.connect(url);
    const auto name = fresh_name("once");
    std::error_code ec;
    auto first = claim_period(*c1, name, 1h, ec);
    if (!offered) {
        EXPECT_EQ(ec, errc::unsupported) << b.label;
        return;
    }
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(first);
    EXPECT_GT(first->left, 0ms);
    EXPECT_LE(first->left, 1h);
    EXPECT_FALSE(claim_period(*c2, name, 1h)) << "a second claim of the same slot";
    EXPECT_FALSE(claim_period(*c1, name, 1h)) << "the same client claims a slot once too";
    EXPECT_TRUE(release_period(*c1, name, *first));
    EXPECT_FALSE(release_period(*c1, name, *first)) << "released twice";
    auto second = claim_period(*c2, name, 1h);
    ASSERT_TRUE(second) << "a released slot may be claimed again";
    if (etcd)
        EXPECT_GT(second->index, first->index);
    else
        EXPECT_EQ(second->index, first->index);
    EXPECT_FALSE(release_period(*c1, name, *first)) << "a stale claim frees nothing";
    EXPECT_FALSE(claim_period(*c1, name, 1h));
    // A short period: the slot stays taken until its end, then the next one can be claimed.
    const auto quick = fresh_name("once-quick");
    const auto short_period = etcd ? 3000ms : 1500ms;
    auto s = claim_period(*c1, quick, short_period);
    ASSERT_TRUE(s);
    if (s->left > 300ms) {
        EXPECT_FALSE(claim_period(*c2, quick, short_period)) << "taken till its end";
    }
    EXPECT_TRUE(eventually([&] { return claim_period(*c2, quick, short_period).has_value(); }, 8s));
    if (etcd) { // a period etcd cannot time, and a name no lock may have
        EXPECT_EQ(claim_period(*c1, quick, 2999ms, ec), std::nullopt);
        EXPECT_EQ(ec, errc::invalid_argument);
        EXPECT_EQ(claim_period(*c1, "a/b", 1h, ec), std::nullopt);
        EXPECT_EQ(ec, errc::invalid_argument);
    }
    EXPECT_EQ(claim_period(*c1, "", 1h, ec), std::nullopt);
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_EQ(claim_period(*c1, name, 0ms, ec), std::nullopt);
    EXPECT_EQ(ec, errc::invalid_argument);
}

// A lease may outlive its client. Afterwards every call on it answers without the client (an
// extension fails; a release may fail, never hangs), a first watch is still possible, and
// dropping it is safe: the sanitizer builds check that nothing of the gone client's I/O loop
// is touched. Three leases: one watched before the client goes, one watched only after, one
// released before.
TEST_P(backend, a_lease_outliving_its_client_stays_safe_to_use_and_drop) {
    const auto& entry = *GetParam();
    CONFORMANCE_START(entry, url);
    const auto k = first_kind(entry);
    auto c = entry.connect(url);
    auto watched = c->acquire(fresh_name("orphan-w"), {.wait = 5s, .kind = k});
    auto unwatched = c->acquire(fresh_name("orphan-u"), {.wait = 5s, .kind = k});
    auto released = c->acquire(fresh_name("orphan-r"), {.wait = 5s, .kind = k});
    ASSERT_TRUE(watched && unwatched && released);
    std::atomic<int> warnings{0};
    watched.on_warning([&] { ++warnings; });
    watched.on_lost([] {});
    (void)watched.warning_token();
    released.on_warning([&] { ++warnings; });
    released.release();
    c.reset();
    for (auto* l : {&watched, &unwatched}) {
        (void)l->valid_until();
        (void)l->token();
        std::error_code ec;
        l->extend(10s, ec);
        EXPECT_TRUE(ec) << entry.label << ": an extension without its client";
        l->on_warning([&] { ++warnings; });
        (void)l->warning_token();
        l->release(ec); // may fail (the client is gone); must return
    }
    EXPECT_FALSE(released) << "a release empties the handle";
    watched = {};
    unwatched = {};
    released = {};
    SUCCEED() << warnings.load() << " warnings";
}

INSTANTIATE_TEST_SUITE_P(conformance, backend, ::testing::ValuesIn(backend_params()),
                         [](const auto& i) { return param_name(i); });

} // namespace
} // namespace dlock::conformance
