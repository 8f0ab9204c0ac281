// The log sink on etcd's own event (src/etcd/session.cpp): the member that keeps the lease
// alive is killed; the sink gets "connection lost, reconnecting" naming that member, then
// "reconnected" naming another, and the hold is not lost. The events every backend has ("lock
// lost" and the connection counters) are tests/conformance/log_test.cpp's.
#include "etcd_fixture.hpp"
#include "redis_fixture.hpp" // dlock::test::eventually

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

struct record {
    dlock::log_level level;
    std::string message, address, connection;
};

class records {
public:
    dlock::log_options options() {
        return {.sink =
                    [this](const dlock::log_record& r) {
                        record c{r.level, std::string(r.message), {}, {}};
                        for (const auto& f : r.fields) {
                            if (f.key == "address") c.address = f.value;
                            if (f.key == "connection") c.connection = f.value;
                        }
                        std::lock_guard lk(mu_);
                        all_.push_back(std::move(c));
                    },
                .level = dlock::log_level::debug};
    }
    /// The first record with `message`, waiting up to `budget` for it.
    std::optional<record> wait_for(const std::string& message, std::chrono::milliseconds budget) {
        std::optional<record> found;
        dlock::test::eventually(
            [&] {
                std::lock_guard lk(mu_);
                for (const auto& r : all_)
                    if (r.message == message) {
                        found = r;
                        return true;
                    }
                return false;
            },
            budget);
        return found;
    }

private:
    std::mutex mu_;
    std::vector<record> all_;
};

TEST(etcd_log, a_killed_member_is_named_and_the_next_one_takes_over) {
    if (!dlock::test::etcd_available()) GTEST_SKIP() << "etcd or etcdctl not installed";
    dlock::test::etcd_cluster etcd(3);
    records log;
    dlock::client c(etcd.url("", "?ttl=3&connect_timeout=2000"), log.options());
    auto held = c.acquire("logged", {.wait = 5s});
    ASSERT_TRUE(held);
    const auto first = log.wait_for("connected", 5s);
    ASSERT_TRUE(first) << "no debug record of the keep-alive's member";
    EXPECT_EQ(first->connection, "keepalive");
    // gRPC's peer: "ipv4:127.0.0.1:PORT"; the member with that client port is killed.
    std::optional<std::size_t> victim;
    for (std::size_t i = 0; i < etcd.size(); ++i)
        if (first->address.ends_with(":" + std::to_string(etcd.member(i).client_port())))
            victim = i;
    ASSERT_TRUE(victim) << first->address;
    etcd.member(*victim).kill();
    const auto lost = log.wait_for("connection lost, reconnecting", 5s);
    ASSERT_TRUE(lost);
    EXPECT_EQ(lost->level, dlock::log_level::warning);
    EXPECT_EQ(lost->address, first->address);
    const auto back = log.wait_for("reconnected", 5s);
    ASSERT_TRUE(back);
    EXPECT_NE(back->address, first->address);
    EXPECT_FALSE(held.lost());
    const auto m = c.metrics();
    EXPECT_EQ(m.connects, 1U);
    EXPECT_GE(m.reconnects, 1U);
}

} // namespace
