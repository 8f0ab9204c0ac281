#include "scenarios.hpp"

#include <dlock/dlock.hpp>

#include <algorithm>
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

double percentile(std::vector<double>& v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
    return v[i];
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

/// Takes `m` with the fixed lease of the options, or, on ZooKeeper (a lock lives as long as
/// its session, no lease is offered), without one.
void take(basic_mutex& m, const context& x) {
    if (fixed_lease_offered(x.main_client))
        m.lock(dlock::fixed_lease{x.o.lease});
    else
        m.lock();
}

/// A: one thread, one key, lock then unlock.
result run_uncontended(context& x) {
    result r;
    auto m = make(x.main_client, x.o.kind, x.base + "a");
    while (clock::now() < x.end) {
        const auto a = clock::now();
        take(*m, x);
        const auto b = clock::now();
        m->unlock();
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
            auto m = make(x.main_client, o.kind, x.base + "b" + std::to_string(w % keys));
            std::vector<double> acq, pairs;
            while (clock::now() < x.end) {
                const auto a = clock::now();
                take(*m, x);
                const auto b = clock::now();
                m->unlock();
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
            auto m = make(c, o.kind, x.base + "c");
            std::vector<double> waits, handoffs;
            const std::string key = x.base + "counter";
            while (clock::now() < x.end && tickets.fetch_add(1) < total) {
                const auto a = clock::now();
                take(*m, x);
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
                m->unlock();
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
    auto holder = make(x.main_client, o.kind, x.base + "d");
    const std::uint64_t samples = o.max_ops ? o.max_ops : 300;
    std::mt19937 rng{std::random_device{}()};
    std::uniform_int_distribution<int> phase(1000, 5000); // us
    while (r.ops < samples && clock::now() < x.end) {
        take(*holder, x);
        std::atomic<bool> acquired{false};
        clock::time_point got;
        std::thread waiter([&] {
            auto m = make(waiter_client, o.kind, x.base + "d");
            take(*m, x);
            got = clock::now();
            acquired = true;
            m->unlock();
        });
        // Let the waiter block (subscribe, last attempt, sleep), then release at a random
        // phase: pacing of the scenario, not synchronisation of the measurement.
        std::this_thread::sleep_for(std::chrono::microseconds(phase(rng)));
        const auto released = clock::now();
        holder->unlock();
        waiter.join();
        x.handoff_us.push_back(us_between(released, got));
        // The round-trip unit for this scenario: one PING after the same idle pause. On a
        // VM an idle vCPU is descheduled, and the first round trip after a pause costs
        // several times one in a busy loop (redis-benchmark's figure). Redis only.
        std::this_thread::sleep_for(std::chrono::microseconds(phase(rng)));
        if (is_redis(x.main_client)) {
            const auto p0 = clock::now();
            dlock::redis::command(x.main_client, {"PING"});
            x.idle_rtt_us.push_back(us_between(p0, clock::now()));
        }
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
