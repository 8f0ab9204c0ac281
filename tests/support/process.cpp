#include "process.hpp"

#include <arpa/inet.h>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sstream>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace dlock::test {
namespace {

std::vector<char*> c_args(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    return args;
}

} // namespace

pid_t spawn_child(const std::vector<std::string>& argv, const std::filesystem::path& log,
                  const spawn_options& opts) {
    auto args = c_args(argv);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid != 0) return pid;
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
    }
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    for (int i = 3; i < 1024; ++i)
        ::close(i);
    for (const auto& e : opts.env_extra)
        ::putenv(const_cast<char*>(e.c_str()));
    if (opts.cpu) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(static_cast<std::size_t>(*opts.cpu), &set);
        ::sched_setaffinity(0, sizeof set, &set);
    }
    if (opts.run_as && (::setgid(opts.run_as->second) != 0 || ::setuid(opts.run_as->first) != 0))
        ::_exit(126);
    // After any change of credentials, which clears the parent-death signal.
    if (opts.die_with_parent) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
}

bool reap_child(pid_t pid, std::chrono::milliseconds budget) {
    const auto until = std::chrono::steady_clock::now() + budget;
    for (;;) {
        int status = 0;
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD)) return true;
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2)); // exit poll interval
    }
}

int wait_child(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::pair<std::string, int> run_capture(const std::vector<std::string>& argv,
                                        const std::vector<std::string>& env_extra,
                                        const std::filesystem::path& err) {
    int out[2];
    // Close-on-exec: a process another thread spawns meanwhile must not inherit the write end,
    // or the read below waits for that process to end (a 20 s `dlock exec` holder did).
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    auto args = c_args(argv);
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(out[0]);
        ::close(out[1]);
        throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
        ::dup2(out[1], 1);
        const int devnull = ::open("/dev/null", O_RDWR);
        ::dup2(devnull, 0);
        const int e =
            err.empty() ? devnull : ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(e >= 0 ? e : devnull, 2);
        ::close(out[0]);
        ::close(out[1]);
        for (const auto& v : env_extra)
            ::putenv(const_cast<char*>(v.c_str()));
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    ::close(out[1]);
    std::string result;
    std::array<char, 4096> buf{};
    for (;;) {
        const ssize_t n = ::read(out[0], buf.data(), buf.size());
        if (n > 0)
            result.append(buf.data(), static_cast<std::size_t>(n));
        else if (n == 0 || errno != EINTR)
            break;
    }
    ::close(out[0]);
    const int rc = wait_child(pid);
    while (!result.empty() && (result.back() == '\n' || result.back() == '\r'))
        result.pop_back();
    return {result, rc};
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds budget) {
    const auto until = std::chrono::steady_clock::now() + budget;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

void stop_child(pid_t& pid) {
    if (pid <= 0) return;
    ::kill(pid, SIGCONT);
    ::kill(pid, SIGTERM);
    if (!reap_child(pid, std::chrono::seconds(5))) {
        ::kill(pid, SIGKILL);
        reap_child(pid, std::chrono::seconds(5));
    }
    pid = -1;
}

void kill_child(pid_t& pid) {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    reap_child(pid, std::chrono::seconds(5));
    pid = -1;
}

std::string read_tail(const std::filesystem::path& p, std::size_t max) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    return s.size() > max ? s.substr(s.size() - max) : s;
}

std::string loopback_exchange(std::uint16_t port, const std::string& request) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return {};
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::string out;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size())) {
        std::array<char, 4096> buf{};
        for (;;) {
            const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
            if (n <= 0) break;
            out.append(buf.data(), static_cast<std::size_t>(n));
        }
    }
    ::close(fd);
    return out;
}

} // namespace dlock::test
