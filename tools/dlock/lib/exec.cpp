// exec.cpp: `dlock exec`, hold a lock while a child command runs.
//
// Event loop without busy waiting: SIGINT/SIGTERM/SIGHUP/SIGQUIT and SIGCHLD are blocked in
// every thread before the client (and its I/O thread) exists and are read from a signalfd; the
// acquisition result and a loss of the lease arrive through eventfds written on the client's
// I/O thread. One poll() waits for whichever comes first; the only timeout is the SIGKILL
// deadline after a loss.
//
//   acquire (async) --+-- signal ----------------------------> exit 128+sig (lock not taken)
//                     +-- error / not acquired ---------------> exit 75 / 64..78
//                     +-- lease --> fork+exec child --+-- child exits --> release --> its status
//                                                     +-- signal --> forward to the child
//                                                     +-- lease lost --> SIGTERM, later SIGKILL,
//                                                                        exit 73
#include "commands.hpp"
#include "inspect.hpp"
#include "once.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <mutex>
#include <optional>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ; // NOLINT(readability-redundant-declaration): POSIX: the program declares it

namespace dlock::cli {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::array<int, 4> forwarded_signals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

[[noreturn]] void throw_errno(const char* what) {
    throw std::system_error(errno, std::generic_category(), what);
}

/// Blocks the forwarded signals (those not ignored: `nohup dlock exec` keeps ignoring SIGHUP)
/// and SIGCHLD in the calling thread, and so in every thread it creates later, and exposes them
/// as a non-blocking signalfd. Restores the mask on destruction.
class signal_block {
public:
    signal_block() {
        sigemptyset(&set_);
        sigaddset(&set_, SIGCHLD);
        for (int s : forwarded_signals) {
            struct sigaction current {};
            if (::sigaction(s, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
            sigaddset(&set_, s);
        }
        if (::pthread_sigmask(SIG_BLOCK, &set_, &old_) != 0) throw_errno("pthread_sigmask");
        fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd_ < 0) {
            ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
            throw_errno("signalfd");
        }
    }
    ~signal_block() {
        ::close(fd_);
        ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    signal_block(const signal_block&) = delete;
    signal_block& operator=(const signal_block&) = delete;

    int fd() const { return fd_; }
    /// The mask from before construction, for the child.
    const sigset_t& old_mask() const { return old_; }
    /// Reads the next pending signal; nullopt when none is pending.
    std::optional<signalfd_siginfo> next() const {
        signalfd_siginfo si{};
        if (::read(fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) return si;
        return std::nullopt;
    }

private:
    sigset_t set_{}, old_{};
    int fd_ = -1;
};

/// An eventfd that another thread sets to wake the poll loop.
class event_fd {
public:
    event_fd()
        : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
        if (fd_ < 0) throw_errno("eventfd");
    }
    ~event_fd() { ::close(fd_); }
    event_fd(const event_fd&) = delete;
    event_fd& operator=(const event_fd&) = delete;

    int fd() const { return fd_; }
    /// Async-signal-safe and callable from any thread.
    static void notify(int fd) noexcept {
        const std::uint64_t one = 1;
        (void)!::write(fd, &one, sizeof one);
    }
    void consume() const noexcept {
        std::uint64_t n = 0;
        (void)!::read(fd_, &n, sizeof n);
    }

private:
    int fd_;
};

/// The file descriptors open in this process now (from /proc/self/fd; empty if unreadable).
std::vector<int> open_fds() {
    std::vector<int> fds;
    DIR* d = ::opendir("/proc/self/fd");
    if (!d) return fds;
    const int self = ::dirfd(d);
    while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        const int fd = std::atoi(e->d_name);
        if (fd != self) fds.push_back(fd);
    }
    ::closedir(d);
    std::sort(fds.begin(), fds.end());
    return fds;
}

/// Marks close-on-exec every descriptor not in `inherited` (sorted): the client's sockets are
/// opened without it, and the child must get only what dlock itself was given.
void close_on_exec_except(const std::vector<int>& inherited) {
    for (int fd : open_fds())
        if (!std::binary_search(inherited.begin(), inherited.end(), fd)) {
            const int flags = ::fcntl(fd, F_GETFD);
            if (flags >= 0 && !(flags & FD_CLOEXEC)) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
        }
}

/// The acquisition result, handed from the client's I/O thread to the main thread.
struct acquire_slot {
    std::mutex mu;
    bool done = false;      // guarded by mu
    bool abandoned = false; // guarded by mu: the main thread stopped waiting (signal)
    std::error_code ec;     // guarded by mu
    lease held;             // guarded by mu
};

struct spawn_result {
    pid_t pid = -1;
    int exec_errno = 0; ///< set when the command could not be executed (the child exited)
};

/// Starts the child: fork, then in the child restore the signal mask, arrange SIGTERM when
/// dlock dies (so the command never runs on without the lock being renewed), and execvpe.
/// An exec failure comes back through a close-on-exec pipe.
spawn_result spawn_child(const exec_options& o, const std::string& token, const std::string& slot,
                         const sigset_t& mask) {
    // Everything the child needs is built before fork(): after it, in a process that has an
    // I/O thread, the child may only make async-signal-safe calls.
    std::vector<std::string> env_storage;
    for (char** e = environ; *e; ++e)
        if (std::strncmp(*e, "DLOCK_NAME=", 11) != 0 &&
            std::strncmp(*e, "DLOCK_FENCING_TOKEN=", 20) != 0 &&
            std::strncmp(*e, "DLOCK_PERIOD_SLOT=", 18) != 0)
            env_storage.emplace_back(*e);
    env_storage.push_back("DLOCK_NAME=" + o.name);
    env_storage.push_back("DLOCK_FENCING_TOKEN=" + token);
    if (!slot.empty()) env_storage.push_back("DLOCK_PERIOD_SLOT=" + slot);
    std::vector<char*> envp;
    for (auto& e : env_storage)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> argv;
    for (auto& a : o.command)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0) throw_errno("pipe2");
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(report[0]);
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != parent) ::_exit(exit_code::signalled + SIGTERM); // dlock already died
        ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
        ::execvpe(argv[0], argv.data(), envp.data());
        const int e = errno;
        (void)!::write(report[1], &e, sizeof e);
        ::_exit(127);
    }
    ::close(report[1]);
    spawn_result r;
    if (pid < 0) {
        const int e = errno;
        ::close(report[0]);
        errno = e;
        throw_errno("fork");
    }
    r.pid = pid;
    int e = 0;
    ssize_t n;
    while ((n = ::read(report[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    ::close(report[0]);
    if (n == static_cast<ssize_t>(sizeof e)) {
        r.exec_errno = e;
        ::waitpid(pid, nullptr, 0);
    }
    return r;
}

/// poll() on `fds`, retrying on EINTR. Errors: std::system_error.
void poll_fds(pollfd* fds, nfds_t n, int timeout_ms) {
    while (::poll(fds, n, timeout_ms) < 0)
        if (errno != EINTR) throw_errno("poll");
}

} // namespace

int run_exec(const global_options& g, const exec_options& o, std::ostream& err) {
    if (o.command.empty()) throw usage_error("exec needs a command after --");
    // Redlock (several --url, or a redlock:// URL): simple-lock layout on each master, no
    // fencing token; one Redis URL: the CLI's client options (--watchdog among them); any other
    // scheme: the library's table of backends (open_client).
    auto ropts = redlock_options_for(g);
    // No --kind: the reentrant lock, or Redlock's one kind.
    const auto kind = o.kind.empty()
                          ? std::optional(ropts ? lock_kind::simple : lock_kind::reentrant)
                          : kind_from_name(o.kind);
    if (!kind) throw usage_error("unknown kind '" + o.kind + "'");
    client_options copts;
    std::error_code not_redis;
    if (!ropts) (void)parse_url(effective_urls(g).front(), not_redis);
    if (!ropts && !not_redis) copts = connect_options(g);
    if (o.watchdog) {
        if (o.watchdog->count() < 30) throw usage_error("--watchdog must be at least 30ms");
        copts.watchdog_lease = *o.watchdog;
        if (ropts) ropts->watchdog_lease = *o.watchdog;
    }
    if (ropts)
        for (const auto* d : {&o.lease, &o.watchdog})
            if (*d && **d <= ropts->node_timeout)
                throw usage_error("on Redlock, --lease and --watchdog must be above the "
                                  "per-master timeout of " +
                                  format_duration(ropts->node_timeout));
    acquire_options ao;
    ao.wait = o.wait;
    ao.lease = o.lease;
    ao.kind = *kind;
    ao.permits = o.permits;
    ao.warn_margin = o.warn_margin;
    ao.max_hold = o.max_hold;

    const auto inherited_fds = open_fds();
    signal_block signals; // before the client: its I/O thread inherits the blocked mask
    event_fd acquired_ev, lost_ev, warned_ev;
    // Declared after the fds their I/O thread writes: joined before they close.
    std::optional<client> c;

    // 1. Acquire, asynchronously, so that a signal can end the wait.
    auto slot = std::make_shared<acquire_slot>();
    auto on_acquired = [slot, fd = acquired_ev.fd()](std::error_code ec, lease l) {
        std::lock_guard lk(slot->mu);
        if (slot->abandoned) return; // `l` is released here, without blocking the I/O thread
        slot->ec = ec;
        slot->held = std::move(l);
        slot->done = true;
        event_fd::notify(fd);
    };
    if (ropts) {
        try {
            c.emplace(*ropts);
        } catch (const dlock::error& e) {
            throw usage_error(one_line(e.what())); // options the Redlock refuses
        }
    } else if (!not_redis) {
        c.emplace(copts);
    } else {
        c.emplace(open_client(g));
    }
    // 0. --once-per: the slot first (a slot taken already skips the run, lock untouched).
    std::optional<once_slot> once;
    if (o.once_per) {
        once.emplace(*c, o, err);
        if (once->taken()) return once->skipped_exit();
    }
    const auto ran = [&once](int rc) { return once ? once->finished(rc) : rc; };
    c->async_acquire(o.name, ao, std::move(on_acquired));
    int interrupted_by = 0;
    while (interrupted_by == 0) {
        pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {acquired_ev.fd(), POLLIN, 0}};
        poll_fds(fds, 2, -1);
        if (fds[1].revents & POLLIN) break;
        while (auto si = signals.next())
            if (si->ssi_signo != SIGCHLD) interrupted_by = static_cast<int>(si->ssi_signo);
    }
    lease held;
    std::error_code ec;
    {
        std::lock_guard lk(slot->mu);
        slot->abandoned = interrupted_by != 0;
        ec = slot->ec;
        held = std::move(slot->held);
    }
    if (interrupted_by != 0) {
        held.release(ec); // taken just as the signal came: give it back
        err << "dlock: interrupted by " << signal_name(interrupted_by) << " while waiting for '"
            << o.name << "'\n";
        return exit_code::signalled + interrupted_by;
    }
    if (ec == errc::invalid_argument)
        throw usage_error("invalid lock name '" + one_line(o.name) +
                          "' (empty, over 4096 bytes, or an empty hash tag {})");
    if (ec) {
        const std::string doing = "cannot acquire '" + one_line(o.name) + "'";
        throw diagnose(*c, ec, ropts ? doing + " on a quorum of the masters" : doing, o.name);
    }
    if (!held) {
        if (o.wait && o.wait->count() == 0)
            err << "dlock: '" << o.name << "' is held by another owner (--wait 0)\n";
        else
            err << "dlock: '" << o.name << "' not acquired within --wait "
                << format_duration(o.wait.value_or(std::chrono::milliseconds(0))) << "\n";
        return exit_code::not_acquired;
    }
    held.on_lost([fd = lost_ev.fd()] { event_fd::notify(fd); });
    if (o.warn_signal != 0) held.on_warning([fd = warned_ev.fd()] { event_fd::notify(fd); });

    // 2. Run the child while the lease is held.
    const std::string token = held.token() ? std::to_string(*held.token()) : "";
    close_on_exec_except(inherited_fds);
    const auto child =
        spawn_child(o, token, once ? once->slot_index() : std::string(), signals.old_mask());
    if (child.exec_errno != 0) {
        held.release(ec);
        // The client's thread is running but never formats errno text, so strerror is safe here.
        err << "dlock: cannot run '" << one_line(o.command[0])
            << "': " << std::strerror(child.exec_errno) << "\n"; // NOLINT(concurrency-mt-unsafe)
        return ran(child.exec_errno == ENOENT ? 127 : 126);
    }

    bool lost = false;
    auto report_loss = [&](bool running) {
        if (lost) return;
        lost = true;
        const auto cause = held.loss_cause();
        err << "dlock: lost the lock '" << o.name << "' while the command ran (";
        if (cause == loss_cause::max_hold)
            err << "max_hold: held for --max-hold, released";
        else if (cause)
            err << to_string(*cause) << ": expired, deleted or taken over";
        else
            err << "expired, deleted or taken over";
        err << (running ? "); stopping the command\n" : ")\n");
    };
    std::optional<clock::time_point> kill_at;
    int status = 0;
    for (;;) {
        // Reap first: SIGCHLD may have been merged with another pending SIGCHLD.
        const pid_t r = ::waitpid(child.pid, &status, WNOHANG);
        if (r == child.pid) break;
        if (r < 0 && errno != EINTR) throw_errno("waitpid");
        int timeout_ms = -1;
        if (kill_at) {
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(*kill_at - clock::now());
            if (left.count() <= 0) {
                ::kill(child.pid, SIGKILL);
                kill_at.reset();
                continue;
            }
            timeout_ms = static_cast<int>(std::min<long long>(left.count(), 1'000'000));
        }
        pollfd fds[3] = {
            {signals.fd(), POLLIN, 0}, {lost_ev.fd(), POLLIN, 0}, {warned_ev.fd(), POLLIN, 0}};
        poll_fds(fds, 3, timeout_ms);
        while (auto si = signals.next()) {
            const auto sig = static_cast<int>(si->ssi_signo);
            // A signal the kernel sent (the terminal's ^C, ^\, hang-up) went to the whole
            // foreground process group, the child included: forwarding it would deliver it twice.
            if (sig != SIGCHLD && si->ssi_code != SI_KERNEL) ::kill(child.pid, sig);
        }
        if (fds[2].revents & POLLIN) {
            warned_ev.consume();
            if (!lost && !held.lost()) {
                const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    held.valid_until() - clock::now());
                err << "dlock: the lease of '" << o.name << "' is not being renewed ("
                    << std::max<long long>(left.count(), 0) << " ms left); sending "
                    << signal_name(o.warn_signal) << " to the command\n";
                ::kill(child.pid, o.warn_signal);
            }
        }
        if ((fds[1].revents & POLLIN) && !lost) {
            lost_ev.consume();
            report_loss(true);
            ::kill(child.pid, SIGTERM);
            kill_at = clock::now() + o.kill_after;
        }
    }

    // 3. Release, and report.
    if (!lost && held.lost()) report_loss(false); // lost between the last poll and the exit
    if (!lost) {
        held.release(ec);
        if (ec == errc::not_owner)
            report_loss(false);
        else if (ec)
            err << "dlock: releasing '" << o.name << "' failed (" << one_line(ec.message())
                << "); it expires with its lease\n";
    }
    if (lost) return ran(exit_code::lost);
    if (WIFEXITED(status)) return ran(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return ran(exit_code::signalled + WTERMSIG(status));
    return ran(exit_code::software);
}

} // namespace dlock::cli
