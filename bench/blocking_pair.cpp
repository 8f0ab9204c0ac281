// blocking_pair: scenario A's floor as the plainest client sees it. Two Redis commands, one
// after the other, on one blocking TCP socket (TCP_NODELAY, one send() and one blocking recv()
// per command, no library, no threads), repeated for S seconds: the pair's p50 and mean.
//
//   blocking_pair PORT SECONDS [--churn] CMD1 ARGS... -- CMD2 ARGS... [-- CMD3 ARGS...]...
//
// `++` in place of `--` sends the next command in the same write as the one before it (one round
// trip for both, each reply read).
//
// `blocking_pair 7395 3 PING -- PING` is two PING round trips as a blocking client sees them;
// with a lock's own acquire and release (same key and token every time) it is that kind's
// floor, on its owner path. With more than two commands, the "pair" is one pass over all of them
// in order (scenario C's floor: a critical section's own requests, bench/run_side_by_side.sh).
// Prints one JSON object.
//
// --churn: before each wait, an epoll_ctl ADD and DEL of a duplicate descriptor (nothing else
// changes). On this project's VM that alone makes a round trip ~15% faster, as the epoll_ctl
// calls redis-benchmark makes around every request do (BENCHMARKS.md, "Scenario A's floor"):
// it shows the difference between redis-benchmark's PING and a blocking client's is the
// kernel's idle path, not client work.
#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string>
#include <string_view>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

std::string encode(const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args)
        out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    return out;
}

/// Where the RESP2/RESP3 value starting at `pos` ends, or npos while it is incomplete.
std::size_t value_end(std::string_view b, std::size_t pos) {
    const auto eol = b.find("\r\n", pos);
    if (pos >= b.size() || eol == std::string_view::npos) return std::string_view::npos;
    const char type = b[pos];
    const long n = std::strtol(std::string(b.substr(pos + 1, eol - pos - 1)).c_str(), nullptr, 10);
    const std::size_t after = eol + 2;
    switch (type) {
    case '$':
    case '=':
    case '!':
        if (n < 0) return after;
        return b.size() >= after + static_cast<std::size_t>(n) + 2
                   ? after + static_cast<std::size_t>(n) + 2
                   : std::string_view::npos;
    case '*':
    case '~':
    case '>':
    case '%': {
        std::size_t p = after;
        const long items = n < 0 ? 0 : (type == '%' ? 2 * n : n);
        for (long i = 0; i < items && p != std::string_view::npos; ++i)
            p = value_end(b, p);
        return p;
    }
    default:
        return after; // + - : , # _ (
    }
}

void die(const char* what) {
    std::perror(what);
    std::exit(1);
}

class plain_client {
public:
    plain_client(int port, bool churn)
        : churn_(churn) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
            die("connect");
        const int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (churn_) {
            ep_ = ::epoll_create1(0);
            dup_ = ::dup(fd_);
            if (ep_ < 0 || dup_ < 0) die("epoll");
        }
    }
    plain_client(const plain_client&) = delete;
    plain_client& operator=(const plain_client&) = delete;
    ~plain_client() {
        for (int fd : {fd_, ep_, dup_})
            if (fd >= 0) ::close(fd);
    }

    /// Sends `replies` encoded commands in one write and waits for all their replies; false on an
    /// error reply.
    bool round_trip(const std::string& cmd, std::size_t replies) {
        if (::send(fd_, cmd.data(), cmd.size(), 0) != static_cast<ssize_t>(cmd.size())) die("send");
        in_.clear();
        bool ok = true;
        std::size_t pos = 0;
        for (;;) {
            if (churn_) {
                epoll_event e{EPOLLIN, {}};
                ::epoll_ctl(ep_, EPOLL_CTL_ADD, dup_, &e);
                ::epoll_ctl(ep_, EPOLL_CTL_DEL, dup_, nullptr);
            }
            char buf[4096];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) die("recv");
            in_.append(buf, static_cast<std::size_t>(n));
            for (auto end = value_end(in_, pos); end != std::string_view::npos;
                 end = value_end(in_, pos)) {
                ok &= in_[pos] != '-';
                pos = end;
                if (--replies == 0) {
                    if (pos != in_.size()) die("more replies than commands");
                    return ok;
                }
            }
        }
    }

private:
    int fd_ = -1;
    int ep_ = -1;
    int dup_ = -1;
    bool churn_;
    std::string in_;
};

int usage() {
    std::fprintf(stderr, "usage: blocking_pair PORT SECONDS [--churn] CMD1... -- CMD2... "
                         "[--|++ CMD3...]... (at least two round trips, no empty command)\n");
    return 64;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 5) return usage();
    const int port = std::atoi(argv[1]);
    const double seconds = std::atof(argv[2]);
    int i = 3;
    const bool churn = std::string_view(argv[i]) == "--churn";
    if (churn) ++i;
    // Each step: its commands' encoding, sent in one write, and how many replies it waits for.
    std::vector<std::pair<std::string, std::size_t>> steps;
    std::vector<std::string> cur;
    bool pipelined = false;
    const auto end_command = [&] {
        if (cur.empty()) return false;
        if (pipelined && !steps.empty()) {
            steps.back().first += encode(cur);
            ++steps.back().second;
        } else {
            steps.emplace_back(encode(cur), 1);
        }
        cur.clear();
        return true;
    };
    for (; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--" || a == "++") {
            if (!end_command()) return usage();
            pipelined = a == "++";
        } else {
            cur.emplace_back(a);
        }
    }
    if (!end_command() || steps.size() < 2) return usage();
    std::size_t commands = 0;
    for (const auto& s : steps)
        commands += s.second;

    plain_client client(port, churn);
    std::vector<double> pairs;
    pairs.reserve(200'000);
    bool errors = false;
    const auto start = clock_type::now();
    const auto stop = start + std::chrono::duration<double>(seconds);
    for (auto t = start; t < stop;) {
        for (const auto& [cmd, replies] : steps)
            errors |= !client.round_trip(cmd, replies);
        const auto done = clock_type::now();
        pairs.push_back(std::chrono::duration<double, std::micro>(done - t).count());
        t = done;
    }
    const double elapsed = std::chrono::duration<double>(clock_type::now() - start).count();
    std::sort(pairs.begin(), pairs.end());
    const auto at = [&](double q) {
        return pairs[std::min(pairs.size() - 1,
                              static_cast<std::size_t>(q * static_cast<double>(pairs.size())))];
    };
    std::printf("{\"pairs\":%zu,\"seconds\":%.2f,\"pairs_per_s\":%.1f,\"pair_mean_us\":%.1f,"
                "\"pair_p50_us\":%.1f,\"pair_p99_us\":%.1f,\"commands_per_pair\":%zu,"
                "\"round_trips_per_pair\":%zu,\"churn\":%s,\"error_replies\":%s}\n",
                pairs.size(), elapsed, static_cast<double>(pairs.size()) / elapsed,
                1e6 * elapsed / static_cast<double>(pairs.size()), at(0.50), at(0.99), commands,
                steps.size(), churn ? "true" : "false", errors ? "true" : "false");
    return errors ? 1 : 0;
}
