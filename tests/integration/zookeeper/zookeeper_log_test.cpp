// The log sink on ZooKeeper's own events (src/zookeeper/session.cpp): the session's connection
// cut (through zk_fault_proxy) and re-established within the session gives "connection lost,
// reconnecting" then "reconnected" (backend zookeeper, connection session), and the hold stays.
// The events every backend has ("lock lost", connects) are tests/conformance/log_test.cpp's.
#include "log_collector.hpp"
#include "zookeeper_fault_proxy.hpp"
#include "zookeeper_test_util.hpp"

#include <dlock/dlock.hpp>

#include <string>

namespace dlock::test {
namespace {

TEST(zookeeper_log, a_cut_connection_is_logged_lost_then_reconnected) {
    DLOCK_SKIP_WITHOUT_ZOOKEEPER();
    zk_server server(zk_options{.tick_ms = 1000, .extra_config = {}}); // sessions up to 20 s
    zk_fault_proxy proxy(server.port());
    collecting_sink log;
    client c("zk://127.0.0.1:" + std::to_string(proxy.port()) +
                 "?session_timeout=8000&connect_timeout=10000",
             log_options{.sink = log.sink()});
    auto held = c.acquire("logged", {.wait = 5s});
    ASSERT_TRUE(held);
    proxy.refuse(true);
    proxy.cut();
    ASSERT_TRUE(eventually(
        [&] { return log.has("warning", "connection lost, reconnecting backend=zookeeper"); },
        10s));
    EXPECT_TRUE(log.has("warning", "connection=session error=disconnected")) << log.all();
    proxy.refuse(false);
    ASSERT_TRUE(
        eventually([&] { return log.has("warning", "reconnected backend=zookeeper"); }, 20s));
    EXPECT_FALSE(held.lost()) << "a reconnect within the session keeps the hold";
    EXPECT_GE(c.metrics().reconnects, 1U);
}

} // namespace
} // namespace dlock::test
