#include "redis/net/sync_lane.hpp"

#include "redis/net/wire.hpp"

#include <dlock/error.hpp>

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <vector>

namespace dlock::net {
namespace {

constexpr std::size_t read_chunk = 16 * 1024;

/// How long after a reply the lane is used without first checking that the server has not
/// closed it (a poll() per call otherwise; BENCHMARKS.md has its cost).
constexpr auto recheck_after = std::chrono::milliseconds(1);

/// Milliseconds left until `deadline` for poll(), at least 0, rounded up.
int poll_timeout(sync_lane::clock::time_point deadline) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - sync_lane::clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 1'000'000));
}

/// poll() one descriptor for `events` until `deadline`. Returns revents (0 on timeout).
short wait_for(int fd, short events, sync_lane::clock::time_point deadline) {
    for (;;) {
        pollfd p{fd, events, 0};
        const int n = ::poll(&p, 1, poll_timeout(deadline));
        if (n > 0) return p.revents;
        if (n == 0) return 0;
        if (errno != EINTR) return POLLERR;
    }
}

} // namespace

sync_lane::sync_lane(const client_options& opts)
    : opts_(opts)
    , parser_(opts.limits) {}

sync_lane::~sync_lane() {
    std::lock_guard lk(mu_);
    close_locked();
}

void sync_lane::shutdown() noexcept {
    stopped_.store(true, std::memory_order_release);
    std::lock_guard lk(fd_mu_);
    if (live_fd_ >= 0) ::shutdown(live_fd_, SHUT_RDWR); // wakes a call blocked in poll()
}

void sync_lane::close_locked() noexcept {
    if (fd_ < 0) return;
    {
        std::lock_guard lk(fd_mu_);
        live_fd_ = -1;
        ::close(fd_);
    }
    fd_ = -1;
    last_reply_ = {};
    parser_.reset();
    in_buf_.clear();
    in_pos_ = 0;
}

sync_lane::result sync_lane::call(connection& main, std::span<const std::string_view> args,
                                  std::string_view eval_fallback, clock::time_point deadline,
                                  resp3::value& out, std::error_code& ec) {
    std::unique_lock lk(mu_, std::try_to_lock);
    if (!lk.owns_lock()) return result::not_taken;
    if (!usable_locked(main, deadline)) return result::not_taken;
    calls_.fetch_add(1, std::memory_order_relaxed);

    out_buf_.clear();
    resp3::encode_command(out_buf_, args);
    if (!write_all(out_buf_, deadline)) {
        // Not all of it left, and the lane is closed now: a partial command cannot run, so the
        // pipelined connection takes it.
        calls_.fetch_sub(1, std::memory_order_relaxed);
        return result::not_taken;
    }
    auto& counters = main.counters();
    counters.sent(args.empty() ? std::string_view{} : args.front());
    if (!read_reply(out, deadline, ec)) {
        if (ec == errc::ambiguous) detail::wire_counters::bump(counters.ambiguous);
        return result::done;
    }
    if (desynchronised_locked() && needs_eval(out, eval_fallback)) {
        // NOSCRIPT ran nothing, and the lane the EVAL would go on is closed now.
        ec = make_error_code(errc::protocol_error);
        return result::done;
    }
    if (needs_eval(out, eval_fallback)) {
        detail::wire_counters::bump(counters.noscript);
        counters.sent("EVAL");
        out_buf_.clear();
        encode_as_eval(out_buf_, args, eval_fallback);
        if (!write_all(out_buf_, deadline)) {
            // NOSCRIPT ran nothing and a partial EVAL cannot run: the outcome is still known.
            ec = make_error_code(stopped_ ? errc::cancelled : errc::unavailable);
            return result::done;
        }
        if (!read_reply(out, deadline, ec) && ec == errc::ambiguous)
            detail::wire_counters::bump(counters.ambiguous);
        if (!ec) desynchronised_locked();
    }
    if (!ec && out.is_error()) main.note_error_reply(out.str); // for messages, as the connection
    return result::done;
}

bool sync_lane::desynchronised_locked() noexcept {
    if (fd_ < 0 || in_pos_ == in_buf_.size()) return false;
    close_locked();
    return true;
}

bool sync_lane::usable_locked(connection& main, clock::time_point deadline) {
    if (stopped_.load(std::memory_order_acquire)) return false;
    // Never overtake this process's earlier commands, and never report a different error
    // than the pipelined connection would (it is the one that reconnects and handshakes).
    std::uint64_t epoch = 0;
    if (!main.idle(epoch)) return false;
    if (fd_ >= 0 && epoch != epoch_) close_locked(); // follow the shared connection
    if (fd_ >= 0) {
        // Just answered: alive. (Closed by the server in this last millisecond, the call comes
        // back ambiguous, as on any connection that dies with a command on the wire.)
        if (clock::now() - last_reply_ < recheck_after) return true;
        // An idle lane the server closed (restart, CLIENT KILL, timeout) shows as readable.
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 0) == 0) return true;
        close_locked();
    }
    if (clock::now() < retry_after_) return false;
    if (connect_locked(main, deadline)) return true;
    retry_after_ = clock::now() + opts_.reconnect_max;
    close_locked();
    return false;
}

bool sync_lane::connect_locked(connection& main, clock::time_point deadline) {
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (!main.peer_address(addr, len, epoch_)) return false;
    const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return false;
    {
        std::lock_guard lk(fd_mu_);
        if (stopped_.load(std::memory_order_acquire)) {
            ::close(fd);
            return false;
        }
        fd_ = fd;
        live_fd_ = fd;
    }
    if (addr.ss_family == AF_INET || addr.ss_family == AF_INET6) {
        const int one = 1;
        ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    const auto connect_deadline = std::min(deadline, clock::now() + opts_.connect_timeout);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
        if (errno != EINPROGRESS && errno != EAGAIN) return false;
        if (!(wait_for(fd_, POLLOUT, connect_deadline) & POLLOUT)) return false;
        int err = 0;
        socklen_t elen = sizeof err;
        if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) return false;
    }
    // From here on the socket blocks in recv() (one system call per reply instead of poll()
    // then recv()), waking at least every tenth of the shortest timeout to check the call's
    // deadline; sends stay non-blocking (MSG_DONTWAIT).
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) return false;
    const auto slice = std::max<std::chrono::microseconds>(
        std::chrono::milliseconds(1), std::min(opts_.command_timeout, opts_.connect_timeout) / 10);
    const timeval tv{static_cast<time_t>(slice.count() / 1'000'000),
                     static_cast<suseconds_t>(slice.count() % 1'000'000)};
    if (::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) return false;
    // The pipelined connection's handshake, checked reply by reply.
    out_buf_.clear();
    const std::size_t replies = encode_handshake(out_buf_, opts_);
    if (!write_all(out_buf_, connect_deadline)) return false;
    bool ok = true;
    for (std::size_t i = 0; i < replies; ++i) {
        resp3::value v;
        std::error_code ec;
        if (!read_reply(v, connect_deadline, ec)) return false;
        if (handshake_error(v)) ok = false; // the pipelined connection reports which
    }
    return ok;
}

bool sync_lane::write_all(std::string_view bytes, clock::time_point deadline) {
    std::size_t written = 0;
    while (written < bytes.size()) {
        const ssize_t n = ::send(fd_, bytes.data() + written, bytes.size() - written,
                                 MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            written += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
            (wait_for(fd_, POLLOUT, deadline) & POLLOUT))
            continue;
        close_locked();
        return false;
    }
    return true;
}

bool sync_lane::read_reply(resp3::value& out, clock::time_point deadline, std::error_code& ec) {
    for (;;) {
        std::size_t used = 0;
        std::error_code pec;
        auto v = parser_.consume(std::string_view(in_buf_).substr(in_pos_), used, pec);
        in_pos_ += used;
        if (pec) {
            close_locked();
            ec = pec;
            return false;
        }
        if (v) {
            drop_parsed(in_buf_, in_pos_, in_buf_.size() + 1); // only when all was parsed
            if (v->kind == resp3::type::push) continue;        // not ours to answer
            last_reply_ = clock::now();
            out = std::move(*v);
            return true;
        }
        drop_parsed(in_buf_, in_pos_, 1);
        // A blocking read (SO_RCVTIMEO slices): EAGAIN means a slice passed without data.
        const auto old = in_buf_.size();
        in_buf_.resize(old + read_chunk);
        const ssize_t n = ::recv(fd_, in_buf_.data() + old, read_chunk, 0);
        in_buf_.resize(old + (n > 0 ? static_cast<std::size_t>(n) : 0));
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && clock::now() < deadline &&
            !stopped_.load(std::memory_order_acquire))
            continue;
        // Closed, reset, or no reply by the deadline: the command's outcome is unknown.
        close_locked();
        ec = make_error_code(stopped_.load(std::memory_order_acquire) ? errc::cancelled
                                                                      : errc::ambiguous);
        return false;
    }
}

} // namespace dlock::net
