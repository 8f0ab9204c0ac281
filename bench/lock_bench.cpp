// lock_bench: scenarios A-D (BENCHMARKS.md), plus `hold`: N locks held by one
// client with the watchdog, counting renewal batches and client memory per held lock.
//
//   lock_bench URL A|B|C|D|hold [--kind lock|simple|fair] [--workers N] [--keys N] [--seconds S]
//              [--ops N] [--client-per-worker] [--async] [--io-thread] [--no-handover]
//              [--locks N] [--watchdog-ms MS]
// --io-thread: blocking calls go through the I/O thread (client_options::sync_io).
// --client-per-worker: C's workers and D's waiter each use their own client (as separate
//   processes would); default: one shared client (releases hand over to local waiters).
// --no-handover: client_options::handover = false.
// Prints one JSON object per run.
#include "redis/client_impl.hpp"
#include "redis/renewal.hpp"
#include "scenarios.hpp"

#include <dlock/dlock.hpp>

#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>

namespace {

long rss_kib() {
    std::ifstream f("/proc/self/status");
    for (std::string line; std::getline(f, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0;
}

int hold_many(const std::string& url, std::size_t n, std::chrono::milliseconds watchdog) {
    auto o = dlock::parse_url(url);
    o.watchdog_lease = watchdog;
    o.command_timeout = std::chrono::seconds(10);
    dlock::client c(o);
    c.command({"PING"});
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
    const auto b0 = renewal.batches_sent();
    const auto t0 = renewal.ticks();
    // Three renewal periods.
    std::this_thread::sleep_for(watchdog);
    const auto periods = renewal.ticks() - t0;
    const auto batches = renewal.batches_sent() - b0;
    std::size_t lost = 0;
    for (auto& l : held)
        lost += l.lost() ? 1u : 0u;
    std::cout << "{\"locks\":" << n << ",\"watchdog_ms\":" << watchdog.count()
              << ",\"renewal_periods\":" << periods << ",\"renewal_batches\":" << batches
              << ",\"batches_per_period\":"
              << (periods ? static_cast<double>(batches) / static_cast<double>(periods) : 0)
              << ",\"lost\":" << lost << ",\"client_rss_bytes_per_lock\":"
              << static_cast<double>(after - before) * 1024.0 / static_cast<double>(n) << "}\n";
    return lost == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::cerr << "usage: lock_bench URL A|B|C|D|hold [options]\n";
        return 64;
    }
    dlock::bench::options o;
    o.url = argv[1];
    const std::string which = argv[2];
    std::size_t locks = 10000;
    std::chrono::milliseconds watchdog{3000};
    for (int i = 3; i < argc; ++i) {
        const std::string a = argv[i];
        const auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--kind") {
            const auto k = next();
            o.kind = k == "simple" ? dlock::lock_kind::simple
                     : k == "fair" ? dlock::lock_kind::fair
                                   : dlock::lock_kind::reentrant;
        } else if (a == "--workers")
            o.workers = static_cast<unsigned>(std::stoul(next()));
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
        else if (a == "--no-handover")
            o.handover = false;
        else if (a == "--async")
            o.async = true;
        else if (a == "--locks")
            locks = std::stoul(next());
        else if (a == "--watchdog-ms")
            watchdog = std::chrono::milliseconds(std::stol(next()));
        else {
            std::cerr << "unknown option " << a << "\n";
            return 64;
        }
    }
    if (which == "hold") return hold_many(o.url, locks, watchdog);
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
    std::cout << dlock::bench::to_json(r) << "\n";
    return 0;
}
