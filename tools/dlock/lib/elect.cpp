// elect.cpp: `dlock elect` (run a command while this process leads an election) and `dlock
// leader` (who leads), over client::campaign and client::leader (dlock/election.hpp).
#include "commands.hpp"
#include "inspect.hpp" // open_client

#include <dlock/client.hpp>
#include <dlock/election.hpp>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ; // NOLINT(readability-redundant-declaration): POSIX: the program declares it

namespace dlock::cli {
namespace {

/// The signals elect handles: blocked (inherited by the client's threads) and read from a
/// signalfd; the child gets the old mask back before exec.
class blocked_signals {
public:
    blocked_signals() {
        sigemptyset(&mask_);
        for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD})
            sigaddset(&mask_, s);
        if (::pthread_sigmask(SIG_BLOCK, &mask_, &old_) != 0 ||
            (fd_ = ::signalfd(-1, &mask_, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
            throw std::system_error(errno, std::generic_category(), "signalfd");
    }
    ~blocked_signals() {
        ::close(fd_);
        ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    blocked_signals(const blocked_signals&) = delete;
    blocked_signals& operator=(const blocked_signals&) = delete;
    int fd() const { return fd_; }
    const sigset_t& old() const { return old_; }
    /// The next pending signal, or 0.
    int next() {
        signalfd_siginfo si{};
        return ::read(fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)
                   ? static_cast<int>(si.ssi_signo)
                   : 0;
    }

private:
    sigset_t mask_{};
    sigset_t old_{};
    int fd_ = -1;
};

/// An eventfd another thread pokes.
class event {
public:
    event()
        : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
        if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
    }
    ~event() { ::close(fd_); }
    event(const event&) = delete;
    event& operator=(const event&) = delete;
    int fd() const { return fd_; }
    static void notify(int fd) {
        const std::uint64_t one = 1;
        (void)!::write(fd, &one, sizeof one);
    }

private:
    int fd_;
};

/// Polls `fds` until one is readable (EINTR retried).
void wait_any(pollfd* fds, nfds_t n, int timeout_ms) {
    while (::poll(fds, n, timeout_ms) < 0)
        if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "poll");
}

/// Forks and execs `argv` with `envp` and the signal mask `mask`; 127 / 126 from the child when
/// the command is missing / not executable.
pid_t spawn(const std::vector<std::string>& argv, std::vector<std::string>& env,
            const sigset_t& mask) {
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : env)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
    if (pid == 0) {
        ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
        ::execvpe(args[0], args.data(), envp.data());
        ::_exit(errno == ENOENT ? 127 : 126);
    }
    return pid;
}

/// A library error of `doing` as a failure; elections not offered are named as such.
failure election_failure(client& c, const std::error_code& ec, const std::string& doing,
                         const std::string& name) {
    if (ec == errc::unsupported)
        return failure(exit_code::config, doing + ": leader election is not offered on " +
                                              std::string(c.backend_name()) +
                                              " yet (ZooKeeper and etcd have it)");
    return diagnose(c, ec, doing, name);
}

int exit_status(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return exit_code::signalled + WTERMSIG(status);
    return exit_code::software;
}

} // namespace

int run_elect(const global_options& g, const elect_options& o, std::ostream& err) {
    if (o.command.empty()) throw usage_error("elect needs a command after --");
    blocked_signals signals; // before the client: its threads inherit the blocked mask
    event elected_ev, lost_ev;
    std::optional<client> c;
    c.emplace(open_client(g, o.watchdog));

    // 1. Campaign on a thread, so that a signal ends the wait (the client's shutdown cancels it).
    leadership l;
    std::error_code ec;
    std::thread campaigner([&, fd = elected_ev.fd()] {
        l = c->campaign(o.name, o.value, {.wait = o.wait}, ec);
        event::notify(fd);
    });
    int interrupted_by = 0;
    for (;;) {
        pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {elected_ev.fd(), POLLIN, 0}};
        wait_any(fds, 2, -1);
        if (fds[1].revents & POLLIN) break;
        for (int s; (s = signals.next()) != 0;)
            if (s != SIGCHLD) interrupted_by = s;
        if (interrupted_by != 0) break;
    }
    if (interrupted_by != 0) {
        c.reset(); // cancels the campaign; a leadership won meanwhile goes with the session
        campaigner.join();
        return exit_code::signalled + interrupted_by;
    }
    campaigner.join();
    if (ec) throw election_failure(*c, ec, "cannot campaign in '" + o.name + "'", o.name);
    if (!l) {
        err << "dlock: not elected in '" << one_line(o.name) << "' within --wait\n";
        return exit_code::not_acquired;
    }
    l.lease().on_lost([fd = lost_ev.fd()] { event::notify(fd); });

    // 2. Run the command while leading; DLOCK_EPOCH carries the epoch (a fencing token).
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e)
        if (const std::string_view v = *e;
            !v.starts_with("DLOCK_EPOCH=") && !v.starts_with("DLOCK_NAME="))
            env.emplace_back(v);
    env.push_back("DLOCK_EPOCH=" + std::to_string(l.epoch()));
    env.push_back("DLOCK_NAME=" + o.name);
    const pid_t child = spawn(o.command, env, signals.old());
    int status = 0;
    bool lost = false;
    std::optional<std::chrono::steady_clock::time_point> kill_at;
    for (;;) {
        pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {lost_ev.fd(), POLLIN, 0}};
        int timeout = -1;
        if (kill_at)
            timeout = static_cast<int>(
                std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                              *kill_at - std::chrono::steady_clock::now())
                                              .count()));
        wait_any(fds, lost ? 1 : 2, timeout);
        if (!lost && (fds[1].revents & POLLIN)) {
            lost = true;
            err << "dlock: leadership of '" << one_line(o.name)
                << "' lost; sending SIGTERM to the command\n";
            ::kill(child, SIGTERM);
            kill_at = std::chrono::steady_clock::now() + o.kill_after;
        }
        if (kill_at && std::chrono::steady_clock::now() >= *kill_at) {
            ::kill(child, SIGKILL);
            kill_at.reset();
        }
        bool exited = false;
        for (int s; (s = signals.next()) != 0;)
            if (s != SIGCHLD) ::kill(child, s); // forwarded
        if (::waitpid(child, &status, WNOHANG) == child) exited = true;
        if (exited) break;
    }
    if (lost) return exit_code::lost;
    std::error_code rec;
    l.resign(rec); // the next participant leads
    return exit_status(status);
}

namespace {

void print_leader(std::ostream& out, const std::string& name, const std::optional<leader_info>& li,
                  bool json) {
    if (json) {
        out << "{\"name\":";
        json_string(out, name);
        if (li) {
            out << ",\"vacant\":false,\"value\":";
            json_string(out, li->value);
            out << ",\"epoch\":" << li->epoch << "}\n";
        } else {
            out << ",\"vacant\":true}\n";
        }
    } else if (li) {
        out << one_line(name) << ": leader '" << one_line(li->value) << "', epoch " << li->epoch
            << "\n";
    } else {
        out << one_line(name) << ": vacant (no leader)\n";
    }
    out.flush();
}

} // namespace

int run_leader(const global_options& g, const std::string& name, bool json, bool watch,
               std::ostream& out) {
    if (!watch) {
        auto c = open_client(g);
        std::error_code ec;
        const auto li = c.leader(name, ec);
        if (ec) throw election_failure(c, ec, "cannot read the leader of '" + name + "'", name);
        print_leader(out, name, li, json);
        return exit_code::ok;
    }
    blocked_signals signals; // before the client: its threads inherit the blocked mask
    auto c = open_client(g);
    std::error_code ec;
    // The callback runs on the client's I/O thread, one call at a time; this thread only waits.
    auto obs = c.observe(
        name, [&](const std::optional<leader_info>& li) { print_leader(out, name, li, json); }, ec);
    if (ec) throw election_failure(c, ec, "cannot watch the leader of '" + name + "'", name);
    for (;;) {
        pollfd fds[1] = {{signals.fd(), POLLIN, 0}};
        wait_any(fds, 1, -1);
        for (int s; (s = signals.next()) != 0;)
            if (s != SIGCHLD) {
                obs.stop(); // no callback after this
                return exit_code::ok;
            }
    }
}

} // namespace dlock::cli
