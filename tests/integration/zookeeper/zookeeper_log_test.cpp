// The log sink on ZooKeeper's own events (src/zookeeper/session.cpp): the session's connection
// cut (through zk_fault_proxy) and re-established within the session gives "connection lost,
// reconnecting" then "reconnected" (backend zookeeper, connection session), and the hold stays.
// The events every backend has ("lock lost", connects) are tests/conformance/log_test.cpp's.
#include "zookeeper_fault_proxy.hpp"
#include "zookeeper_test_util.hpp"

#include <dlock/dlock.hpp>

#include <mutex>
#include <string>
#include <vector>

namespace dlock::test {
namespace {

class messages {
public:
    log_options options() {
        return {.sink = [this](const log_record& r) {
            std::string line(r.message);
            for (const auto& f : r.fields)
                line += ' ' + std::string(f.key) + '=' + std::string(f.value);
            std::lock_guard lk(mu_);
            lines_.push_back(std::move(line));
        }};
    }
    /// Whether a line starts with `message` and carries `field` ("key=value").
    bool has(const std::string& message, const std::string& field) const {
        std::lock_guard lk(mu_);
        for (const auto& l : lines_)
            if (l.starts_with(message) && l.find(field) != std::string::npos) return true;
        return false;
    }

private:
    mutable std::mutex mu_;
    std::vector<std::string> lines_;
};

TEST(zookeeper_log, a_cut_connection_is_logged_lost_then_reconnected) {
    DLOCK_SKIP_WITHOUT_ZOOKEEPER();
    zk_server server(zk_options{.tick_ms = 1000, .extra_config = {}}); // sessions up to 20 s
    zk_fault_proxy proxy(server.port());
    messages log;
    client c("zk://127.0.0.1:" + std::to_string(proxy.port()) +
                 "?session_timeout=8000&connect_timeout=10000",
             log.options());
    auto held = c.acquire("logged", {.wait = 5s});
    ASSERT_TRUE(held);
    proxy.refuse(true);
    proxy.cut();
    ASSERT_TRUE(eventually(
        [&] { return log.has("connection lost, reconnecting", "connection=session"); }, 10s));
    EXPECT_TRUE(log.has("connection lost, reconnecting", "backend=zookeeper"));
    proxy.refuse(false);
    ASSERT_TRUE(eventually([&] { return log.has("reconnected", "backend=zookeeper"); }, 20s));
    EXPECT_FALSE(held.lost()) << "a reconnect within the session keeps the hold";
    EXPECT_GE(c.metrics().reconnects, 1U);
}

} // namespace
} // namespace dlock::test
