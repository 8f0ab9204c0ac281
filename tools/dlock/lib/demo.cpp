// demo.cpp: `dlock demo`, the classic stock-deduction race. K processes x T threads sell
// items from a stock counter in Redis by read-modify-write (GET stock, then SET stock-1).
// Run 1 has no lock: workers read the same value and sell the same item twice (lost updates).
// Run 2 wraps the read-modify-write in dlock::mutex: the stock is exact. Each worker process
// has its own dlock::client (own connections), as separate service instances would. With
// --backend zookeeper the lock is on a private ZooKeeper (Curator's layout), with --backend
// postgresql on a private PostgreSQL (an advisory lock); the stock stays in Redis: a lock of
// one service guarding another service's data.
//
// Hand-off latency is the time from one worker starting its release to the next acquisition by
// another worker, measured with steady_clock (CLOCK_MONOTONIC, one clock for all processes)
// in memory shared by the processes (MAP_SHARED, written only while the lock is held).
#include "commands.hpp"
#include "private_server.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace dlock::cli {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::string_view stock_key = "dlock-demo:stock";
constexpr std::string_view lock_name = "dlock-demo:lock";

/// Set by the signal handler of the demo's parent process.
volatile std::sig_atomic_t interrupted = 0;

extern "C" void on_interrupt(int sig) {
    interrupted = sig;
}

/// Catches SIGINT/SIGTERM/SIGHUP in the parent (no SA_RESTART, so waitpid returns EINTR) so
/// that the workers and the private server are stopped and the temp dir removed. Restores the
/// previous handlers on destruction. Worker processes go back to the default actions.
class interrupt_guard {
public:
    interrupt_guard() {
        interrupted = 0;
        struct sigaction sa {};
        sa.sa_handler = on_interrupt;
        sigemptyset(&sa.sa_mask);
        for (std::size_t i = 0; i < signals.size(); ++i)
            ::sigaction(signals[i], &sa, &old_[i]);
    }
    ~interrupt_guard() {
        for (std::size_t i = 0; i < signals.size(); ++i)
            ::sigaction(signals[i], &old_[i], nullptr);
    }
    interrupt_guard(const interrupt_guard&) = delete;
    interrupt_guard& operator=(const interrupt_guard&) = delete;
    /// In a forked worker: default actions, so ^C ends it.
    static void reset_in_child() {
        for (int s : signals)
            ::signal(s, SIG_DFL);
    }

private:
    static constexpr std::array<int, 3> signals = {SIGINT, SIGTERM, SIGHUP};
    std::array<struct sigaction, 3> old_{};
};

/// Thrown when a signal interrupted the demo; exit 128 + sig.
struct interrupted_error {
    int sig;
};

void check_interrupted() {
    if (interrupted != 0) throw interrupted_error{static_cast<int>(interrupted)};
}

/// Shared by the demo's processes (MAP_SHARED, created before fork).
struct shared_state {
    static constexpr std::size_t max_samples = 100000;
    std::atomic<long long> sold{0};
    std::atomic<long long> last_release_ns{0}; ///< written only while holding the lock
    std::atomic<int> last_releaser{-1};        ///< worker id; written only while holding it
    std::atomic<std::size_t> samples{0};
    std::uint32_t handoff_us[max_samples];
};
static_assert(std::atomic<long long>::is_always_lock_free, "shared across processes");

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch())
        .count();
}

long long get_stock(client& c) {
    const auto v = dlock::redis::command(c, {"GET", stock_key});
    if (!v.is_string()) throw std::runtime_error("demo stock key missing or of the wrong type");
    return std::stoll(v.str);
}

/// One worker thread: sell until the stock is gone (the lock through `lc`, the stock through `c`).
void worker(client& c, client& lc, bool locked, int id, shared_state& sh) {
    dlock::mutex m = lc.make_mutex(std::string(lock_name));
    for (;;) {
        if (locked) {
            m.lock();
            const int prev = sh.last_releaser.load();
            if (prev >= 0 && prev != id) {
                const auto us = (now_ns() - sh.last_release_ns.load()) / 1000;
                const auto i = sh.samples.fetch_add(1);
                if (i < shared_state::max_samples)
                    sh.handoff_us[i] = static_cast<std::uint32_t>(std::clamp(us, 0LL, 4'000'000LL));
            }
        }
        const auto stock = get_stock(c);
        const bool sell = stock > 0;
        if (sell) {
            // A little work between the read and the write, as a real service has (pricing,
            // payment); it widens the race window the unlocked run falls into.
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            dlock::redis::command(c, {"SET", stock_key, std::to_string(stock - 1)});
            sh.sold.fetch_add(1);
        }
        if (locked) {
            sh.last_release_ns = now_ns();
            sh.last_releaser = id;
            m.unlock();
        }
        if (!sell) return;
    }
}

/// The body of one worker process: its own client, `threads` workers. Returns the exit code.
int worker_process(const client_options& copts, const std::string& lock_url, const demo_options& o,
                   bool locked, int p, shared_state& sh) {
    try {
        client c(copts);
        std::optional<client> other;
        if (!lock_url.empty()) other.emplace(lock_url);
        client& lc = other ? *other : c;
        std::atomic<bool> failed{false};
        std::vector<std::thread> ts;
        for (int t = 0; t < o.threads; ++t)
            ts.emplace_back([&, t] {
                try {
                    worker(c, lc, locked, p * 1000 + t, sh);
                } catch (const std::exception& e) {
                    if (!failed.exchange(true))
                        std::cerr << "dlock demo: worker: " << e.what() << "\n";
                }
            });
        for (auto& th : ts)
            th.join();
        return failed ? 1 : 0;
    } catch (const std::exception& e) {
        std::cerr << "dlock demo: worker: " << e.what() << "\n";
        return 1;
    }
}

struct run_result {
    long long sold = 0;
    long long final_stock = 0;
    double seconds = 0;
    std::size_t handoffs = 0;
    double handoff_p50_us = 0, handoff_p99_us = 0;
};

/// A MAP_SHARED shared_state, unmapped on scope exit.
class shared_mapping {
public:
    shared_mapping() {
        void* p = ::mmap(nullptr, sizeof(shared_state), PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
        state_ = new (p) shared_state();
    }
    ~shared_mapping() {
        state_->~shared_state();
        ::munmap(state_, sizeof(shared_state));
    }
    shared_mapping(const shared_mapping&) = delete;
    shared_mapping& operator=(const shared_mapping&) = delete;
    shared_state& operator*() const { return *state_; }

private:
    shared_state* state_;
};

/// Kills and reaps the workers still running when an error or a signal ends the run early.
struct worker_reaper {
    std::vector<pid_t> pids;
    ~worker_reaper() {
        for (pid_t pid : pids) {
            ::kill(pid, SIGKILL);
            while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
            }
        }
    }
};

run_result run_once(const client_options& copts, const std::string& lock_url, const demo_options& o,
                    bool locked) {
    shared_mapping mapping;
    shared_state& sh = *mapping;
    {
        // No client may be alive at fork(): its I/O thread would not exist in the child.
        client c(copts);
        dlock::redis::command(c, {"SET", stock_key, std::to_string(o.stock)});
        if (locked && lock_url.empty()) c.make_mutex(std::string(lock_name)).force_unlock();
    }
    check_interrupted();
    const auto t0 = clock::now();
    worker_reaper workers;
    const pid_t parent = ::getpid();
    for (int p = 0; p < o.processes; ++p) {
        const pid_t pid = ::fork();
        if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
        if (pid == 0) {
            interrupt_guard::reset_in_child();
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(1);
            const int rc = worker_process(copts, lock_url, o, locked, p, sh);
            std::cerr.flush();
            ::_exit(rc);
        }
        workers.pids.push_back(pid);
    }
    bool ok = true;
    while (!workers.pids.empty()) {
        int status = 0;
        const pid_t pid = ::waitpid(workers.pids.back(), &status, 0);
        if (pid < 0) {
            if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid");
            check_interrupted(); // the reaper kills the rest
            continue;
        }
        workers.pids.pop_back();
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    check_interrupted();
    if (!ok) throw std::runtime_error("a demo worker process failed (see its message above)");

    run_result r;
    r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    r.sold = sh.sold.load();
    {
        client c(copts);
        r.final_stock = get_stock(c);
    }
    const auto n = std::min(sh.samples.load(), shared_state::max_samples);
    r.handoffs = n;
    if (n > 0) {
        std::vector<std::uint32_t> v(sh.handoff_us, sh.handoff_us + n);
        std::sort(v.begin(), v.end());
        r.handoff_p50_us = v[n / 2];
        r.handoff_p99_us = v[std::min(n - 1, n * 99 / 100)];
    }
    return r;
}

std::string fixed(double v, int digits) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(digits) << v;
    return s.str();
}

void print_results(std::ostream& out, const demo_options& o, const run_result& unlocked,
                   const run_result& locked) {
    auto row = [&](const char* label, const run_result& r, bool with_handoff) {
        return std::vector<std::string>{
            label,
            std::to_string(r.sold),
            std::to_string(r.final_stock),
            std::to_string(std::max(0LL, r.sold - o.stock)),
            fixed(r.seconds, 2) + " s",
            fixed(r.seconds > 0 ? static_cast<double>(r.sold) / r.seconds : 0, 0),
            with_handoff && r.handoffs > 0 ? fixed(r.handoff_p50_us / 1000, 2) + " / " +
                                                 fixed(r.handoff_p99_us / 1000, 2) + " ms"
                                           : "-"};
    };
    // Text columns left-aligned, numbers right-aligned.
    print_table(out,
                {{"", "sold", "final stock", "oversold", "time", "sales/s", "hand-off p50 / p99"},
                 row("run 1, no lock", unlocked, false),
                 row("run 2, dlock::mutex", locked, true)},
                {false, true, true, true, true, true, false});
}

} // namespace

int run_demo(const global_options& g, const demo_options& o, std::ostream& out, std::ostream& err) {
    interrupt_guard guard;
    std::unique_ptr<private_server> server;
    std::unique_ptr<private_server> lock_server; // --backend zookeeper | postgresql | etcd
    client_options copts;
    std::string where;
    try {
        if (o.backend == "zookeeper")
            lock_server = std::make_unique<private_server>(std::chrono::seconds(30),
                                                           private_server::kind::zookeeper);
        else if (o.backend == "postgresql")
            lock_server = std::make_unique<private_server>(std::chrono::seconds(30),
                                                           private_server::kind::postgresql);
        else if (o.backend == "etcd")
            lock_server = std::make_unique<private_server>(std::chrono::seconds(30),
                                                           private_server::kind::etcd);
        if (g.urls.empty()) { // never $DLOCK_URL: the demo must not write to a shared server
            server = std::make_unique<private_server>();
            copts = parse_url(server->url());
            where = "private redis-server on " + server->url() + " (stopped at the end)";
        } else {
            copts = connect_options(g);
            where = to_string(copts);
        }
        copts.client_name = "dlock-demo";
        check_interrupted();
        out << "dlock demo: " << o.processes << " processes x " << o.threads
            << " threads sell a stock of " << o.stock
            << " items, each sale a GET then a SET of stock-1 (read-modify-write)\n"
            << "server: " << where << "\n";
        if (lock_server)
            out << "lock: private "
                << (o.backend == "zookeeper"    ? "ZooKeeper"
                    : o.backend == "postgresql" ? "PostgreSQL"
                                                : "etcd")
                << " on " << lock_server->url() << " (stopped at the end)\n";
        out << '\n' << std::flush;

        const auto lock_url = lock_server ? lock_server->url() : std::string{};
        const auto unlocked = run_once(copts, lock_url, o, false);
        const auto locked = run_once(copts, lock_url, o, true);
        if (!server) { // leave a shared server as we found it
            client c(copts);
            const auto fence = dlock::redis::layout_of(lock_name, lock_kind::reentrant).fencing_key;
            dlock::redis::command(c, {"DEL", stock_key, lock_name, fence});
        }
        print_results(out, o, unlocked, locked);
        const bool exact = locked.sold == o.stock && locked.final_stock == 0;
        out << '\n';
        if (unlocked.sold > o.stock)
            out << "Without a lock " << unlocked.sold - o.stock << " of " << unlocked.sold
                << " sales were lost updates: workers read the same stock and overwrote each "
                   "other's decrement.\n";
        else
            out << "Without a lock no update was lost this time (the race is timing-dependent; "
                   "try more --processes or --threads).\n";
        if (exact)
            out << "With dlock::mutex the stock is exact: " << locked.sold << " sold, final stock "
                << locked.final_stock << ".\n";
        else
            out << "With dlock::mutex the stock is WRONG: " << locked.sold << " sold, final stock "
                << locked.final_stock << ".\n";
        return exact ? exit_code::ok : exit_code::software;
    } catch (const interrupted_error& e) {
        out << std::flush;
        err << "dlock: demo interrupted by " << signal_name(e.sig) << "\n";
        return exit_code::signalled + e.sig;
    }
}

} // namespace dlock::cli
