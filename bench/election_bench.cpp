// election_bench: leader election's two timings (issue 23's benchmark rows), on any backend that
// elects (ZooKeeper, etcd, PostgreSQL); bench/election_bench.sh runs it next to Curator's
// LeaderLatch (bench/curator_bench.java, scenario E).
//
//   election_bench URL E [--samples N]
//   election_bench URL F --cli PATH [--samples N]
//
// E (hand-off): the leader (its own client) resigns at a random 1-5 ms phase while one other
//   participant (its own client, another thread) waits in campaign(); a sample is the time from
//   the resign() call to the waiter's campaign() returning (the new leader acting). The roles
//   then swap (the new leader resigns in the next sample). N samples (default 200).
// F (failover): the leader is another process (`dlock --url URL elect --value victim NAME --
//   sleep 600`, its own process group), killed with SIGKILL once it leads, while this process
//   waits in campaign(); a sample is kill -> campaign() returned. Bounded below by the server's
//   detection of the dead session (ZooKeeper: the session timeout; etcd: the lease TTL;
//   PostgreSQL: the killed client's socket closing, at once), so it
//   measures the URL's settings as much as the client. N samples (default 5).
// Prints one JSON object: samples, p50 and p99 (E in microseconds, F in milliseconds) and, for
// E, the client CPU time per hand-off (getrusage of this process: both participants).
#include <dlock/dlock.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <iomanip>
#include <iostream>
#include <random>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

double percentile(std::vector<double> v, double p) {
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

int handoff(const std::string& url, unsigned samples) {
    dlock::client a(url), b(url);
    const std::string name = "dlock-bench-election-e";
    std::mt19937 rng{std::random_device{}()};
    std::uniform_int_distribution<int> phase(1000, 5000); // us
    dlock::client* lead_client = &a;
    dlock::client* wait_client = &b;
    auto leader = lead_client->campaign(name, "a", {.wait = 30s});
    if (!leader) {
        std::cerr << "election_bench: the first campaign did not lead\n";
        return 1;
    }
    std::vector<double> us;
    const double c0 = cpu_s();
    for (unsigned i = 0; i < samples; ++i) {
        dlock::leadership next;
        clock_type::time_point acting;
        std::thread waiter([&] {
            next = wait_client->campaign(name, "w", {.wait = 30s});
            acting = clock_type::now();
        });
        // Let the waiter queue, then resign at a random phase: pacing, not synchronisation.
        std::this_thread::sleep_for(std::chrono::microseconds(phase(rng)));
        const auto resigned = clock_type::now();
        leader.resign();
        waiter.join();
        if (!next) {
            std::cerr << "election_bench: sample " << i << ": the waiter did not lead\n";
            return 1;
        }
        us.push_back(std::chrono::duration<double, std::micro>(acting - resigned).count());
        leader = std::move(next);
        std::swap(lead_client, wait_client);
    }
    const double c1 = cpu_s();
    leader.resign();
    std::cout << std::fixed << std::setprecision(1) << "{\"scenario\":\"E\",\"backend\":\""
              << a.backend_name() << "\",\"samples\":" << us.size()
              << ",\"handoff_p50_us\":" << percentile(us, 0.5)
              << ",\"handoff_p99_us\":" << percentile(us, 0.99)
              << ",\"client_cpu_us_per_op\":" << (c1 - c0) * 1e6 / static_cast<double>(us.size())
              << "}\n";
    return 0;
}

/// `cli --url URL elect [--watchdog D] --value victim NAME -- sleep 600` in a process group of
/// its own (`watchdog`: the leader's lease on Redis; empty: the default).
pid_t start_victim(const std::string& cli, const std::string& url, const std::string& name,
                   const std::string& watchdog) {
    std::vector<std::string> args{cli, "--url", url, "elect"};
    if (!watchdog.empty()) args.insert(args.end(), {"--watchdog", watchdog});
    args.insert(args.end(), {"--value", "victim", name, "--", "sleep", "600"});
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    ::setpgid(0, 0);
    ::execv(cli.c_str(), argv.data());
    ::_exit(127);
}

int failover(const std::string& url, const std::string& cli, unsigned samples,
             const std::string& watchdog) {
    const std::string name = "dlock-bench-election-f";
    std::vector<double> ms;
    for (unsigned i = 0; i < samples; ++i) {
        const pid_t victim = start_victim(cli, url, name, watchdog);
        dlock::client c(url);
        const auto until = clock_type::now() + 30s;
        for (;;) { // the victim leads: read by the server, not a sleep standing in for it
            std::error_code ec;
            const auto li = c.leader(name, ec);
            if (li && li->value == "victim") break;
            if (clock_type::now() > until) {
                std::cerr << "election_bench: the victim did not lead\n";
                ::kill(-victim, SIGKILL);
                return 1;
            }
            std::this_thread::sleep_for(10ms);
        }
        dlock::leadership next;
        clock_type::time_point acting;
        std::atomic<bool> queued{false};
        std::thread waiter([&] {
            queued = true;
            next = c.campaign(name, "survivor", {.wait = 120s});
            acting = clock_type::now();
        });
        while (!queued)
            std::this_thread::yield();
        std::this_thread::sleep_for(50ms); // the waiter's campaign reaches the server: pacing
        const auto killed = clock_type::now();
        ::kill(-victim, SIGKILL);
        waiter.join();
        ::waitpid(victim, nullptr, 0);
        if (!next) {
            std::cerr << "election_bench: sample " << i << ": the survivor did not lead\n";
            return 1;
        }
        ms.push_back(std::chrono::duration<double, std::milli>(acting - killed).count());
        next.resign();
    }
    std::cout << std::fixed << std::setprecision(1)
              << "{\"scenario\":\"F\",\"samples\":" << ms.size()
              << ",\"failover_p50_ms\":" << percentile(ms, 0.5)
              << ",\"failover_max_ms\":" << percentile(ms, 1.0) << "}\n";
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::cerr << "usage: election_bench URL E|F [--samples N] [--cli PATH] [--watchdog D]\n";
        return 64;
    }
    const std::string url = argv[1], which = argv[2];
    unsigned samples = which == "F" ? 5 : 200;
    std::string cli, watchdog;
    for (int i = 3; i + 1 < argc; i += 2) {
        const std::string opt = argv[i], val = argv[i + 1];
        if (opt == "--samples")
            samples = static_cast<unsigned>(std::stoul(val));
        else if (opt == "--cli")
            cli = val;
        else if (opt == "--watchdog")
            watchdog = val;
        else {
            std::cerr << "unknown option " << opt << "\n";
            return 64;
        }
    }
    try {
        if (which == "E") return handoff(url, samples);
        if (which == "F" && !cli.empty()) return failover(url, cli, samples, watchdog);
    } catch (const std::exception& e) {
        std::cerr << "election_bench: " << e.what() << "\n";
        return 1;
    }
    std::cerr << "usage: election_bench URL E|F [--samples N] [--cli PATH] [--watchdog D]\n";
    return 64;
}
