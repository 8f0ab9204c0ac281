#include "scenarios.hpp"

#include "redisson_scripts.hpp"

#include <dlock/dlock.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <functional>
#include <iomanip>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <sys/resource.h>
#include <thread>

namespace dlock::bench {

namespace {
/// A lock object of any kind (basic_mutex's kind constructor is for derived types).
class kind_mutex : public basic_mutex {
public:
    kind_mutex(client& c, std::string name, lock_kind kind)
        : basic_mutex(c, std::move(name), kind) {}
};
} // namespace

std::unique_ptr<basic_mutex> make(client& c, lock_kind kind, const std::string& name) {
    if (kind == lock_kind::reentrant) return std::make_unique<mutex>(c, name);
    if (kind == lock_kind::simple) return std::make_unique<simple_mutex>(c, name);
    if (kind == lock_kind::fair) return std::make_unique<fair_mutex>(c, name);
    if (kind == lock_kind::read) return std::make_unique<read_mutex>(c, name);
    if (kind == lock_kind::write) return std::make_unique<write_mutex>(c, name);
    return std::make_unique<kind_mutex>(c, name, kind);
}

namespace {

using clock = std::chrono::steady_clock;

bool is_redis(const client& c) {
    return c.backend_name() == "redis";
}

bool fixed_lease_offered(const client& c) {
    // ZooKeeper's sessions and etcd's leases are the client's, not a lock's: no fixed lease.
    return c.backend_name() != "zookeeper" && c.backend_name() != "etcd";
}

double us_between(clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
}

struct server_stats {
    double commands = 0;
    double cpu_s = 0;
};

/// INFO commandstats (every executed command, redis.call inside scripts included) and INFO cpu;
/// zeros on another backend.
server_stats read_server_stats(client& c) {
    server_stats s;
    if (!is_redis(c)) return s;
    const auto info = dlock::redis::command(c, {"INFO", "commandstats"}).str;
    std::istringstream in(info);
    for (std::string line; std::getline(in, line);) {
        const auto at = line.find("calls=");
        if (line.rfind("cmdstat_", 0) == 0 && at != std::string::npos)
            s.commands += std::stod(line.substr(at + 6));
    }
    const auto cpu = dlock::redis::command(c, {"INFO", "cpu"}).str;
    std::istringstream cin(cpu);
    for (std::string line; std::getline(cin, line);) {
        if (line.rfind("used_cpu_sys:", 0) == 0) s.cpu_s += std::stod(line.substr(13));
        if (line.rfind("used_cpu_user:", 0) == 0) s.cpu_s += std::stod(line.substr(14));
    }
    return s;
}

double client_cpu_s() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/// One asynchronous worker of B: acquire, release, repeat until `end`, on the I/O thread.
struct async_worker : std::enable_shared_from_this<async_worker> {
    client* c = nullptr;
    std::string name;
    acquire_options opts;
    clock::time_point end, started, acquired;
    std::uint64_t ops = 0;
    std::vector<double> acq, pairs;
    std::atomic<bool> done{false};
    /// What the chain waits for: 0 nothing, 1 an acquisition, 2 a release (for the report of a
    /// chain whose completion never comes).
    std::atomic<int> stage{0};

    void next() {
        if (clock::now() >= end) {
            done = true;
            return;
        }
        started = clock::now();
        stage = 1;
        c->async_acquire(name, opts, [self = shared_from_this()](std::error_code ec, lease l) {
            self->stage = 0;
            if (ec || !l) {
                // Said once per worker: a run that ends with fewer pairs says why.
                std::fprintf(stderr, "async worker on %s stopped: %s (%s)\n", self->name.c_str(),
                             ec ? ec.message().c_str() : "not acquired",
                             self->c->last_error_detail().c_str());
                self->done = true;
                return;
            }
            self->acquired = clock::now();
            auto held = std::make_shared<lease>(std::move(l));
            self->stage = 2;
            held->async_release([self, held](std::error_code) {
                self->stage = 0;
                const auto now = clock::now();
                self->acq.push_back(us_between(self->started, self->acquired));
                self->pairs.push_back(us_between(self->started, now));
                ++self->ops;
                self->next();
            });
        });
    }
};

result run_async_many_keys(client& c, const options& o, unsigned workers, unsigned keys,
                           clock::time_point end, std::vector<double>& acquire_us,
                           std::vector<double>& pair_us) {
    result r;
    std::vector<std::shared_ptr<async_worker>> ws;
    for (unsigned w = 0; w < workers; ++w) {
        auto a = std::make_shared<async_worker>();
        a->c = &c;
        a->name = o.key_prefix + ":b" + std::to_string(w % keys);
        if (fixed_lease_offered(c)) a->opts.lease = o.lease;
        a->opts.kind = o.kind;
        a->opts.permits = o.permits;
        a->end = end;
        ws.push_back(a);
    }
    for (auto& a : ws)
        a->next();
    // Wait for every chain to notice the end (each finishes its current pair first); a chain
    // still busy 30 s after the end lost a completion: said, and the run fails.
    for (auto& a : ws)
        while (!a->done) {
            if (clock::now() > end + std::chrono::seconds(30))
                throw error(errc::unavailable,
                            "async worker on " + a->name + ": no completion of its " +
                                (a->stage == 1 ? "async_acquire" : "async_release") +
                                " within 30 s after the end of the run (" + std::to_string(a->ops) +
                                " pairs done)");
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    r.per_worker_min = UINT64_MAX;
    for (auto& a : ws) {
        r.ops += a->ops;
        r.per_worker_min = std::min(r.per_worker_min, a->ops);
        r.per_worker_max = std::max(r.per_worker_max, a->ops);
        acquire_us.insert(acquire_us.end(), a->acq.begin(), a->acq.end());
        pair_us.insert(pair_us.end(), a->pairs.begin(), a->pairs.end());
    }
    return r;
}

/// One permit at a time of a Redisson RPermitExpirableSemaphore, by Redisson's own scripts
/// (tests/integration/redisson_scripts.hpp, verbatim): the arguments Redisson 3.x passes,
/// its 16-byte permit id as 32 hex digits, expiry and "now" from this machine's clock as
/// Redisson's are from the Java client's.
class redisson_semaphore {
public:
    redisson_semaphore(client& c, const std::string& name, unsigned permits,
                       std::chrono::milliseconds lease)
        : keys_{name, "{" + name + "}:timeout", "redisson_sc:{" + name + "}"}
        , lease_(lease) {
        acquire_sha_ = load(c, test::redisson_semaphore_acquire);
        release_sha_ = load(c, test::redisson_semaphore_release);
        const std::string n = std::to_string(permits);
        const std::array<std::string_view, 7> set{
            "EVAL",   test::redisson_semaphore_try_set_permits, "2", keys_[0], keys_[2], n,
            "PUBLISH"};
        dlock::redis::command(c, set);
    }
    void acquire(client& c) {
        id_ = random_id();
        const auto now = epoch_ms();
        const std::string expiry = std::to_string(now + lease_.count()), at = std::to_string(now);
        const std::array<std::string_view, 12> cmd{
            "EVALSHA", acquire_sha_, "3", keys_[0],          keys_[1],  keys_[2],
            "1",       expiry,       at,  "922337203685477", "PUBLISH", id_};
        const auto r = dlock::redis::command(c, cmd);
        if (r.str != "OK")
            throw error(errc::unavailable, "Redisson's tryAcquire found " + keys_[0] +
                                               " full: its waiting is Java code, not run here");
    }
    void release(client& c) {
        const std::string at = std::to_string(epoch_ms());
        const std::array<std::string_view, 10> cmd{
            "EVALSHA", release_sha_, "3", keys_[0], keys_[2], keys_[1], id_, "1", at, "PUBLISH"};
        if (dlock::redis::command(c, cmd).integer != 1)
            throw error(errc::not_owner, "Redisson's tryRelease did not find its permit");
    }

private:
    static std::string load(client& c, std::string_view script) {
        const std::array<std::string_view, 3> cmd{"SCRIPT", "LOAD", script};
        return dlock::redis::command(c, cmd).str;
    }
    static long long epoch_ms() {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
    }
    static std::string random_id() {
        thread_local std::mt19937_64 rng{std::random_device{}()};
        char hex[33];
        std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                      static_cast<unsigned long long>(rng()));
        return hex;
    }

    std::array<std::string, 3> keys_; ///< N, {N}:timeout, redisson_sc:{N}
    std::chrono::milliseconds lease_;
    std::string acquire_sha_, release_sha_, id_;
};

/// What every scenario shares: its options, clients and deadline, and the samples it records.
struct context {
    const options& o;
    std::function<std::unique_ptr<client>()> new_client; ///< one more client like the main one
    client& main_client;
    clock::time_point end;
    std::string base; ///< key prefix + ':'
    std::vector<double> acquire_us, pair_us, handoff_us, idle_rtt_us;
    std::mutex samples_mu; ///< guards the sample vectors while worker threads append
};

/// What a scenario takes and releases: a lock object of the options' kind, or, for
/// lock_kind::semaphore, one permit of a semaphore of `permits` (client::acquire, a lease:
/// basic_mutex has no permit count). Taken with the options' fixed lease, or, on ZooKeeper and
/// etcd (a lock lives as long as the client's session or lease, none is offered), without one.
class locker {
public:
    locker(client& c, const context& x, std::string name)
        : c_(c)
        , name_(std::move(name)) {
        if (fixed_lease_offered(x.main_client)) lease_ = x.o.lease;
        if (x.o.redisson_scripts)
            redisson_ = redisson_semaphore(c, name_, x.o.permits, x.o.lease);
        else if (x.o.kind == lock_kind::semaphore)
            opts_ = acquire_options{.lease = lease_, .kind = x.o.kind, .permits = x.o.permits};
        else
            m_ = make(c, x.o.kind, name_);
    }
    void lock() {
        if (redisson_)
            redisson_->acquire(c_);
        else if (!m_)
            held_ = c_.acquire(name_, *opts_);
        else if (lease_)
            m_->lock(fixed_lease{*lease_});
        else
            m_->lock();
    }
    void unlock() {
        if (redisson_)
            redisson_->release(c_);
        else if (m_)
            m_->unlock();
        else
            held_.release();
    }

private:
    client& c_;
    std::string name_;
    std::optional<std::chrono::milliseconds> lease_{};
    std::unique_ptr<basic_mutex> m_{};
    std::optional<acquire_options> opts_{};
    lease held_{};
    std::optional<redisson_semaphore> redisson_{};
};

/// A: one thread, one key, lock then unlock.
result run_uncontended(context& x) {
    result r;
    locker m(x.main_client, x, x.base + "a");
    while (clock::now() < x.end) {
        const auto a = clock::now();
        m.lock();
        const auto b = clock::now();
        m.unlock();
        x.acquire_us.push_back(us_between(a, b));
        x.pair_us.push_back(us_between(a, clock::now()));
        ++r.ops;
    }
    return r;
}

/// B: many workers over many keys (threads, or async chains with --async).
result run_many_keys(context& x) {
    const auto& o = x.o;
    const unsigned workers = std::max(1u, o.workers);
    const unsigned keys = std::max(1u, o.keys);
    if (o.async)
        return run_async_many_keys(x.main_client, o, workers, keys, x.end, x.acquire_us, x.pair_us);
    result r;
    std::atomic<std::uint64_t> ops{0};
    std::vector<std::thread> ts;
    std::vector<std::uint64_t> per(workers);
    for (unsigned w = 0; w < workers; ++w)
        ts.emplace_back([&, w] {
            locker m(x.main_client, x, x.base + "b" + std::to_string(w % keys));
            std::vector<double> acq, pairs;
            while (clock::now() < x.end) {
                const auto a = clock::now();
                m.lock();
                const auto b = clock::now();
                m.unlock();
                acq.push_back(us_between(a, b));
                pairs.push_back(us_between(a, clock::now()));
                ++per[w];
            }
            ops += per[w];
            std::lock_guard lk(x.samples_mu);
            x.acquire_us.insert(x.acquire_us.end(), acq.begin(), acq.end());
            x.pair_us.insert(x.pair_us.end(), pairs.begin(), pairs.end());
        });
    for (auto& t : ts)
        t.join();
    r.ops = ops;
    r.per_worker_min = *std::min_element(per.begin(), per.end());
    r.per_worker_max = *std::max_element(per.begin(), per.end());
    return r;
}

/// C: workers take turns on one lock and increment a counter by GET then SET inside it.
result run_contended_counter(context& x) {
    const auto& o = x.o;
    result r;
    const unsigned workers = std::max(1u, o.workers);
    const std::uint64_t total = o.max_ops ? o.max_ops : UINT64_MAX;
    const bool local = o.local_counter || !is_redis(x.main_client);
    // The local counter: a plain integer, deliberately not atomic; only the lock orders the
    // workers' read, yield, write (a lost increment shows in counter_exact).
    long long local_value = 0;
    if (!local) dlock::redis::command(x.main_client, {"SET", x.base + "counter", "0"});
    std::vector<std::unique_ptr<client>> own;
    if (o.client_per_worker)
        for (unsigned w = 0; w < workers; ++w)
            own.push_back(x.new_client());
    std::atomic<std::uint64_t> tickets{0}, self_reacq{0}, done_ops{0};
    std::atomic<int> last_holder{-1};
    std::atomic<std::int64_t> last_release_ns{0};
    std::vector<std::uint64_t> per(workers);
    std::vector<std::thread> ts;
    for (unsigned w = 0; w < workers; ++w)
        ts.emplace_back([&, w] {
            client& c = o.client_per_worker ? *own[w] : x.main_client;
            locker m(c, x, x.base + "c");
            std::vector<double> waits, handoffs;
            const std::string key = x.base + "counter";
            while (clock::now() < x.end && tickets.fetch_add(1) < total) {
                const auto a = clock::now();
                m.lock();
                const auto got = clock::now();
                waits.push_back(us_between(a, got));
                const int prev = last_holder.load();
                if (prev == static_cast<int>(w))
                    ++self_reacq;
                else if (prev >= 0)
                    handoffs.push_back(static_cast<double>(got.time_since_epoch().count() -
                                                           last_release_ns.load()) /
                                       1000.0);
                if (local) {
                    const long long v = local_value;
                    std::this_thread::yield();
                    local_value = v + 1;
                } else {
                    const auto v = std::stoll(dlock::redis::command(c, {"GET", key}).str);
                    dlock::redis::command(c, {"SET", key, std::to_string(v + 1)});
                }
                ++per[w];
                last_holder = static_cast<int>(w);
                last_release_ns = clock::now().time_since_epoch().count();
                m.unlock();
            }
            done_ops += per[w];
            std::lock_guard lk(x.samples_mu);
            x.acquire_us.insert(x.acquire_us.end(), waits.begin(), waits.end());
            x.handoff_us.insert(x.handoff_us.end(), handoffs.begin(), handoffs.end());
        });
    for (auto& t : ts)
        t.join();
    r.ops = done_ops;
    r.per_worker_min = *std::min_element(per.begin(), per.end());
    r.per_worker_max = *std::max_element(per.begin(), per.end());
    r.self_reacquire_share =
        r.ops > 1 ? static_cast<double>(self_reacq) / static_cast<double>(r.ops - 1) : 0;
    const long long final_value =
        local ? local_value
              : std::stoll(dlock::redis::command(x.main_client, {"GET", x.base + "counter"}).str);
    r.counter_exact = final_value == static_cast<long long>(r.ops);
    return r;
}

/// D: a holder releases while one waiter (same client, or its own) is blocked on the lock.
result run_handoff(context& x) {
    const auto& o = x.o;
    result r;
    std::unique_ptr<client> own_client;
    if (o.client_per_worker) own_client = x.new_client();
    client& waiter_client = own_client ? *own_client : x.main_client;
    locker holder(x.main_client, x, x.base + "d");
    // Another backend's round-trip unit (below): a query of a lock that nobody takes.
    const auto probe = make(x.main_client, lock_kind::reentrant, x.base + "d-probe");
    const std::uint64_t samples = o.max_ops ? o.max_ops : 300;
    std::mt19937 rng{std::random_device{}()};
    std::uniform_int_distribution<int> phase(1000, 5000); // us
    while (r.ops < samples && clock::now() < x.end) {
        holder.lock();
        std::atomic<bool> acquired{false};
        clock::time_point got;
        std::thread waiter([&] {
            locker m(waiter_client, x, x.base + "d");
            m.lock();
            got = clock::now();
            acquired = true;
            m.unlock();
        });
        // Let the waiter block (subscribe, last attempt, sleep), then release at a random
        // phase: pacing of the scenario, not synchronisation of the measurement.
        std::this_thread::sleep_for(std::chrono::microseconds(phase(rng)));
        const auto released = clock::now();
        holder.unlock();
        waiter.join();
        x.handoff_us.push_back(us_between(released, got));
        // The round-trip unit for this scenario: one PING after the same idle pause. On a
        // VM an idle vCPU is descheduled, and the first round trip after a pause costs
        // several times one in a busy loop (redis-benchmark's figure). On the other backends
        // one read of the lock's state (is_locked(): a Range on etcd, getChildren on
        // ZooKeeper, a pg_locks or row query on PostgreSQL), the cheapest request the public
        // API sends.
        std::this_thread::sleep_for(std::chrono::microseconds(phase(rng)));
        const auto p0 = clock::now();
        if (is_redis(x.main_client))
            dlock::redis::command(x.main_client, {"PING"});
        else
            (void)probe->is_locked();
        x.idle_rtt_us.push_back(us_between(p0, clock::now()));
        ++r.ops;
    }
    r.idle_rtt_p50_us = percentile(x.idle_rtt_us, 0.50);
    r.idle_rtt_p99_us = percentile(x.idle_rtt_us, 0.99);
    return r;
}

/// Deletes what a run created (only keys under the scenario's prefix).
void clean_up(client& c, const std::string& prefix) {
    if (!is_redis(c)) return;
    for (std::string cursor = "0";;) {
        auto page = dlock::redis::command(
            c, {"SCAN", cursor, "MATCH", "*" + prefix + "*", "COUNT", "1000"});
        if (page.elements.size() != 2) break;
        for (auto& k : page.elements[1].elements)
            dlock::redis::command(c, {"DEL", k.str});
        cursor = page.elements[0].str;
        if (cursor == "0") break;
    }
}

} // namespace

result run(const options& o) {
    // A Redis URL gets the benchmark's client options; another backend's URL (zk://,
    // postgresql://) goes to dlock::client as it is, with that backend's own settings.
    const bool redis = o.url.rfind("redis", 0) == 0 || o.url.rfind("unix", 0) == 0;
    std::optional<client_options> copts;
    if (redis) {
        copts = parse_url(o.url);
        copts->command_timeout = std::chrono::seconds(10);
        copts->sync_io = o.sync_io;
        copts->handover = o.handover;
    }
    const auto new_client = [&] {
        return copts ? std::make_unique<client>(*copts) : std::make_unique<client>(o.url);
    };
    const auto main_owner = new_client();
    const auto stats_owner = new_client();
    client& main_client = *main_owner;
    client& stats_client = *stats_owner;
    const auto s0 = read_server_stats(stats_client);
    const double c0 = client_cpu_s();
    const auto t0 = clock::now();
    context x{o, new_client, main_client, t0 + o.duration, o.key_prefix + ":", {}, {}, {}, {}, {}};

    if (o.redisson_scripts &&
        (!redis || o.kind != lock_kind::semaphore || o.async ||
         o.which == scenario::contended_counter || o.which == scenario::handoff))
        throw error(errc::invalid_argument,
                    "Redisson's semaphore scripts run in A and B (threads) on Redis, "
                    "with --kind semaphore");
    result r;
    switch (o.which) {
    case scenario::uncontended:
        r = run_uncontended(x);
        break;
    case scenario::many_keys:
        r = run_many_keys(x);
        break;
    case scenario::contended_counter:
        r = run_contended_counter(x);
        break;
    case scenario::handoff:
        r = run_handoff(x);
        break;
    }

    r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    const auto s1 = read_server_stats(stats_client);
    clean_up(stats_client, o.key_prefix);
    const double c1 = client_cpu_s();
    r.ops_per_s = r.seconds > 0 ? static_cast<double>(r.ops) / r.seconds : 0;
    if (r.ops > 0) {
        // Minus the two INFO calls of the second snapshot.
        // D also sends one reference PING per sample (idle_rtt); it is not part of a hand-off.
        const double reference_pings =
            o.which == scenario::handoff && is_redis(main_client) ? static_cast<double>(r.ops) : 0;
        if (is_redis(main_client))
            r.server_cmds_per_op =
                (s1.commands - s0.commands - 2 - reference_pings) / static_cast<double>(r.ops);
        r.server_cpu_us_per_op = (s1.cpu_s - s0.cpu_s) * 1e6 / static_cast<double>(r.ops);
        r.client_cpu_us_per_op = (c1 - c0) * 1e6 / static_cast<double>(r.ops);
    }
    r.pair_p50_us = percentile(x.pair_us, 0.50);
    r.pair_p99_us = percentile(x.pair_us, 0.99);
    r.acquire_p50_us = percentile(x.acquire_us, 0.50);
    r.acquire_p99_us = percentile(x.acquire_us, 0.99);
    r.acquire_max_us = x.acquire_us.empty() ? 0 : x.acquire_us.back();
    r.handoff_samples = x.handoff_us.size();
    r.handoff_p50_us = percentile(x.handoff_us, 0.50);
    r.handoff_p99_us = percentile(x.handoff_us, 0.99);
    r.handoff_us = std::move(x.handoff_us);
    return r;
}

double percentile(std::vector<double>& v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
    return v[i];
}

std::string to_json(const result& r) {
    std::ostringstream o;
    o << std::fixed << std::setprecision(1);
    o << "{\"ops\":" << r.ops << ",\"seconds\":" << r.seconds << ",\"ops_per_s\":" << r.ops_per_s
      << ",\"acquire_p50_us\":" << r.acquire_p50_us << ",\"acquire_p99_us\":" << r.acquire_p99_us
      << ",\"acquire_max_us\":" << r.acquire_max_us << ",\"pair_p50_us\":" << r.pair_p50_us
      << ",\"pair_p99_us\":" << r.pair_p99_us << ",\"handoff_p50_us\":" << r.handoff_p50_us
      << ",\"handoff_p99_us\":" << r.handoff_p99_us << ",\"handoff_samples\":" << r.handoff_samples
      << ",\"idle_rtt_p50_us\":" << r.idle_rtt_p50_us
      << ",\"idle_rtt_p99_us\":" << r.idle_rtt_p99_us << ",\"per_worker_min\":" << r.per_worker_min
      << ",\"per_worker_max\":" << r.per_worker_max << std::setprecision(3)
      << ",\"self_reacquire_share\":" << r.self_reacquire_share
      << ",\"counter_exact\":" << (r.counter_exact ? (*r.counter_exact ? "true" : "false") : "null")
      << std::setprecision(2) << ",\"server_cmds_per_op\":" << r.server_cmds_per_op
      << ",\"server_cpu_us_per_op\":" << r.server_cpu_us_per_op
      << ",\"client_cpu_us_per_op\":" << r.client_cpu_us_per_op << "}";
    return o.str();
}

} // namespace dlock::bench
