// Shared helpers of the integration tests: skip macros and client options with short bounds.
#pragma once

#include "redis_fixture.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#define DLOCK_SKIP_WITHOUT_REDIS()                                                                 \
    if (!dlock::test::redis_available()) GTEST_SKIP() << "redis-server/redis-cli not installed"

namespace dlock::test {

using namespace std::chrono_literals;

/// Options for `url` with timeouts short enough that a broken test fails fast.
inline client_options fast_options(const std::string& url) {
    auto o = parse_url(url);
    o.connect_timeout = 1s;
    o.command_timeout = 1s;
    o.reconnect_min = 5ms;
    o.reconnect_max = 50ms;
    return o;
}

/// True once a PING through `c` succeeds (for waiting, with eventually(), on a reconnect).
inline bool ping_ok(client& c) {
    std::error_code ec;
    const std::string_view ping[] = {"PING"};
    auto v = dlock::redis::command(c, ping, ec);
    return !ec && v.str == "PONG";
}

/// True when exactly one connection is subscribed to `channel` on `s`.
inline bool one_subscriber(const redis_server& s, const std::string& channel) {
    return s.cli({"PUBSUB", "NUMSUB", channel}).find("\n1") != std::string::npos;
}

/// A thread blocked in `lock(30 s)` on `name` through `c`; records when it got the lock and
/// releases it at once. join() before reading `acquired_at`.
class blocked_waiter {
public:
    blocked_waiter(client& c, std::string name)
        : thread_([&c, name = std::move(name), this] {
            mutex m = c.make_mutex(name);
            m.lock(dlock::fixed_lease{30s});
            acquired_at = std::chrono::steady_clock::now();
            acquired = true;
            m.unlock();
        }) {}
    ~blocked_waiter() {
        if (thread_.joinable()) thread_.join();
    }
    void join() { thread_.join(); }
    std::atomic<bool> acquired{false};
    std::chrono::steady_clock::time_point acquired_at{};

private:
    std::thread thread_;
};

} // namespace dlock::test
