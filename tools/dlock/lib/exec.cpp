// dlock exec: hold a lock while a child command runs.
//
// Signals SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGCHLD are blocked before the client (and its I/O
// thread) exists and read through a signalfd; loss of the lease arrives through an eventfd
// written by the lease's on_lost callback. One poll() waits for any of them: no busy waiting.
#include "commands.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace dlock::cli {
namespace {

using clock = std::chrono::steady_clock;

class signal_block {
public:
    signal_block() {
        sigemptyset(&set_);
        for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD})
            sigaddset(&set_, s);
        ::pthread_sigmask(SIG_BLOCK, &set_, &old_);
        fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC);
    }
    ~signal_block() {
        if (fd_ >= 0) ::close(fd_);
        ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    int fd() const { return fd_; }
    const sigset_t& old_mask() const { return old_; }

private:
    sigset_t set_{}, old_{};
    int fd_ = -1;
};

pid_t spawn_child(const exec_options& o, const std::string& token, const sigset_t& mask) {
    // Everything the child needs is built before fork(): after it, in a process that has an
    // I/O thread, the child may only make async-signal-safe calls.
    std::vector<std::string> env_storage;
    for (char** e = environ; *e; ++e)
        if (std::strncmp(*e, "DLOCK_NAME=", 11) != 0 &&
            std::strncmp(*e, "DLOCK_FENCING_TOKEN=", 20) != 0)
            env_storage.emplace_back(*e);
    env_storage.push_back("DLOCK_NAME=" + o.name);
    env_storage.push_back("DLOCK_FENCING_TOKEN=" + token);
    std::vector<char*> envp;
    for (auto& e : env_storage)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> argv;
    for (auto& a : o.command)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    static constexpr char failed[] = "dlock: cannot run the command\n";

    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    // Child: default dispositions and the original signal mask.
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGPIPE})
        ::signal(s, SIG_DFL);
    ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    (void)!::write(2, failed, sizeof failed - 1);
    ::_exit(127);
}

} // namespace

int run_exec(const global_options& g, const exec_options& o, std::ostream& err) {
    if (o.kind == "fair" || o.kind == "read" || o.kind == "write")
        throw usage_error("kind '" + o.kind + "' is not implemented yet");
    auto copts = connect_options(g);
    if (o.watchdog) {
        if (o.watchdog->count() < 30) throw usage_error("--watchdog must be at least 30ms");
        copts.watchdog_lease = *o.watchdog;
    }

    signal_block signals; // before the client: its I/O thread inherits the blocked mask
    const int lost_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    client c(copts);
    acquire_options ao;
    ao.wait = o.wait;
    ao.lease = o.lease;
    ao.kind = o.kind == "simple" ? lock_kind::simple : lock_kind::reentrant;
    std::error_code ec;
    lease held = c.acquire(o.name, ao, ec);
    if (ec) {
        err << "dlock: cannot acquire '" << o.name << "': " << ec.message() << "\n";
        ::close(lost_fd);
        return exit_code_for(ec);
    }
    if (!held) {
        err << "dlock: '" << o.name << "' not acquired within the wait\n";
        ::close(lost_fd);
        return exit_code::not_acquired;
    }
    held.on_lost([lost_fd] {
        const std::uint64_t one = 1;
        (void)!::write(lost_fd, &one, sizeof one);
    });
    const std::string token = held.token() ? std::to_string(*held.token()) : "";
    const pid_t child = spawn_child(o, token, signals.old_mask());
    if (child < 0) {
        err << "dlock: fork failed: " << std::strerror(errno) << "\n";
        ::close(lost_fd);
        return exit_code::failure;
    }

    bool lost = false;
    std::optional<clock::time_point> kill_at;
    int status = 0;
    for (;;) {
        // Reap first: SIGCHLD may have been merged with another signal.
        const pid_t r = ::waitpid(child, &status, WNOHANG);
        if (r == child) break;
        int timeout_ms = -1;
        if (kill_at) {
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(*kill_at - clock::now());
            if (left.count() <= 0) {
                ::kill(child, SIGKILL);
                kill_at.reset();
                continue;
            }
            timeout_ms = static_cast<int>(left.count());
        }
        pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {lost_fd, POLLIN, 0}};
        if (::poll(fds, 2, timeout_ms) < 0 && errno != EINTR) break;
        if (fds[0].revents & POLLIN) {
            signalfd_siginfo si{};
            while (::read(signals.fd(), &si, sizeof si) == sizeof si) {
                const auto sig = static_cast<int>(si.ssi_signo);
                if (sig != SIGCHLD) ::kill(child, sig); // forward
                break;
            }
        }
        if ((fds[1].revents & POLLIN) && !lost) {
            std::uint64_t n = 0;
            (void)!::read(lost_fd, &n, sizeof n);
            lost = true;
            err << "dlock: lock '" << o.name << "' was lost; stopping the command\n";
            ::kill(child, SIGTERM);
            kill_at = clock::now() + o.kill_after;
        }
    }
    ::close(lost_fd);
    if (!lost && held.lost()) lost = true;
    if (lost) return exit_code::lost;
    held.release(ec);
    if (ec == errc::not_owner) {
        err << "dlock: lock '" << o.name << "' was lost before the command ended\n";
        return exit_code::lost;
    }
    if (ec) err << "dlock: release failed: " << ec.message() << "\n";
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return exit_code::failure;
}

} // namespace dlock::cli
