// Helpers of the ZooKeeper backend's integration tests: a backend from a URL, a raw C-client
// handle for arranging server state (stray nodes, session expiry), bounded condition waits.
#pragma once

#include "backends.hpp"
#include "redis_fixture.hpp" // free_port()
#include "zk_fixture.hpp"
#include "zookeeper/backend.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
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

/// A plain C-client handle (sync API), connected within 10 s, closed on destruction.
class raw_zk {
public:
    explicit raw_zk(const std::string& host_port, const clientid_t* cid = nullptr) {
        zh_ =
            zookeeper_init2(host_port.c_str(), &ignore_events, 10000, cid, nullptr, 0, &ignore_log);
        if (!zh_ || !eventually([&] { return zoo_state(zh_) == ZOO_CONNECTED_STATE; }))
            throw std::runtime_error("raw ZooKeeper client did not connect to " + host_port);
    }
    ~raw_zk() {
        if (zh_) zookeeper_close(zh_);
    }
    raw_zk(const raw_zk&) = delete;
    raw_zk& operator=(const raw_zk&) = delete;

    int create(const std::string& path, int mode = ZOO_PERSISTENT, const std::string& data = {}) {
        return zoo_create(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                          &ZOO_OPEN_ACL_UNSAFE, mode, nullptr, 0);
    }
    std::vector<std::string> children(const std::string& path) {
        String_vector v{};
        std::vector<std::string> out;
        if (zoo_get_children(zh_, path.c_str(), 0, &v) != ZOK) return out;
        for (int i = 0; i < v.count; ++i)
            out.emplace_back(v.data[i]);
        deallocate_String_vector(&v);
        return out;
    }
    bool exists(const std::string& path, Stat* st = nullptr) {
        Stat s{};
        return zoo_exists(zh_, path.c_str(), 0, st ? st : &s) == ZOK;
    }
    std::string get(const std::string& path) {
        char buf[512];
        int len = sizeof buf;
        Stat s{};
        if (zoo_get(zh_, path.c_str(), 0, buf, &len, &s) != ZOK || len < 0) return {};
        return std::string(buf, static_cast<std::size_t>(len));
    }
    int remove(const std::string& path) { return zoo_delete(zh_, path.c_str(), -1); }

    static void ignore_events(zhandle_t*, int, int, const char*, void*) {}
    static void ignore_log(const char*) {}

private:
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
        eventually(
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
