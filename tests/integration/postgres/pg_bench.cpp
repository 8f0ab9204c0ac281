// pg_bench: scenarios A, B and D of BENCHMARKS.md on the PostgreSQL backend, on a private
// server (tests/support/pg_fixture), through dlock::client. Not a test (not registered with
// CTest); run by hand: pg_bench [SECONDS]. Prints one line per row.
//   A  one client, sequential acquire+release of one key
//   B  50 threads on 50 keys over ONE client (advisory: one session per hold)
//   D  hand-off: the holder releases while one waiter (another client) is blocked in acquire;
//      release call -> waiter granted
//   K  the keepalive check's cost: 100 locks held for the run, client CPU per lock per second
#include "pg_fixture.hpp"

#include <dlock/client.hpp>
#include <dlock/mutex.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

double pct(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

double cpu_s() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void run_a(const std::string& url, dlock::lock_kind kind, const char* label, double secs) {
    dlock::client c(url);
    std::vector<double> pair_us;
    const auto end = clock_type::now() + std::chrono::duration<double>(secs);
    while (clock_type::now() < end) {
        const auto t0 = clock_type::now();
        auto l = c.acquire("bench:a", {.wait = 5s, .kind = kind});
        l.release();
        pair_us.push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
    }
    std::printf("A %-9s %8.0f pairs/s  pair p50 %7.0f us  p99 %7.0f us\n", label,
                static_cast<double>(pair_us.size()) / secs, pct(pair_us, 0.5), pct(pair_us, 0.99));
}

void run_b(const std::string& url, double secs) {
    dlock::client c(url);
    std::atomic<std::uint64_t> ops{0};
    std::vector<std::thread> ts;
    const auto end = clock_type::now() + std::chrono::duration<double>(secs);
    for (int i = 0; i < 50; ++i)
        ts.emplace_back([&, i] {
            auto m = c.make_mutex("bench:b:" + std::to_string(i));
            while (clock_type::now() < end) {
                m.lock();
                m.unlock();
                ++ops;
            }
        });
    for (auto& t : ts)
        t.join();
    std::printf("B advisory %8.0f pairs/s (50 threads, 50 keys, one client; %s)\n",
                static_cast<double>(ops.load()) / secs,
                url.find("dlock_pool") == std::string::npos ? "pool 8" : "pool 64");
}

void run_d(const std::string& url, dlock::lock_kind kind, const char* label, int samples) {
    dlock::client holder(url), waiter(url);
    std::vector<double> us;
    for (int i = 0; i < samples; ++i) {
        auto l = holder.acquire("bench:d", {.wait = 5s, .kind = kind});
        std::atomic<bool> asked{false};
        auto got = std::async(std::launch::async, [&] {
            asked = true;
            auto w = waiter.acquire("bench:d", {.wait = 10s, .kind = kind});
            const auto t = clock_type::now();
            w.release();
            return t;
        });
        while (!asked)
            std::this_thread::yield();
        std::this_thread::sleep_for(20ms); // the waiter is queued (server queue / LISTEN)
        const auto t0 = clock_type::now();
        l.release();
        us.push_back(std::chrono::duration<double, std::micro>(got.get() - t0).count());
    }
    std::printf("D %-9s hand-off p50 %7.0f us  p99 %7.0f us  (%d samples)\n", label, pct(us, 0.5),
                pct(us, 0.99), samples);
}

void run_k(const std::string& url, double secs) {
    dlock::client c(url);
    std::vector<dlock::lease> held;
    for (int i = 0; i < 100; ++i)
        held.push_back(c.acquire("bench:k:" + std::to_string(i), {.wait = 5s}));
    const double cpu0 = cpu_s();
    std::this_thread::sleep_for(std::chrono::duration<double>(secs));
    const double cpu = cpu_s() - cpu0;
    std::printf("K advisory 100 held locks, check every 1 s: client CPU %.1f us per lock per s\n",
                cpu * 1e6 / 100 / secs);
}

} // namespace

int main(int argc, char** argv) {
    const double secs = argc > 1 ? std::atof(argv[1]) : 3.0;
    if (!dlock::test::postgres_available()) {
        std::puts("pg_bench: PostgreSQL binaries not found");
        return 77;
    }
    dlock::test::pg_server server;
    const auto url = server.url();
    run_a(url, dlock::lock_kind::reentrant, "advisory", secs);
    run_a(url, dlock::lock_kind::lease, "lease", secs);
    run_a(url, dlock::lock_kind::shedlock, "shedlock", secs);
    run_b(url, secs);
    run_b(server.url("dlock_pool=64"), secs);
    run_d(url, dlock::lock_kind::reentrant, "advisory", 100);
    run_d(url, dlock::lock_kind::lease, "lease", 100);
    run_k(url, secs);
    return 0;
}
