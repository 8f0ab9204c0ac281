// watch.cpp: `dlock status --watch NAME...` and `dlock list --watch [PATTERN]`, a live view of
// locks. One thread, no busy waiting: SIGINT, SIGTERM, SIGHUP and SIGWINCH are blocked before
// the client (and its I/O thread) exists and read from a signalfd; one poll() on it and on a
// terminal's stdin (for q) waits out the interval between two reads of the locks.
//
// On a terminal: the alternate screen, cursor hidden, stdin without line buffering or echo;
// each refresh moves the cursor home and redraws every line (erasing what a longer previous
// line left), lines cut at the terminal's width so nothing wraps. Everything is restored on
// every way out (RAII). Elsewhere: one block of plain lines per refresh.
#include "commands.hpp"
#include "inspect.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <map>
#include <poll.h>
#include <sstream>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

namespace dlock::cli {
namespace {

/// Blocks the signals that end (or resize) the view and reads them from a signalfd.
class watch_signals {
public:
    watch_signals() {
        sigemptyset(&set_);
        for (int s : {SIGINT, SIGTERM, SIGHUP, SIGWINCH})
            sigaddset(&set_, s);
        if (::pthread_sigmask(SIG_BLOCK, &set_, &old_) != 0)
            throw std::system_error(errno, std::generic_category(), "pthread_sigmask");
        fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd_ < 0) {
            const int e = errno;
            ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
            throw std::system_error(e, std::generic_category(), "signalfd");
        }
    }
    ~watch_signals() {
        ::close(fd_);
        ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    watch_signals(const watch_signals&) = delete;
    watch_signals& operator=(const watch_signals&) = delete;
    int fd() const { return fd_; }
    /// The next pending signal, 0 when none.
    int next() const {
        signalfd_siginfo si{};
        if (::read(fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si))
            return static_cast<int>(si.ssi_signo);
        return 0;
    }

private:
    sigset_t set_{}, old_{};
    int fd_ = -1;
};

/// The terminal in view mode: alternate screen, hidden cursor, and (when stdin is a terminal)
/// keys without Enter or echo. Restores all of it on destruction.
class terminal_mode {
public:
    terminal_mode(std::ostream& out, bool on)
        : out_(out)
        , on_(on) {
        if (!on_) return;
        if (::isatty(STDIN_FILENO) == 1 && ::tcgetattr(STDIN_FILENO, &saved_) == 0) {
            termios raw = saved_;
            raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO); // ISIG stays: Ctrl-C works
            raw.c_cc[VMIN] = 0;
            raw.c_cc[VTIME] = 0;
            keys_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
        }
        out_ << "\x1b[?1049h\x1b[?25l" << std::flush;
    }
    ~terminal_mode() {
        if (!on_) return;
        out_ << "\x1b[?25h\x1b[?1049l" << std::flush;
        if (keys_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
    }
    terminal_mode(const terminal_mode&) = delete;
    terminal_mode& operator=(const terminal_mode&) = delete;
    /// Keys can be read from stdin.
    bool keys() const { return keys_; }

private:
    std::ostream& out_;
    bool on_;
    bool keys_ = false;
    termios saved_{};
};

/// The terminal's width in columns (80 when unknown).
std::size_t terminal_width() {
    winsize ws{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}

std::string seconds_text(long long ms) {
    std::ostringstream s;
    s.setf(std::ios::fixed);
    s.precision(1);
    s << static_cast<double>(ms) / 1000.0 << " s";
    return s.str();
}

/// "[#########-----------]": `left` of `full`, 20 cells.
std::string lease_bar(long long left, long long full) {
    constexpr long long cells = 20;
    const long long filled =
        full <= 0 ? 0 : std::clamp((left * cells + full / 2) / full, 0LL, cells);
    return "[" + std::string(static_cast<std::size_t>(filled), '#') +
           std::string(static_cast<std::size_t>(cells - filled), '-') + "]";
}

std::string now_text() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
    return buf;
}

/// The largest remaining lease seen for each lock while its holders stayed the same: the
/// bar's full length (a renewal refills the bar; a fixed lease drains it).
class lease_scale {
public:
    long long full(const lock_status& i) {
        std::string who;
        for (const auto& h : i.contenders)
            if (h.holds) who += h.owner + ' ';
        auto& e = seen_[i.name];
        if (e.holders != who) e = {who, 0};
        e.peak = std::max(e.peak, ttl_ms(i).value_or(0));
        return e.peak;
    }
    static std::optional<long long> ttl_ms(const lock_status& i) {
        return i.remaining_lease ? std::optional(i.remaining_lease->count()) : std::nullopt;
    }

private:
    struct entry {
        std::string holders;
        long long peak = 0;
    };
    std::map<std::string, entry> seen_;
};

void render_lock(std::ostream& v, const lock_status& i, lease_scale& scale) {
    v << i.name << "  ";
    if (!i.foreign.empty()) {
        v << "holds a " << i.foreign << ", not a lock\n";
        return;
    }
    v << (i.exists ? i.kind : "not locked") << "  fencing " << fencing_text(i) << "  waiters "
      << waiter_count(i) << '\n';
    for (const auto& h : i.contenders)
        if (h.holds)
            v << "  holder  " << h.owner << "  x"
              << (h.hold_count ? std::to_string(*h.hold_count) : std::string("1")) << '\n';
    const auto ttl = lease_scale::ttl_ms(i);
    if (ttl && *ttl >= 0)
        v << "  lease   " << lease_bar(*ttl, scale.full(i)) << "  " << seconds_text(*ttl)
          << " left\n";
    else if (ttl)
        v << "  lease   no expiry\n";
    if (const auto m = i.details.find("mode"); m != i.details.end())
        v << "  mode    " << m->second
          << (i.details.count("writer_waiting_ms") ? "  (a writer waits)" : "  (no writer waits)")
          << '\n';
    std::size_t k = 0;
    for (const auto& w : i.contenders) {
        if (w.holds) continue;
        v << "  queue   " << ++k << ". " << w.owner;
        if (w.remaining) v << "  (place " << seconds_text(w.remaining->count()) << ")";
        v << '\n';
    }
}

/// One refresh: the view as text. Errors: failure (diagnosed) from the reads.
std::string read_view(client& c, const watch_options& o, lease_scale& scale) {
    std::ostringstream v;
    if (o.pattern) {
        const auto locks = list_locks(c, *o.pattern);
        if (locks.empty())
            v << "no locks match '" << *o.pattern << "'\n";
        else
            print_list_text(v, locks);
        for (const auto& l : locks)
            if (const auto ttl = lease_scale::ttl_ms(l); ttl && *ttl >= 0)
                v << l.name << "  " << lease_bar(*ttl, scale.full(l)) << "  " << seconds_text(*ttl)
                  << " left\n";
        return v.str();
    }
    for (std::size_t k = 0; k < o.names.size(); ++k) {
        if (k) v << '\n';
        render_lock(v, status_of(c, o.names[k]), scale);
    }
    return v.str();
}

/// Draws `body` over the previous frame: cursor home, each line cut to the width and erased
/// to its end, then everything below erased.
void draw(std::ostream& out, const std::string& header, const std::string& body) {
    const std::size_t width = terminal_width();
    std::string frame = "\x1b[H";
    std::istringstream lines(header + "\n\n" + body);
    for (std::string line; std::getline(lines, line);)
        frame += line.substr(0, width) + "\x1b[K\r\n";
    frame += "\x1b[J";
    out << frame << std::flush;
}

} // namespace

int run_watch(const global_options& g, const watch_options& o, std::ostream& out) {
    for (const auto& n : o.names)
        if (n.empty()) throw usage_error("empty lock name");
    (void)effective_urls(g); // usage errors before the terminal changes
    watch_signals signals;   // before the client: its I/O thread inherits the blocked mask
    auto c = open_client(g);
    // Where it reads: the Redis options as the client understood them (never a password),
    // else the backend's name (its URL may carry a password).
    const std::string where =
        c.backend_name() == "redis" ? to_string(c.options()) : std::string(c.backend_name());
    lease_scale scale;
    const std::string what =
        o.pattern ? "list --watch '" + *o.pattern + "'" : std::string("status --watch");
    std::string body;
    try { // the first read decides whether the view can work at all
        body = read_view(c, o, scale);
    } catch (const dlock::error& e) {
        throw diagnose(c, e.code(), "cannot read the locks", o.names.empty() ? "" : o.names[0]);
    } // a failure (already diagnosed by status_of / list_locks) ends the view as it is
    terminal_mode term(out, o.terminal);
    const auto interval = std::to_string(o.interval.count()) + "ms";
    for (;;) {
        const std::string header = "dlock " + what + "  " + where + "  every " + interval + "  " +
                                   now_text() + (term.keys() ? "  (q quits)" : "");
        if (o.terminal)
            draw(out, header, body);
        else
            out << "--- " << header << '\n' << body << std::flush;

        // Wait out the interval; a signal or q ends the view, SIGWINCH redraws at once.
        const auto until = std::chrono::steady_clock::now() + o.interval;
        bool redraw = false;
        bool read_keys = term.keys();
        while (!redraw) {
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(
                until - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
            const nfds_t n = read_keys ? 2 : 1;
            if (::poll(fds, n, static_cast<int>(std::min<long long>(left.count(), 1'000'000))) <
                0) {
                if (errno == EINTR) continue;
                throw std::system_error(errno, std::generic_category(), "poll");
            }
            while (const int sig = signals.next()) {
                if (sig != SIGWINCH) return exit_code::ok;
                redraw = true;
            }
            if (n == 2 && (fds[1].revents & (POLLIN | POLLHUP))) {
                char keys[64];
                const ssize_t got = ::read(STDIN_FILENO, keys, sizeof keys);
                for (ssize_t k = 0; k < got; ++k)
                    if (keys[k] == 'q' || keys[k] == 'Q') return exit_code::ok;
                if (got <= 0) read_keys = false; // hung up: signals only from now on
            }
        }
        if (redraw) continue; // same body, new size
        try {
            body = read_view(c, o, scale);
        } catch (const dlock::error& e) {
            // Keep watching: the server may come back. Say what is wrong meanwhile.
            body = diagnose(c, e.code(), "cannot read the locks").what() + std::string("\n");
        } catch (const failure& f) {
            body = f.what() + std::string("\n");
        }
    }
}

} // namespace dlock::cli
