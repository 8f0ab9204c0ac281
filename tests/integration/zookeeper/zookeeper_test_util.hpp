// Helpers of the ZooKeeper backend's integration tests: a backend from a URL, a raw C-client
// handle for arranging server state (stray nodes, session expiry), bounded condition waits.
// The C client is dlock's, libzookeeper_st: the raw handle is driven here, on the test's thread.
#pragma once

#include "backends.hpp"
#include "redis_fixture.hpp" // free_port()
#include "zk_fixture.hpp"
#include "zookeeper/backend.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <poll.h>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>
#include <zookeeper/zookeeper.h>

#define DLOCK_SKIP_WITHOUT_ZOOKEEPER()                                                             \
    if (!dlock::test::zookeeper_available())                                                       \
    GTEST_SKIP() << "java or Debian's zookeeper package not installed"

namespace dlock::test {

using namespace std::chrono_literals;

/// The ZooKeeper backend for `url` (asserts it was made).
inline std::shared_ptr<detail::zk::zk_backend> zk_backend_for(const std::string& url) {
    std::error_code ec;
    std::string why;
    auto b = detail::make_zookeeper_backend(url, ec, &why);
    EXPECT_FALSE(ec) << why;
    return std::dynamic_pointer_cast<detail::zk::zk_backend>(b);
}

/// Options waiting up to `w` for a lock of `kind`.
inline acquire_options waiting(std::chrono::milliseconds w, lock_kind kind = lock_kind::reentrant) {
    acquire_options o;
    o.wait = w;
    o.kind = kind;
    return o;
}

/// Polls `pred` every 5 ms until it holds or `budget` passed (a bounded wait for a state
/// the server reaches asynchronously, not a sleep standing in for synchronisation).
inline bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds budget = 10s) {
    const auto until = std::chrono::steady_clock::now() + budget;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

/// Forks `n` processes (before this process has threads of its own: call it before any
/// backend exists), each running `body` and exiting 0 when it returns true; waits for them and
/// returns how many failed.
inline int run_processes(int n, const std::function<bool()>& body) {
    std::vector<pid_t> kids;
    for (int p = 0; p < n; ++p) {
        const pid_t pid = ::fork();
        if (pid < 0) break;
        if (pid == 0) ::_exit(body() ? 0 : 1);
        kids.push_back(pid);
    }
    int failed = n - static_cast<int>(kids.size());
    for (const pid_t pid : kids) {
        int status = 0;
        ::waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    }
    return failed;
}

/// One turn of a C-client handle (libzookeeper_st: no thread of its own), as the library's
/// own command-line client runs it: zookeeper_interest, poll for at most `max_wait`,
/// zookeeper_process. Returns false when the handle is unrecoverable (expired, refused).
inline bool turn_zk(zhandle_t* zh, std::chrono::milliseconds max_wait) {
    int fd = -1;
    int interest = 0;
    timeval tv{};
    if (zookeeper_interest(zh, &fd, &interest, &tv) == ZINVALIDSTATE) return false;
    const auto wait_ms = static_cast<int>(
        std::min<long long>(tv.tv_sec * 1000LL + tv.tv_usec / 1000, max_wait.count()));
    pollfd p{fd, 0, 0};
    if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
    if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
    int events = 0;
    if (fd >= 0 && p.events) {
        if (::poll(&p, 1, wait_ms) > 0) {
            if (p.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
            if (p.revents & (POLLOUT | POLLHUP | POLLERR)) events |= ZOOKEEPER_WRITE;
        }
    } else if (wait_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms)); // a reconnect's delay
    }
    zookeeper_process(zh, events);
    return true;
}

/// Turns `zh` until `pred` holds or `budget` passed. Returns pred().
inline bool drive_zk(zhandle_t* zh, const std::function<bool()>& pred,
                     std::chrono::milliseconds budget) {
    const auto until = std::chrono::steady_clock::now() + budget;
    while (!pred()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        if (left <= 0ms || !turn_zk(zh, std::min<std::chrono::milliseconds>(left, 50ms)))
            return pred();
    }
    return true;
}

/// A plain C-client handle for arranging server state: each call waits (driving the handle)
/// up to 10 s for its answer. Connected within 10 s; closed on destruction.
class raw_zk {
public:
    explicit raw_zk(std::string host_port)
        : host_port_(std::move(host_port)) {
        open();
    }
    ~raw_zk() {
        if (zh_) zookeeper_close(zh_);
    }
    raw_zk(const raw_zk&) = delete;
    raw_zk& operator=(const raw_zk&) = delete;

    int create(const std::string& path, int mode = ZOO_PERSISTENT, const std::string& data = {}) {
        answer a;
        return wait(a,
                    zoo_acreate(ready(), path.c_str(), data.data(), static_cast<int>(data.size()),
                                &ZOO_OPEN_ACL_UNSAFE, mode, &on_string, &a));
    }
    std::vector<std::string> children(const std::string& path) {
        answer a;
        if (wait(a, zoo_aget_children(ready(), path.c_str(), 0, &on_strings, &a)) != ZOK) return {};
        return a.children;
    }
    bool exists(const std::string& path, Stat* st = nullptr) {
        answer a;
        const bool found = wait(a, zoo_aexists(ready(), path.c_str(), 0, &on_stat, &a)) == ZOK;
        if (found && st) *st = a.stat;
        return found;
    }
    std::string get(const std::string& path) {
        answer a;
        if (wait(a, zoo_aget(ready(), path.c_str(), 0, &on_data, &a)) != ZOK) return {};
        return a.data;
    }
    int remove(const std::string& path) {
        answer a;
        return wait(a, zoo_adelete(ready(), path.c_str(), -1, &on_void, &a));
    }

    static void ignore_events(zhandle_t*, int, int, const char*, void*) {}
    static void ignore_log(const char*) {}

private:
    struct answer {
        bool done = false;
        int rc = ZOK;
        std::vector<std::string> children{};
        std::string data{};
        Stat stat{};
    };
    void open() {
        if (zh_) zookeeper_close(zh_);
        zh_ = zookeeper_init2(host_port_.c_str(), &ignore_events, 10000, nullptr, nullptr, 0,
                              &ignore_log);
        if (!zh_ || !drive_zk(
                        zh_, [&] { return zoo_state(zh_) == ZOO_CONNECTED_STATE; }, 10s))
            throw std::runtime_error("raw ZooKeeper client did not connect to " + host_port_);
    }
    /// Nobody turned the handle while the test did other things: let it notice a connection
    /// it let time out (it reconnects within its session) or a session the server expired
    /// (a new one), so that the request goes out on a live connection.
    zhandle_t* ready() {
        turn_zk(zh_, 0ms);
        if (zoo_state(zh_) == ZOO_EXPIRED_SESSION_STATE ||
            !drive_zk(
                zh_, [&] { return zoo_state(zh_) == ZOO_CONNECTED_STATE; }, 10s))
            open();
        return zh_;
    }
    int wait(answer& a, int rc) {
        if (rc != ZOK) return rc;
        if (!drive_zk(
                zh_, [&] { return a.done; }, 10s))
            return ZOPERATIONTIMEOUT;
        return a.rc;
    }
    static answer& of(const void* d) { return *static_cast<answer*>(const_cast<void*>(d)); }
    static void on_string(int rc, const char*, const void* d) {
        of(d).rc = rc;
        of(d).done = true;
    }
    static void on_void(int rc, const void* d) {
        of(d).rc = rc;
        of(d).done = true;
    }
    static void on_stat(int rc, const Stat* st, const void* d) {
        if (rc == ZOK && st) of(d).stat = *st;
        of(d).rc = rc;
        of(d).done = true;
    }
    static void on_data(int rc, const char* v, int len, const Stat*, const void* d) {
        if (rc == ZOK && v && len > 0) of(d).data.assign(v, static_cast<std::size_t>(len));
        of(d).rc = rc;
        of(d).done = true;
    }
    static void on_strings(int rc, const String_vector* v, const void* d) {
        if (rc == ZOK && v)
            for (int i = 0; i < v->count; ++i)
                of(d).children.emplace_back(v->data[i]);
        of(d).rc = rc;
        of(d).done = true;
    }

    std::string host_port_;
    zhandle_t* zh_ = nullptr;
};

/// Expires `b`'s current session the classic way: a second handle with the same session id
/// and password, then closed (the server ends the session; the victim gets Expired).
inline void expire_session(const std::string& host_port, detail::zk::zk_backend& b) {
    auto s = b.current_session();
    ASSERT_TRUE(s);
    auto [id, pw] = s->credentials();
    ASSERT_EQ(pw.size(), 16u);
    clientid_t cid{};
    cid.client_id = id;
    std::memcpy(cid.passwd, pw.data(), sizeof cid.passwd);
    // A twin that joins the session and closes it ends the session. But the owner, whose
    // connection the twin displaced, may reconnect first and take the session back; the twin's
    // close then ends nothing. So join again until the server answers "expired".
    for (int i = 0; i < 20; ++i) {
        zhandle_t* zh = zookeeper_init2(host_port.c_str(), &raw_zk::ignore_events, 10000, &cid,
                                        nullptr, 0, &raw_zk::ignore_log);
        ASSERT_NE(zh, nullptr);
        int state = 0;
        drive_zk(
            zh,
            [&] {
                state = zoo_state(zh);
                return state == ZOO_CONNECTED_STATE || state == ZOO_EXPIRED_SESSION_STATE;
            },
            std::chrono::seconds(5));
        zookeeper_close(zh); // when connected: closes the session
        if (state == ZOO_EXPIRED_SESSION_STATE) return;
    }
    FAIL() << "the session never expired";
}

} // namespace dlock::test
