// lock_bench: scenarios A-D (BENCHMARKS.md), plus `hold`: N locks held by one
// client with the watchdog, counting renewal batches and client memory per held lock.
//
//   lock_bench URL A|B|C|D|K|hold [--kind
//   lock|simple|fair|read|write|lease|shedlock|versioned|semaphore]
//              [--workers N] [--keys N] [--seconds S] [--ops N] [--client-per-worker] [--async]
//              [--io-thread] [--no-handover] [--local-counter] [--locks N] [--watchdog-ms MS]
//              [--samples FILE] [--rounds N]
// URL: any backend dlock::client takes (redis..., zk://, postgresql://); hold, R, redlock and
// failover are Redis's alone. A-D and K add the process's peak RSS (VmHWM) to their JSON, and
// its private memory at the end (RssAnon: heap, stacks; VmHWM also counts the shared
// libraries' pages it touched, the same in every process that maps them).
// K: the keepalive's cost on any backend: --locks N held (default lease: the watchdog, or the
// backend's own keepalive) for --seconds, client CPU per held lock per second.
// W (etcd): the server's floor for A (--workers 1) and B (--workers 50): each worker's
//   sequential put + delete pairs of its own key through dlock's own gRPC stubs, no lock logic
//   (bench/etcd_floor.hpp).
// WD (etcd): the server's floor for D's hand-off: a key deleted by one client, the deletion's
//   watch event at another and its one Range's answer, no lock logic (bench/etcd_floor.hpp).
// W (zk): the server's floor for A (--workers 1) and B (--workers 50): each worker's chain of
//   the three requests of a lock pair on one raw C-client handle, no dlock code
//   (bench/zk_floor.hpp).
// --kind semaphore [--permits N]: each pair takes one permit of a semaphore of N (default 1).
// --redisson-scripts (Redis, --kind semaphore, A and B): each pair runs Redisson's own
//   RPermitExpirableSemaphore scripts instead of dlock's (the server cost of Redisson's layout).
// --local-counter: C's counter is an integer in this process, not a Redis key (always so on
//   the other backends).
// failover (Sentinel or Cluster URL): kills the lock's master with SHUTDOWN NOSAVE and measures
// the time to the first acquisition on its successor, --rounds times (see failover() below).
// --samples FILE: C and D also write every hand-off sample (us, one per line, sorted) to FILE,
// for the latency CDFs of bench/charts.py.
// --io-thread: blocking calls go through the I/O thread (client_options::sync_io).
// --client-per-worker: C's workers and D's waiter each use their own client (as separate
//   processes would); default: one shared client (releases hand over to local waiters).
// --no-handover: client_options::handover = false.
// Prints one JSON object per run.
#include "etcd_floor.hpp"
#include "redis/client.hpp"
#include "redis/renewal.hpp"
#include "scenarios.hpp"
#include "zk_floor.hpp"

#include <dlock/dlock.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sys/resource.h>
#include <thread>
#include <time.h>
#include <utility>

namespace {

/// A field of /proc/self/status in KiB ("VmRSS:", "VmHWM:").
long status_kib(const char* field) {
    std::ifstream f("/proc/self/status");
    for (std::string line; std::getline(f, line);)
        if (line.rfind(field, 0) == 0) return std::stol(line.substr(std::strlen(field)));
    return 0;
}

long rss_kib() {
    return status_kib("VmRSS:");
}

double cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/// The process's voluntary context switches so far: how often its threads went to sleep (and
/// so were woken again).
long wakeups() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return u.ru_nvcsw;
}

/// The floor of any keepalive: the CPU time one wake-up of a thread that does nothing else
/// costs on this machine (8 sleeps of 500 ms, as long as a keepalive sleeps; the thread's own
/// clock). On this VM it is tens to hundreds of microseconds (waking a halted vCPU), so a
/// client that wakes twice a second spends that much whatever its code does.
double idle_wakeup_cpu_us() {
    timespec a{}, b{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (int i = 0; i < 8; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    return (static_cast<double>(b.tv_sec - a.tv_sec) * 1e9 +
            static_cast<double>(b.tv_nsec - a.tv_nsec)) /
           1e3 / 8.0;
}

/// K: `n` locks of `kind` held by one client for `d` with the default lease (kept alive by
/// the watchdog, or by the backend's own keepalive); the client's CPU time per lock per second,
/// and the resident memory the held locks added (after one warm-up acquisition). Also how often
/// the client woke per second, and what a bare wake-up costs (idle_wakeup_cpu_us, measured
/// right before): wakeups x that cost is the keepalive's floor.
int keepalive_cost(const std::string& url, dlock::lock_kind kind, std::size_t n,
                   std::chrono::milliseconds d) {
    dlock::client c(url);
    // One acquisition and release first, so that `before` counts the client's connections
    // (PostgreSQL and ZooKeeper connect at the first request): memory per held lock is what
    // one more held lock costs, not the first connection's buffers and TLS/SCRAM state.
    c.acquire("dlock-bench:keepalive:warm-up", {.wait = std::chrono::seconds(10), .kind = kind})
        .release();
    const long before = rss_kib();
    std::vector<dlock::lease> held;
    held.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        held.push_back(c.acquire("dlock-bench:keepalive:" + std::to_string(i),
                                 {.wait = std::chrono::seconds(10), .kind = kind}));
        if (!held.back()) {
            std::cerr << "lock " << i << " not acquired\n";
            return 1;
        }
    }
    const long after = rss_kib();
    const double idle_wake = idle_wakeup_cpu_us();
    const double cpu0 = cpu_seconds();
    const long woken0 = wakeups();
    std::this_thread::sleep_for(d);
    const double cpu = cpu_seconds() - cpu0;
    const long woken = wakeups() - woken0 - 1; // less this thread's own sleep
    std::size_t lost = 0;
    for (auto& l : held)
        lost += l.lost() ? 1u : 0u;
    const double secs = static_cast<double>(d.count()) / 1000.0;
    std::cout << "{\"scenario\":\"K\",\"backend\":\"" << c.backend_name() << "\",\"locks\":" << n
              << ",\"seconds\":" << secs
              << ",\"client_cpu_us_per_lock_per_s\":" << cpu * 1e6 / static_cast<double>(n) / secs
              << ",\"client_wakeups_per_s\":" << static_cast<double>(woken) / secs
              << ",\"idle_wakeup_cpu_us\":" << idle_wake << ",\"lost\":" << lost
              << ",\"client_rss_bytes_per_lock\":"
              << static_cast<double>(after - before) * 1024.0 / static_cast<double>(n)
              << ",\"vmhwm_kib\":" << status_kib("VmHWM:")
              << ",\"rss_anon_kib\":" << status_kib("RssAnon:") << "}\n";
    held.clear();
    return lost == 0 ? 0 : 1;
}

/// hold: `n` locks held by one client with the watchdog renewing them every `watchdog` / 3 for
/// three periods: renewal scripts per period and the resident memory per held lock (measured
/// after the periods, so that it counts the renewal's buffers; the figure right after the
/// acquisitions is printed too).
int hold_many(const std::string& url, std::size_t n, std::chrono::milliseconds watchdog) {
    auto o = dlock::parse_url(url);
    o.watchdog_lease = watchdog;
    o.command_timeout = std::chrono::seconds(10);
    dlock::client c(o);
    dlock::redis::command(c, {"PING"});
    const long before = rss_kib();
    std::vector<dlock::lease> held;
    held.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        held.push_back(c.acquire("dlock-bench:hold:" + std::to_string(i)));
        if (!held.back()) {
            std::cerr << "lock " << i << " not acquired\n";
            return 1;
        }
    }
    const long after = rss_kib();
    auto& renewal = dlock::detail::access::impl(c)->renewal();
    const auto between_rounds = [&] {
        auto v = renewal.between_rounds(std::chrono::seconds(10));
        if (!v) std::cerr << "no moment between two renewal rounds within 10 s\n";
        return v.value_or(std::pair(renewal.ticks(), renewal.batches_sent()));
    };
    const auto [t0, b0] = between_rounds();
    // Three renewal periods.
    std::this_thread::sleep_for(watchdog);
    const auto [t1, b1] = between_rounds();
    const auto periods = t1 - t0;
    const auto batches = b1 - b0;
    // Judged after the renewal periods: what holding costs includes the renewal's buffers
    // (right after the acquisitions, a tick may or may not have run yet).
    const long renewed = rss_kib();
    std::size_t lost = 0;
    for (auto& l : held)
        lost += l.lost() ? 1u : 0u;
    std::cout << "{\"locks\":" << n << ",\"watchdog_ms\":" << watchdog.count()
              << ",\"renewal_periods\":" << periods << ",\"renewal_batches\":" << batches
              << ",\"batches_per_period\":"
              << (periods ? static_cast<double>(batches) / static_cast<double>(periods) : 0)
              << ",\"lost\":" << lost << ",\"client_rss_bytes_per_lock\":"
              << static_cast<double>(renewed - before) * 1024.0 / static_cast<double>(n)
              << ",\"client_rss_bytes_per_lock_acquired\":"
              << static_cast<double>(after - before) * 1024.0 / static_cast<double>(n) << "}\n";
    return lost == 0 ? 0 : 1;
}

/// R: read-mostly traffic on one lock, 9 reader threads and 1 writer thread on one client for
/// `d`. Every critical section reads a key (the writer also writes it) and works 200 us.
/// `kind` read: readers take the read side, the writer the write side of one read-write lock;
/// any other kind: everyone takes that exclusive lock (the same traffic without sharing).
/// Checks exclusion as it goes (a writer inside with anyone else is a violation).
int read_mostly(const std::string& url, dlock::lock_kind kind, std::chrono::milliseconds d) {
    auto o = dlock::parse_url(url);
    dlock::client c(o);
    dlock::redis::command(c, {"SET", "dlock-bench:rm", "0"});
    const bool shared = kind == dlock::lock_kind::read;
    std::atomic<int> readers_in{0}, writers_in{0}, max_readers{0};
    std::atomic<std::uint64_t> reads{0}, writes{0}, violations{0};
    const auto end = std::chrono::steady_clock::now() + d;
    std::vector<std::thread> ts;
    for (int w = 0; w < 10; ++w)
        ts.emplace_back([&, w] {
            const bool writer = w == 0;
            const auto k = !shared  ? kind
                           : writer ? dlock::lock_kind::write
                                    : dlock::lock_kind::read;
            auto m = dlock::bench::make(c, k, "dlock-bench:rm-lock");
            while (std::chrono::steady_clock::now() < end) {
                m->lock(dlock::fixed_lease{std::chrono::seconds(30)});
                if (writer || !shared) {
                    if (writers_in.fetch_add(1) != 0 || readers_in.load() != 0) ++violations;
                } else {
                    const int n = readers_in.fetch_add(1) + 1;
                    if (writers_in.load() != 0) ++violations;
                    int seen = max_readers.load();
                    while (n > seen && !max_readers.compare_exchange_weak(seen, n)) {
                    }
                }
                const auto v = dlock::redis::command(c, {"GET", "dlock-bench:rm"});
                if (writer)
                    dlock::redis::command(
                        c, {"SET", "dlock-bench:rm", std::to_string(std::stoll(v.str) + 1)});
                std::this_thread::sleep_for(std::chrono::microseconds(200)); // the work
                if (writer || !shared)
                    writers_in.fetch_sub(1);
                else
                    readers_in.fetch_sub(1);
                m->unlock();
                ++(writer ? writes : reads);
            }
        });
    for (auto& t : ts)
        t.join();
    const double secs = static_cast<double>(d.count()) / 1000.0;
    std::cout << "{\"scenario\":\"R\",\"shared\":" << (shared ? "true" : "false")
              << ",\"ops_per_s\":" << static_cast<double>(reads + writes) / secs
              << ",\"reads_per_s\":" << static_cast<double>(reads) / secs
              << ",\"writes_per_s\":" << static_cast<double>(writes) / secs
              << ",\"max_readers_inside\":" << max_readers.load()
              << ",\"violations\":" << violations.load() << "}\n";
    return violations == 0 ? 0 : 1;
}

/// Redlock: sequential acquire+release pairs on one name over the masters in `urls`
/// (comma-separated), fixed 30 s lease, for `d`: the row next to bench/redlock_peer.js.
int redlock_pairs(const std::string& urls, std::chrono::milliseconds d) {
    dlock::redlock_options o;
    for (std::size_t at = 0; at <= urls.size();) {
        const auto comma = std::min(urls.find(',', at), urls.size());
        o.masters.push_back(dlock::parse_url(urls.substr(at, comma - at)));
        at = comma + 1;
    }
    const auto masters = o.masters.size();
    dlock::client r(o);
    std::vector<double> us;
    std::uint64_t failed = 0;
    const auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) {
        const auto a = std::chrono::steady_clock::now();
        auto l = r.acquire("redlock-bench", {.wait = std::chrono::milliseconds(0),
                                             .lease = std::chrono::seconds(30),
                                             .kind = dlock::lock_kind::simple});
        if (!l) {
            ++failed;
            continue;
        }
        l.release();
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a)
                         .count());
    }
    std::sort(us.begin(), us.end());
    const auto q = [&](double f) {
        return us.empty()
                   ? 0.0
                   : us[std::min(us.size() - 1,
                                 static_cast<std::size_t>(f * static_cast<double>(us.size())))];
    };
    const double secs = static_cast<double>(d.count()) / 1000.0;
    std::cout << "{\"scenario\":\"redlock\",\"masters\":" << masters << ",\"pairs\":" << us.size()
              << ",\"failed\":" << failed
              << ",\"pairs_per_s\":" << static_cast<double>(us.size()) / secs
              << ",\"pair_p50_us\":" << q(0.5) << ",\"pair_p99_us\":" << q(0.99) << "}\n";
    return 0;
}

/// Failover: the time from a killed master to the first successful acquisition on its
/// successor. The client (Sentinel or Cluster URL) takes and releases one lock, then sends
/// SHUTDOWN NOSAVE to the master that serves it (the master dies at once, like kill -9 but with
/// the client knowing the instant), then acquires the same lock with a long wait. `rounds`
/// times; the topology must be able to fail over that many times (the old master is gone for
/// good). Measures the deployment's detection (down-after-milliseconds or cluster-node-timeout,
/// election) plus dlock's following and its lock-delay (set it with ?lock_delay=MS in the URL).
/// On a Cluster the master to kill is the one that holds a probe key in the lock's slot (the
/// lock name and the probe share a hash tag): CLUSTER COUNTKEYSINSLOT asked of every master.
int failover(const std::string& url, unsigned rounds) {
    auto o = dlock::parse_url(url);
    o.command_timeout = std::chrono::milliseconds(1000);
    o.connect_timeout = std::chrono::milliseconds(1000);
    const bool cluster = o.kind == dlock::topology::cluster;
    const std::string name = "{dlock-bench-failover}lock";
    const std::string probe = "{dlock-bench-failover}probe";
    std::vector<double> ms;
    for (unsigned r = 0; r < rounds; ++r) {
        dlock::client c(o);
        c.acquire(name).release();
        std::error_code ec;
        std::size_t victim = 0;
        if (cluster) {
            dlock::redis::command(c, {"SET", probe, "1"});
            const auto slot =
                std::to_string(dlock::redis::command(c, {"CLUSTER", "KEYSLOT", probe}).integer);
            const std::string_view count[] = {"CLUSTER", "COUNTKEYSINSLOT", slot};
            victim = dlock::redis::masters(c);
            for (std::size_t i = 0; i < dlock::redis::masters(c); ++i)
                if (auto v = dlock::redis::command_on_master(c, i, count, ec); !ec && v.integer > 0)
                    victim = i;
            if (victim == dlock::redis::masters(c)) {
                std::cerr << "round " << r << ": no master holds the probe's slot\n";
                return 1;
            }
        }
        const std::string_view shutdown[] = {"SHUTDOWN", "NOSAVE"};
        const auto killed = std::chrono::steady_clock::now();
        // No reply: the connection closes.
        if (cluster)
            (void)dlock::redis::command_on_master(c, victim, shutdown, ec);
        else
            (void)dlock::redis::command(c, shutdown, ec);
        auto l = c.acquire(name, {.wait = std::chrono::seconds(60)}, ec);
        const auto took = std::chrono::steady_clock::now() - killed;
        if (!l) {
            std::cerr << "round " << r << ": not acquired (" << ec.message() << ")\n";
            return 1;
        }
        ms.push_back(std::chrono::duration<double, std::milli>(took).count());
    }
    std::sort(ms.begin(), ms.end());
    std::cout << "{\"scenario\":\"failover\",\"rounds\":" << ms.size() << ",\"ms\":[";
    for (std::size_t i = 0; i < ms.size(); ++i)
        std::cout << (i ? "," : "") << static_cast<long>(ms[i]);
    std::cout << "],\"median_ms\":" << static_cast<long>(ms[ms.size() / 2]) << "}\n";
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::cerr << "usage: lock_bench URL A|B|C|D|K|R|W|WD|hold|redlock|failover [options]\n";
        return 64;
    }
    dlock::bench::options o;
    o.url = argv[1];
    const std::string which = argv[2];
    std::size_t locks = 10000;
    std::chrono::milliseconds watchdog{3000};
    std::string samples_file;
    unsigned rounds = 1;
    for (int i = 3; i < argc; ++i) {
        const std::string a = argv[i];
        const auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--kind") {
            const auto k = next();
            o.kind = k == "simple"      ? dlock::lock_kind::simple
                     : k == "fair"      ? dlock::lock_kind::fair
                     : k == "read"      ? dlock::lock_kind::read
                     : k == "write"     ? dlock::lock_kind::write
                     : k == "lease"     ? dlock::lock_kind::lease
                     : k == "shedlock"  ? dlock::lock_kind::shedlock
                     : k == "versioned" ? dlock::lock_kind::versioned
                     : k == "semaphore" ? dlock::lock_kind::semaphore
                                        : dlock::lock_kind::reentrant;
        } else if (a == "--workers")
            o.workers = static_cast<unsigned>(std::stoul(next()));
        else if (a == "--permits")
            o.permits = static_cast<unsigned>(std::stoul(next()));
        else if (a == "--redisson-scripts")
            o.redisson_scripts = true;
        else if (a == "--keys")
            o.keys = static_cast<unsigned>(std::stoul(next()));
        else if (a == "--seconds")
            o.duration = std::chrono::milliseconds(static_cast<long>(std::stod(next()) * 1000));
        else if (a == "--ops")
            o.max_ops = std::stoull(next());
        else if (a == "--client-per-worker")
            o.client_per_worker = true;
        else if (a == "--io-thread")
            o.sync_io = dlock::blocking_io::io_thread;
        else if (a == "--local-counter")
            o.local_counter = true;
        else if (a == "--no-handover")
            o.handover = false;
        else if (a == "--async")
            o.async = true;
        else if (a == "--locks")
            locks = std::stoul(next());
        else if (a == "--watchdog-ms")
            watchdog = std::chrono::milliseconds(std::stol(next()));
        else if (a == "--samples")
            samples_file = next();
        else if (a == "--rounds")
            rounds = static_cast<unsigned>(std::stoul(next()));
        else {
            std::cerr << "unknown option " << a << "\n";
            return 64;
        }
    }
    if (which == "hold") return hold_many(o.url, locks, watchdog);
    if (which == "W" && o.url.rfind("zk://", 0) == 0)
        return dlock::bench::zk_floor(o.url, o.workers, o.duration);
    if (which == "W") return dlock::bench::etcd_floor(o.url, o.workers, o.duration);
    if (which == "WD")
        return dlock::bench::etcd_handoff_floor(o.url, o.max_ops ? o.max_ops : 300, o.duration);
    if (which == "K") return keepalive_cost(o.url, o.kind, locks, o.duration);
    if (which == "R") return read_mostly(o.url, o.kind, o.duration);
    if (which == "redlock") return redlock_pairs(o.url, o.duration);
    if (which == "failover") return failover(o.url, rounds);
    if (which == "A")
        o.which = dlock::bench::scenario::uncontended;
    else if (which == "B")
        o.which = dlock::bench::scenario::many_keys;
    else if (which == "C")
        o.which = dlock::bench::scenario::contended_counter;
    else if (which == "D")
        o.which = dlock::bench::scenario::handoff;
    else {
        std::cerr << "unknown scenario " << which << "\n";
        return 64;
    }
    if (o.which == dlock::bench::scenario::many_keys) {
        if (o.workers == 0) o.workers = 50;
        if (o.keys == 0) o.keys = o.workers;
    }
    if (o.which == dlock::bench::scenario::contended_counter) {
        if (o.workers == 0) o.workers = 8;
        if (o.max_ops == 0) o.max_ops = 2000;
        if (o.duration == std::chrono::milliseconds(3000)) o.duration = std::chrono::seconds(10);
    }
    if (o.which == dlock::bench::scenario::handoff) {
        if (o.max_ops == 0) o.max_ops = 300;
        if (o.duration == std::chrono::milliseconds(3000)) o.duration = std::chrono::seconds(8);
    }
    const auto r = dlock::bench::run(o);
    auto json = dlock::bench::to_json(r);
    json.pop_back(); // the closing brace: the peak RSS of this process joins the object
    std::cout << json << ",\"vmhwm_kib\":" << status_kib("VmHWM:")
              << ",\"rss_anon_kib\":" << status_kib("RssAnon:") << "}\n";
    if (!samples_file.empty()) {
        std::ofstream f(samples_file);
        for (const double us : r.handoff_us)
            f << us << '\n';
        if (!f) {
            std::cerr << "cannot write " << samples_file << "\n";
            return 74;
        }
    }
    return 0;
}
