// dlock demo: the stock-deduction scene. K processes x T threads sell items from a stock
// counter in Redis by read-modify-write (GET, then SET stock-1). Without a lock, concurrent
// workers read the same value and sell the same item twice (lost updates); with dlock::mutex
// the stock is exact. With no --url a private redis-server is started on a free loopback port.
#include "commands.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace dlock::cli {
namespace {

using clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

/// A throw-away redis-server: free port, temp dir, no persistence; killed with the process.
class private_server {
public:
    private_server() {
        const char* base = std::getenv("TMPDIR");
        std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dlock-demo-XXXXXX";
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
        dir_ = tmpl;
        port_ = pick_port();
        const std::string port = std::to_string(port_);
        const std::string dir = dir_.string();
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(127);
            const int devnull = ::open("/dev/null", O_RDWR);
            ::dup2(devnull, 0);
            ::dup2(devnull, 1);
            ::dup2(devnull, 2);
            ::execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
                     "--save", "", "--appendonly", "no", "--dir", dir.c_str(),
                     static_cast<char*>(nullptr));
            ::_exit(127);
        }
        if (pid_ < 0) throw std::runtime_error("fork failed");
    }
    ~private_server() {
        if (pid_ > 0) {
            ::kill(pid_, SIGTERM);
            ::waitpid(pid_, nullptr, 0);
        }
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
    /// Waits (bounded) until the server answers PING.
    void wait_ready(client& c) {
        const auto until = clock::now() + std::chrono::seconds(10);
        for (;;) {
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                throw std::runtime_error("redis-server did not start (is it installed?)");
            }
            std::error_code ec;
            const std::string_view ping[] = {"PING"};
            if (auto v = c.command(ping, ec); !ec && v.str == "PONG") return;
            if (clock::now() > until) throw std::runtime_error("redis-server did not answer");
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }

private:
    static std::uint16_t pick_port() {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        ::bind(fd, reinterpret_cast<sockaddr*>(&a), len);
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
        ::close(fd);
        return ntohs(a.sin_port);
    }
    fs::path dir_;
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
};

/// Shared between the demo's processes (MAP_SHARED before fork).
struct shared_state {
    static constexpr std::size_t max_samples = 200000;
    std::atomic<long long> sold{0};
    std::atomic<long long> last_release_ns{0};
    std::atomic<int> last_releaser{-1};
    std::atomic<std::size_t> samples{0};
    std::uint32_t handoff_us[max_samples];
};

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch())
        .count();
}

struct run_result {
    long long sold = 0;
    long long final_stock = 0;
    double seconds = 0;
    double handoff_p50_us = 0, handoff_p99_us = 0;
};

void worker(client& c, bool locked, int id, shared_state& sh) {
    dlock::mutex m = c.make_mutex("demo:stock:lock");
    for (;;) {
        std::unique_lock<dlock::mutex> guard(m, std::defer_lock);
        if (locked) {
            guard.lock();
            const int prev = sh.last_releaser.load();
            if (prev >= 0 && prev != id) {
                const auto us = (now_ns() - sh.last_release_ns.load()) / 1000;
                const auto i = sh.samples.fetch_add(1);
                if (i < shared_state::max_samples)
                    sh.handoff_us[i] = static_cast<std::uint32_t>(std::max(0LL, us));
            }
        }
        const auto stock = std::stoll(c.command({"GET", "demo:stock"}).str);
        if (stock <= 0) {
            if (locked) {
                sh.last_release_ns = now_ns();
                sh.last_releaser = id;
            }
            return;
        }
        // Work between the read and the write widens the race a real service has anyway.
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        c.command({"SET", "demo:stock", std::to_string(stock - 1)});
        sh.sold.fetch_add(1);
        if (locked) {
            sh.last_release_ns = now_ns();
            sh.last_releaser = id;
        }
    }
}

run_result run_once(const client_options& url, const demo_options& o, bool locked) {
    auto* sh = static_cast<shared_state*>(::mmap(
        nullptr, sizeof(shared_state), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (sh == MAP_FAILED) throw std::runtime_error("mmap failed");
    new (sh) shared_state();
    {
        client c(url);
        c.command({"SET", "demo:stock", std::to_string(o.stock)});
    }
    const auto t0 = clock::now();
    std::vector<pid_t> children;
    for (int p = 0; p < o.processes; ++p) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            int rc = 0;
            try {
                client c(url); // each process its own client and connections
                std::vector<std::thread> ts;
                for (int t = 0; t < o.threads; ++t)
                    ts.emplace_back([&, t] { worker(c, locked, p * 1000 + t, *sh); });
                for (auto& th : ts)
                    th.join();
            } catch (const std::exception& e) {
                std::cerr << "dlock demo worker: " << e.what() << "\n";
                rc = 1;
            }
            ::_exit(rc);
        }
        children.push_back(pid);
    }
    bool ok = true;
    for (pid_t pid : children) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    run_result r;
    r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    r.sold = sh->sold.load();
    {
        client c(url);
        r.final_stock = std::stoll(c.command({"GET", "demo:stock"}).str);
    }
    const auto n = std::min(sh->samples.load(), shared_state::max_samples);
    if (n > 0) {
        std::vector<std::uint32_t> v(sh->handoff_us, sh->handoff_us + n);
        std::sort(v.begin(), v.end());
        r.handoff_p50_us = v[n / 2];
        r.handoff_p99_us = v[std::min(n - 1, n * 99 / 100)];
    }
    ::munmap(sh, sizeof(shared_state));
    if (!ok) throw std::runtime_error("a demo worker process failed");
    return r;
}

} // namespace

int run_demo(const global_options& g, const demo_options& o, std::ostream& out, std::ostream&) {
    std::unique_ptr<private_server> server;
    client_options url;
    if (g.urls.empty() && !std::getenv("DLOCK_URL")) {
        server = std::make_unique<private_server>();
        url = parse_url(server->url());
        client probe(url);
        server->wait_ready(probe);
    } else {
        url = connect_options(g);
    }
    out << "dlock demo: " << o.processes << " processes x " << o.threads
        << " threads sell from a stock of " << o.stock << " on " << to_string(url)
        << (server ? " (private redis-server)" : "") << "\n\n";

    const auto unlocked = run_once(url, o, false);
    out << "run 1, no lock:   sold " << unlocked.sold << " items from a stock of " << o.stock
        << " -> " << (unlocked.sold - o.stock) << " sold twice (lost updates), final stock "
        << unlocked.final_stock << ", " << std::fixed << std::setprecision(0)
        << static_cast<double>(unlocked.sold) / unlocked.seconds << " sales/s\n";
    const auto locked = run_once(url, o, true);
    const bool exact = locked.sold == o.stock && locked.final_stock == 0;
    out << "run 2, dlock::mutex: sold " << locked.sold << " items from a stock of " << o.stock
        << " -> " << (exact ? "exact" : "WRONG") << ", final stock " << locked.final_stock << ", "
        << static_cast<double>(locked.sold) / locked.seconds << " sales/s, hand-off p50 "
        << locked.handoff_p50_us << " us, p99 " << locked.handoff_p99_us << " us\n";
    return exact ? 0 : 1;
}

} // namespace dlock::cli
