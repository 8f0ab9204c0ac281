// The C client's handle of a session: its opening and closing, and its I/O on dlock's I/O
// thread (session.hpp). libzookeeper_st has no thread: zookeeper_interest() says which socket
// events and which deadline it waits for, zookeeper_process() reads, writes and runs the
// completions. Asio's reactor is edge-triggered, and the C client reads one message per
// turn and writes only when told it may, so the waits here are made level-triggered by hand:
// read on while the socket holds more, and try a write before waiting for the socket to
// become writable.
#include "zookeeper/session.hpp"

#include <dlock/error.hpp>

#include <asio/post.hpp>

#include <cerrno>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <zookeeper/zookeeper.h>

namespace dlock::detail::zk {
namespace {

// The C client's log lines are dropped: messages carry dlock's own words
// (session::last_error()), and nothing is written to stderr. Connection events reach the
// client's log sink from session.cpp.
void log_sink(const char*) {}

/// The socket holds a message, its end or an error for the C client to see.
bool more_to_read(int fd) {
    char c = 0;
    const auto n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n >= 0) return true;
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != EBADF &&
           errno != ENOTSOCK;
}

/// TCP_CORK on or off (best effort: a failure only costs the segments it would have saved).
void cork(int fd, bool on) {
    const int v = on ? 1 : 0;
    ::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &v, sizeof v);
}

/// Connected, or between the TCP connect and the server's answer to the session handshake:
/// the socket the C client reads is the one that was watched.
bool has_connection(int state) {
    return state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE ||
           state == ZOO_ASSOCIATING_STATE;
}

} // namespace

std::shared_ptr<session> session::start(asio::any_io_executor ex, const zk_url& url,
                                        std::error_code& ec, std::string* why,
                                        const log_options& log) {
    ec.clear();
    std::shared_ptr<session> s(new session(std::move(ex), url, log));
    if (url.deterministic) zoo_deterministic_conn_order(1);
    const auto cs = url.connect_string();
    errno = 0;
    s->zh_ = zookeeper_init2(cs.c_str(), &session::global_watcher,
                             static_cast<int>(url.session_timeout.count()), nullptr, s.get(), 0,
                             &log_sink);
    if (!s->zh_) {
        ec = errc::unavailable;
        if (why)
            *why = "cannot open a ZooKeeper session to " + cs + ": " +
                   (errno ? std::error_code(errno, std::generic_category()).message()
                          : std::string("the C client refused the host list"));
        s->ended_ = true;
        return nullptr;
    }
    // The C client resolves the host list again each time it is asked what it waits for by
    // default (a getaddrinfo with a netlink dump per request and reply: most of a lock pair's
    // client CPU); once a second still follows DNS changes.
    zoo_set_servers_resolution_delay(s->zh_, 1000);
    s->schedule_tick();
    // The connect is made by the first zookeeper_interest(), on the I/O thread.
    asio::post(s->ex_, [w = std::weak_ptr<session>(s)] {
        if (auto p = w.lock()) p->pump();
    });
    return s;
}

void session::close() noexcept {
    if (!zh_) return;
    auto* zh = zh_;
    zh_ = nullptr;
    ended_.store(true, std::memory_order_release);
    connected_.store(false, std::memory_order_release);
    drop_socket(); // before the C client closes it: never a wait on a number reused elsewhere
    io_timer_.reset();
    // Sends the close request when connected (the ephemeral nodes go at once), fails what is
    // pending with ZCLOSING (those completions post), and closes the socket.
    zookeeper_close(zh);
}

void session::cork_this_turn() {
    if (corked_fd_ >= 0 || socket_fd_ < 0) return;
    corked_fd_ = socket_fd_;
    cork(corked_fd_, true);
    asio::post(ex_, [w = weak_from_this()] {
        if (auto s = w.lock()) s->uncork();
    });
}

void session::uncork() noexcept {
    if (corked_fd_ < 0) return;
    cork(corked_fd_, false); // sends what the turn wrote
    corked_fd_ = -1;
}

void session::drop_socket() noexcept {
    // Closed by the C client (its number may be another descriptor's by now): left alone.
    corked_fd_ = -1;
    ++socket_gen_;
    read_armed_ = false;
    write_armed_ = false;
    socket_fd_ = -1;
    if (!socket_) return;
    std::error_code ec;
    socket_->cancel(ec);
    (void)socket_->release(); // the C client's socket: it closes it, not Asio
    socket_.reset();
}

void session::watch_socket(int fd) {
    drop_socket();
    if (fd < 0) return;
    std::error_code ec;
    socket_.emplace(ex_);
    socket_->assign(fd, ec);
    if (ec) {
        socket_.reset(); // a socket the C client already closed: its next turn says so
        return;
    }
    socket_fd_ = fd;
}

void session::arm(int event) {
    bool& armed = event == ZOOKEEPER_READ ? read_armed_ : write_armed_;
    if (armed) return;
    armed = true;
    socket_->async_wait(event == ZOOKEEPER_READ ? asio::posix::descriptor_base::wait_read
                                                : asio::posix::descriptor_base::wait_write,
                        [w = weak_from_this(), gen = socket_gen_, event](std::error_code ec) {
                            auto s = w.lock();
                            if (!s || ec || gen != s->socket_gen_) return;
                            (event == ZOOKEEPER_READ ? s->read_armed_ : s->write_armed_) = false;
                            s->on_io(event);
                        });
}

void session::pump() {
    int interest = 0;
    timeval tv{};
    // At most a few rounds: a write tried at once can leave more to write.
    for (int round = 0; round < 4; ++round) {
        if (!zh_) return;
        int fd = -1;
        interest = 0;
        tv = {};
        const int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
        if (rc == ZINVALIDSTATE || rc == ZBADARGUMENTS) {
            // Expired or refused for good: the session event is on its way (on_state).
            drop_socket();
            return;
        }
        if (fd < 0 || interest == 0) {
            drop_socket(); // no socket, or one the C client just closed (a timeout)
            break;
        }
        const int state = zoo_state(zh_);
        const bool settled = state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE;
        // A socket not yet settled is watched anew at each turn: a connect may have failed
        // and its number been reused by the next attempt, and a fresh registration reports
        // readiness that came before it.
        if (fd != socket_fd_ || !settled) watch_socket(fd);
        if (!settled || (interest & ZOOKEEPER_WRITE) == 0) break;
        // Connected with something to send: the socket is writable unless its buffer is full,
        // and an edge-triggered wait would not report a socket that already is.
        zookeeper_process(zh_, ZOOKEEPER_WRITE);
    }
    if (!zh_) return;
    if (socket_) {
        if (interest & ZOOKEEPER_READ) arm(ZOOKEEPER_READ);
        if (interest & ZOOKEEPER_WRITE) arm(ZOOKEEPER_WRITE);
    }
    // The C client's next deadline (a ping, a receive timeout, a reconnect's delay). A timer
    // that fires early costs one idle turn and asks again; one set later than asked could miss
    // a ping. So it is only ever moved earlier, which also spares a timer syscall per turn.
    const auto deadline =
        clock::now() + std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec);
    if (io_timer_ && deadline < io_deadline_) {
        io_deadline_ = deadline;
        io_timer_->expires_at(deadline);
        io_timer_->async_wait([w = weak_from_this()](std::error_code ec) {
            if (ec) return;
            auto s = w.lock();
            if (!s) return;
            s->io_deadline_ = clock::time_point::max();
            s->on_io(0);
        });
    }
}

void session::on_io(int events) {
    if (!zh_) return;
    zookeeper_process(zh_, events);
    if (events & ZOOKEEPER_READ) {
        // One message per turn: read on while the socket holds more. After 64, the rest gets
        // a turn of its own, so that other work on the I/O thread is not held up (the wait
        // is edge-triggered and would not report what is already there).
        int turns = 0;
        while (zh_ && socket_fd_ >= 0 && has_connection(zoo_state(zh_)) &&
               more_to_read(socket_fd_)) {
            if (++turns > 64) {
                asio::post(ex_, [w = weak_from_this()] {
                    if (auto s = w.lock()) s->on_io(ZOOKEEPER_READ);
                });
                break;
            }
            zookeeper_process(zh_, ZOOKEEPER_READ);
        }
    }
    pump();
}

} // namespace dlock::detail::zk
