// The backend list of the conformance suite (backends.hpp) and its helpers.
#include "backends.hpp"

#include "../integration/test_util.hpp" // fast_options()
#include "redis_fixture.hpp"

#if defined(DLOCK_WITH_ZOOKEEPER) && DLOCK_WITH_ZOOKEEPER
#include "zk_fixture.hpp"
#endif
#if defined(DLOCK_WITH_POSTGRES) && DLOCK_WITH_POSTGRES
#include "pg_fixture.hpp"
#endif
#if defined(DLOCK_WITH_ETCD) && DLOCK_WITH_ETCD
#include "etcd_fixture.hpp"
#endif

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

namespace dlock::conformance {
namespace {

using lk = lock_kind;
using enum loss_seen;

// ---- the kinds each backend offers --------------------------------------------------------
// Columns: kind, rival, fenced, object, fixed lease, loss seen, status shows the lease.

/// Redis (standalone, Sentinel, Cluster alike): src/redis/locks/registry.cpp. Every kind has a
/// PX lease and the watchdog renews it, so a forced unlock is seen at the next renewal; simple
/// and read carry no fencing token (simple/protocol.cpp, rwlock/protocol.cpp). The semaphore
/// (Redisson RPermitExpirableSemaphore's layout) has a permit per holder, each with its expiry
/// and token, and no lease of N to show.
const std::vector<kind_traits> redis_kinds = {
    {lk::reentrant, lk::reentrant, true, object::reentrant, true, by_itself, true},
    {lk::simple, lk::simple, false, object::not_reentrant, true, by_itself, true},
    {lk::fair, lk::fair, true, object::reentrant, true, by_itself, true},
    {lk::read, lk::write, false, object::reentrant, true, by_itself, true},
    {lk::write, lk::write, true, object::reentrant, true, by_itself, true},
    {lk::semaphore, lk::semaphore, true, object::none, true, by_itself, false},
};

/// Redlock (src/redis/redlock/): the simple-lock layout on three masters. No fencing token (N
/// independent counters order no grant; dlock/redlock.hpp); a fixed lease ends at its
/// validity; the watchdog (a 1.5 s lease, extended every 500 ms) finds a forced unlock refused
/// by a quorum and signals the loss at once; status shows the quorum's remaining lease.
const std::vector<kind_traits> redlock_kinds = {
    {lk::simple, lk::simple, false, object::not_reentrant, true, by_itself, true},
};

/// ZooKeeper (src/zookeeper/backend.cpp infix_of): Curator's lock, read-write lock and
/// semaphore. No lease: a node lives as long as its session, so a fixed lease is
/// errc::unsupported and inspect() has no remaining lease; the token is the node's czxid
/// (none for read nodes); a deleted node is seen by the holder's watch.
[[maybe_unused]] const std::vector<kind_traits> zk_kinds = {
    {lk::reentrant, lk::reentrant, true, object::reentrant, false, by_itself, false},
    {lk::fair, lk::fair, true, object::reentrant, false, by_itself, false},
    {lk::read, lk::write, false, object::reentrant, false, by_itself, false},
    {lk::write, lk::write, true, object::reentrant, false, by_itself, false},
    {lk::semaphore, lk::semaphore, true, object::none, false, by_itself, false},
};

/// PostgreSQL (src/postgres/advisory*.cpp, rows/): advisory locks for the Redis kinds (a
/// session per hold, watched: a terminated session is a loss at once; no lease in the server,
/// a fixed lease ends the hold on the client; tokens from dlock_fence except for read), and
/// the lease rows (renewed every 10 s by the watchdog, so a forced unlock is seen at the next
/// extend; shedlock has no token; versioned has no clock in its table, so no remaining lease).
/// The semaphore is a lease row per permit (rows/semaphore.cpp): each holder has its own
/// remaining lease, the status none of N.
[[maybe_unused]] const std::vector<kind_traits> pg_kinds = {
    {lk::reentrant, lk::reentrant, true, object::reentrant, true, by_itself, false},
    {lk::simple, lk::simple, true, object::not_reentrant, true, by_itself, false},
    {lk::fair, lk::fair, true, object::reentrant, true, by_itself, false},
    {lk::read, lk::write, false, object::reentrant, true, by_itself, false},
    {lk::write, lk::write, true, object::reentrant, true, by_itself, false},
    {lk::shedlock, lk::shedlock, false, object::none, true, on_extend, true},
    {lk::lease, lk::lease, true, object::none, true, on_extend, true},
    {lk::versioned, lk::versioned, true, object::none, true, on_extend, false},
    {lk::semaphore, lk::semaphore, true, object::none, true, on_extend, false},
};

/// etcd (src/etcd/): etcd's concurrency.Mutex for lock and fair (FIFO by create revision),
/// its recipes.RWMutex for read and write, dlock's semaphore layout. Every hold is bound to the
/// client's lease, kept alive by its stream: no fixed lease; the token is the key's create revision
/// (readers' too); a deleted key is seen by the holder's watch; inspect() shows the holder's lease
/// TTL.
[[maybe_unused]] const std::vector<kind_traits> etcd_kinds = {
    {lk::reentrant, lk::reentrant, true, object::reentrant, false, by_itself, true},
    {lk::fair, lk::fair, true, object::reentrant, false, by_itself, true},
    {lk::read, lk::write, true, object::reentrant, false, by_itself, true},
    {lk::write, lk::write, true, object::reentrant, false, by_itself, true},
    {lk::semaphore, lk::semaphore, true, object::none, false, by_itself, true},
};

// ---- servers, started once per process ----------------------------------------------------

/// Starts fixture T once (the first call; a failed start is tried again by the next test) and
/// returns what `url` makes of it.
template <class T, class Url>
std::string start_once(Url url) {
    static std::mutex mu;
    static std::string started;
    std::lock_guard g(mu);
    if (started.empty()) {
        auto f = std::make_shared<T>();
        started = url(*f);
        keep_until_exit(std::move(f));
    }
    return started;
}

/// Redis test clients: short connect/command bounds and a 1.5 s watchdog lease (renewed
/// every 500 ms), so a forced unlock is seen within about half a second.
std::unique_ptr<client> redis_client(const std::string& url, const log_options& log) {
    auto o = test::fast_options(url);
    o.watchdog_lease = 1500ms;
    o.log = log;
    return std::make_unique<client>(std::move(o));
}

/// Three standalone masters, for Redlock.
struct three_masters : test::redis_masters {
    three_masters()
        : redis_masters(3) {}
};

/// "redlock://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3?..." over the masters: rounds wait 100 ms
/// at most, waiters poll every 5-15 ms.
std::string redlock_url(test::redis_masters& m) {
    std::string hosts;
    for (const auto& u : m.urls())
        hosts.append(hosts.empty() ? "" : ",").append(u.substr(u.find("://") + 3));
    return "redlock://" + hosts + "?node_timeout=100&retry_delay=5&retry_jitter=10";
}

/// Redlock test clients: each master with the Redis test clients' bounds, and their watchdog
/// lease (1.5 s, extended every 500 ms).
std::unique_ptr<client> redlock_client(const std::string& url, const log_options& log) {
    auto o = redlock::parse_url(url);
    for (auto& m : o.masters) {
        m = test::fast_options("redis://" + m.endpoints.at(0).host + ":" +
                               std::to_string(m.endpoints.at(0).port));
        m.log = log;
    }
    o.watchdog_lease = 1500ms;
    return std::make_unique<client>(o);
}

std::unique_ptr<client> url_client(const std::string& url, const log_options& log) {
    return std::make_unique<client>(url, log);
}

#if defined(DLOCK_WITH_ETCD) && DLOCK_WITH_ETCD
/// A 3-member etcd cluster (a type of its own: start_once keeps one server per type).
struct etcd_three final : test::etcd_cluster {
    etcd_three()
        : etcd_cluster(3) {}
};
/// etcd test clients: a 5 s lease (renewed every 1.7 s) and 2 s request bounds.
std::string etcd_url(const test::etcd_cluster& c) {
    return c.url("", "?ttl=5&connect_timeout=2000");
}
#endif

// ---- servers of a test's own, which it pauses --------------------------------------------

own_server own_redis() {
    auto s = std::make_shared<test::redis_server>();
    return {s->url(), [s] { s->pause(); }, [s] { s->resume(); }, s};
}

/// Two of the three masters paused: no quorum renews.
own_server own_redlock() {
    auto m = std::make_shared<three_masters>();
    return {redlock_url(*m), [m] { (*m)[0].pause(), (*m)[1].pause(); },
            [m] { (*m)[0].resume(), (*m)[1].resume(); }, m};
}

#if defined(DLOCK_WITH_ZOOKEEPER) && DLOCK_WITH_ZOOKEEPER
own_server own_zookeeper() {
    auto s = std::make_shared<test::zk_server>();
    return {s->url() + "?session_timeout=2000&connect_timeout=10000", [s] { s->pause(); },
            [s] { s->resume(); }, s};
}
#endif

#if defined(DLOCK_WITH_POSTGRES) && DLOCK_WITH_POSTGRES
/// Holds proven alive every 750 ms, for 1.5 s each.
own_server own_postgres() {
    auto s = std::make_shared<test::pg_server>();
    return {s->url("dlock_check=1500"), [s] { s->pause(); }, [s] { s->resume(); }, s};
}
#endif

#if defined(DLOCK_WITH_ETCD) && DLOCK_WITH_ETCD
/// A 2 s lease, kept alive every 667 ms.
own_server own_etcd() {
    auto c = std::make_shared<test::etcd_cluster>(1);
    return {c->url("", "?ttl=2&connect_timeout=2000"), [c] { c->member(0).pause(); },
            [c] { c->member(0).resume(); }, c};
}
#endif

// ---- the environment that stops the servers -------------------------------------------------

class servers final : public ::testing::Environment {
public:
    void keep(std::shared_ptr<void> f) {
        std::lock_guard g(mu_);
        kept_.push_back(std::move(f));
    }
    void TearDown() override {
        std::lock_guard g(mu_);
        while (!kept_.empty())
            kept_.pop_back(); // newest first
    }

private:
    std::mutex mu_;
    std::vector<std::shared_ptr<void>> kept_;
};

servers* const the_servers =
    static_cast<servers*>(::testing::AddGlobalTestEnvironment(new servers));

} // namespace

void keep_until_exit(std::shared_ptr<void> fixture) {
    the_servers->keep(std::move(fixture));
}

// ---- THE backend list: one entry per backend ------------------------------------------------

const std::vector<backend_entry>& backend_list() {
    static const std::vector<backend_entry> all = {
        {"redis", test::redis_available,
         [] { return start_once<test::redis_server>([](auto& s) { return s.url(); }); },
         redis_client, "redis://127.0.0.1:notaport", redis_kinds, own_redis},
        {"sentinel",
         test::sentinel_available,
         [] { return start_once<test::redis_sentinel_group>([](auto& g) { return g.url(); }); },
         redis_client,
         "redis-sentinel://127.0.0.1:26379",
         redis_kinds,
         {},
         "redis (the same hold and renewal code; a paused Sentinel master fails over: fault F24 "
         "FO)"},
        {"cluster",
         test::redis_available,
         [] { return start_once<test::redis_cluster>([](auto& c) { return c.url(); }); },
         redis_client,
         "redis-cluster://127.0.0.1:70000",
         redis_kinds,
         {},
         "redis (the same hold and renewal code, on the slot's master)"},
        {"redlock", test::redis_available,
         [] { return start_once<three_masters>([](auto& m) { return redlock_url(m); }); },
         redlock_client, "redlock://127.0.0.1:6379,127.0.0.1:notaport", redlock_kinds, own_redlock},
#if defined(DLOCK_WITH_ZOOKEEPER) && DLOCK_WITH_ZOOKEEPER
        {"zookeeper", test::zookeeper_available,
         [] {
             return start_once<test::zk_server>(
                 [](auto& s) { return s.url() + "?session_timeout=4000&connect_timeout=10000"; });
         },
         url_client, "zk://127.0.0.1:70000", zk_kinds, own_zookeeper},
#endif
#if defined(DLOCK_WITH_POSTGRES) && DLOCK_WITH_POSTGRES
        {"postgresql", test::postgres_available,
         [] { return start_once<test::pg_server>([](auto& s) { return s.url(); }); }, url_client,
         "postgresql://127.0.0.1/postgres?dlock_key=nope", pg_kinds, own_postgres},
#endif
#if defined(DLOCK_WITH_ETCD) && DLOCK_WITH_ETCD
        {"etcd", test::etcd_available, [] { return start_once<test::etcd_cluster>(etcd_url); },
         url_client, "etcd://127.0.0.1:70000", etcd_kinds, own_etcd},
        {"etcd_cluster",
         test::etcd_available,
         [] { return start_once<etcd_three>(etcd_url); },
         url_client,
         "etcd://127.0.0.1:70000",
         etcd_kinds,
         {},
         "etcd (the same lease session; a paused member of three: etcd_cluster_test)"},
#endif
    };
    return all;
}

// ---- parameters and names -------------------------------------------------------------------

std::vector<const backend_entry*> backend_params() {
    std::vector<const backend_entry*> v;
    for (const auto& b : backend_list())
        v.push_back(&b);
    return v;
}

std::vector<kind_case> kind_params() {
    std::vector<kind_case> v;
    for (const auto& b : backend_list())
        for (const auto& k : b.kinds)
            v.push_back({&b, k});
    return v;
}

std::vector<lacking_case> lacking_params() {
    std::vector<lacking_case> v;
    for (const auto& b : backend_list())
        for (const auto k : dlock::all_kinds())
            if (std::none_of(b.kinds.begin(), b.kinds.end(),
                             [k](const kind_traits& t) { return t.kind == k; }))
                v.push_back({&b, k});
    return v;
}

std::string param_name(const ::testing::TestParamInfo<const backend_entry*>& i) {
    return i.param->label;
}
std::string param_name(const ::testing::TestParamInfo<kind_case>& i) {
    return i.param.backend->label + "_" + name_of(i.param.traits.kind);
}
std::string param_name(const ::testing::TestParamInfo<lacking_case>& i) {
    return i.param.backend->label + "_" + name_of(i.param.kind);
}

void PrintTo(const kind_case& c, std::ostream* os) {
    *os << c.backend->label << "/" << name_of(c.traits.kind);
}
void PrintTo(const lacking_case& c, std::ostream* os) {
    *os << c.backend->label << "/" << name_of(c.kind);
}
void PrintTo(const backend_entry* b, std::ostream* os) {
    *os << b->label;
}

std::string fresh_name(const std::string& tag) {
    static std::atomic<unsigned> n{0};
    return "cf" + std::to_string(++n) + "-" + tag;
}

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds budget) {
    const auto until = std::chrono::steady_clock::now() + budget;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

// ---- thread-bound lock objects ----------------------------------------------------------------

lock_object::lock_object(client& c, const std::string& name, lock_kind kind)
    : kind_(kind) {
    switch (kind) {
    case lk::reentrant:
        m_.emplace(c.make_mutex(name));
        break;
    case lk::simple:
        s_.emplace(c.make_simple_mutex(name));
        break;
    case lk::fair:
        f_.emplace(c.make_fair_mutex(name));
        break;
    case lk::read:
    case lk::write:
        rw_.emplace(c.make_rw_mutex(name));
        break;
    default:
        throw std::logic_error("no lock object takes " + name_of(kind));
    }
}

basic_mutex& lock_object::get() {
    switch (kind_) {
    case lk::reentrant:
        return *m_;
    case lk::simple:
        return *s_;
    case lk::fair:
        return *f_;
    case lk::read:
        return rw_->reader();
    default:
        return rw_->writer();
    }
}

} // namespace dlock::conformance
