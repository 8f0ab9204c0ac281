// Helpers shared by the lock tests in this folder (the `lock` suite): watchdog options, server
// statistics, a client's sleeping waiters, and a mutex of either kind. Includes test_util.hpp.
#pragma once

#include "redis/client.hpp"
#include "redis/locks/names.hpp"
#include "test_util.hpp"

#include <dlock/rw_mutex.hpp>

#include <cstddef>
#include <cstdint>
#include <future>
#include <optional>
#include <string>

namespace dlock::test {

inline dlock::client_options watchdog_options(const std::string& url) {
    auto o = fast_options(url);
    o.watchdog_lease = 300ms; // renewed every 100 ms
    return o;
}

inline std::int64_t commands_processed(const redis_server& s) {
    const auto info = s.cli({"INFO", "stats"});
    const auto at = info.find("total_commands_processed:");
    return std::stoll(info.substr(at + 25));
}

/// How many waiters of `c` sleep on `channel` (asked on c's I/O thread, of the node that
/// serves the channel's slot: a Cluster's sharded channels live on their slot's master).
inline std::size_t sleeping_waiters(dlock::client& c, const std::string& channel) {
    auto impl = dlock::detail::access::impl(c);
    std::promise<std::size_t> p;
    asio::post(impl->io(), [&] {
        p.set_value(impl->router()
                        .for_slot(dlock::detail::key_slot(channel))
                        .subscriber()
                        .sleeping_count(channel));
    });
    return p.get_future().get();
}

/// One field of `cmd`'s line in INFO commandstats ("calls", "failed_calls", ...); 0 when the
/// server has not run `cmd` since the last CONFIG RESETSTAT.
inline std::int64_t command_stat(const redis_server& s, const std::string& cmd,
                                 const std::string& field) {
    const auto stats = s.cli({"INFO", "commandstats"});
    const auto line = stats.find("cmdstat_" + cmd + ":");
    if (line == std::string::npos) return 0;
    const auto end = stats.find('\n', line);
    for (auto at = stats.find(field + "=", line); at != std::string::npos && at < end;
         at = stats.find(field + "=", at + 1))
        if (stats[at - 1] == ':' || stats[at - 1] == ',')
            return std::stoll(stats.substr(at + field.size() + 1));
    return 0;
}

inline std::int64_t command_calls(const redis_server& s, const std::string& cmd) {
    return command_stat(s, cmd, "calls");
}

/// A suite sharing one private redis-server; connect() makes a client with watchdog_options.
class shared_redis_suite : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new redis_server(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    static redis_server& server() { return *server_; }
    static std::unique_ptr<dlock::client> connect() {
        return std::make_unique<dlock::client>(watchdog_options(server().url()));
    }

private:
    static inline redis_server* server_ = nullptr;
};

/// The reentrant lock, the simple lock or the read-write lock's write side, by kind.
class either_mutex {
public:
    either_mutex(dlock::client& c, const std::string& name, dlock::lock_kind kind) {
        if (kind == dlock::lock_kind::reentrant)
            r_.emplace(c.make_mutex(name));
        else if (kind == dlock::lock_kind::write)
            w_.emplace(c, name);
        else
            s_.emplace(c.make_simple_mutex(name));
    }
    dlock::basic_mutex* operator->() {
        if (r_) return &*r_;
        if (w_) return &*w_;
        return &*s_;
    }

private:
    std::optional<dlock::mutex> r_;
    std::optional<dlock::simple_mutex> s_;
    std::optional<dlock::write_mutex> w_;
};

inline std::string channel_of(dlock::lock_kind kind, const std::string& name) {
    const char* prefix = kind == dlock::lock_kind::reentrant ? "redisson_lock__channel:{"
                         : kind == dlock::lock_kind::write   ? "redisson_rwlock:{"
                                                             : "dlock_simple__channel:{";
    return prefix + name + "}";
}

} // namespace dlock::test
