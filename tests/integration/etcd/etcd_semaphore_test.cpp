// The semaphore on etcd (src/etcd: acquire.cpp's semaphore, queries.cpp) against a real
// member: keys "<name>/semaphore/<unix ns>" carry the permits and the client's lease; N permits
// are never exceeded by 8 clients; a release wakes a waiter within a second; a revoked lease
// (a holder that died) gives its permit back; a different number of permits is refused; status
// names every holder and the count. (What every backend's semaphore promises with one permit is
// in the conformance suite; a killed `dlock exec` holder is in tests/cli/cli_etcd_test.cpp.)
#include "critical_section_checker.hpp"
#include "etcd_test_util.hpp"
#include "process.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <regex>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using dlock::lock_kind;

class etcd_semaphore : public dlock::test::etcd_member_test {
protected:
    static dlock::acquire_options permits(unsigned n, std::chrono::milliseconds wait) {
        return {.wait = wait, .kind = lock_kind::semaphore, .permits = n};
    }
};

TEST_F(etcd_semaphore, keys_carry_the_permits_and_the_lease) {
    auto c = connect();
    auto held = c->acquire("pool", permits(3, 5s));
    ASSERT_TRUE(held);
    auto [json, rc] = etcd_->etcdctl({"get", "--prefix", "pool/", "-w", "json"});
    ASSERT_EQ(rc, 0) << json;
    // etcdctl's JSON has keys and values in base64: the plain output shows them.
    auto [text, rc2] = etcd_->etcdctl({"get", "--prefix", "pool/"});
    ASSERT_EQ(rc2, 0);
    EXPECT_TRUE(std::regex_match(text, std::regex("pool/semaphore/[0-9]{19}\n3"))) << text;
    EXPECT_TRUE(std::regex_search(json, std::regex("\"lease\":[1-9][0-9]*"))) << json;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(json, m, std::regex("\"create_revision\":([0-9]+)"))) << json;
    EXPECT_EQ(held.token(), std::stoull(m[1].str()));
}

// 8 clients, 3 permits, 5 rounds each: never more than 3 holders at once, every round served.
TEST_F(etcd_semaphore, permits_are_never_exceeded) {
    constexpr int clients = 8, rounds = 5;
    std::atomic<int> inside{0}, most{0}, served{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < clients; ++i)
        ts.emplace_back([&] {
            auto c = connect();
            for (int r = 0; r < rounds; ++r) {
                auto held = c->acquire("three", permits(3, 20s));
                ASSERT_TRUE(held);
                const int now = ++inside;
                int seen = most.load();
                while (now > seen && !most.compare_exchange_weak(seen, now)) {
                }
                std::this_thread::sleep_for(10ms); // the work under the permit
                --inside;
                held.release();
                ++served;
            }
        });
    for (auto& t : ts)
        t.join();
    EXPECT_EQ(served.load(), clients * rounds);
    EXPECT_LE(most.load(), 3);
    EXPECT_GE(most.load(), 2) << "the permits were never shared";
}

// 1 permit, 8 busy clients, 40 rounds each, nothing between a release and the next acquisition:
// waiters whose watch is created after other writes reread their line while deletions arrive
// on the watch, and a deletion the watch brought before an older read's answer must still count
// (the first version of the one-watch wait lost it, and every client waited with no holder).
TEST_F(etcd_semaphore, one_permit_among_busy_clients_never_stalls) {
    constexpr int clients = 8, rounds = 40;
    dlock::test::critical_section_checker check;
    std::atomic<int> served{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < clients; ++i)
        ts.emplace_back([&] {
            auto c = connect();
            for (int r = 0; r < rounds; ++r) {
                auto held = c->acquire("busy", permits(1, 10s));
                ASSERT_TRUE(held) << "round " << r;
                { auto in = check.enter_write(); }
                held.release();
                ++served;
            }
        });
    for (auto& t : ts)
        t.join();
    EXPECT_EQ(served.load(), clients * rounds);
    EXPECT_EQ(check.violations(), 0);
}

// All permits taken: a waiter waits, and one release lets it in within a second.
TEST_F(etcd_semaphore, a_release_wakes_a_waiter) {
    auto a = connect(), b = connect();
    auto one = a->acquire("two", permits(2, 5s));
    auto two = a->acquire("two", permits(2, 5s));
    ASSERT_TRUE(one && two);
    EXPECT_FALSE(b->acquire("two", permits(2, 0ms)));
    auto waiter = std::async(std::launch::async, [&] {
        auto l = b->acquire("two", permits(2, 10s));
        return std::make_pair(std::move(l), clock_type::now());
    });
    ASSERT_EQ(waiter.wait_for(300ms), std::future_status::timeout) << "a third permit";
    const auto released_at = clock_type::now();
    two.release();
    ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
    auto [held, at] = waiter.get();
    EXPECT_TRUE(held);
    EXPECT_LT(at - released_at, 1s);
}

// No herd: a waiter reads its line with its put and then only counts the deletions its one
// watch brings, so a release costs etcd the releaser's Txn and nothing per waiter. Two hand-offs
// among 6 waiters are counted on the member's own gRPC metrics: 2 Txns (the two releases'
// deletes), where waiters that count again on every deletion would add 5 + 4 Txns.
TEST_F(etcd_semaphore, a_release_costs_etcd_nothing_per_waiter) {
    constexpr int waiting = 6;
    auto& member = etcd_->member(0);
    const auto watchers = [&] { return member.metric("etcd_debugging_mvcc_watcher_total"); };
    const auto txns = [&] {
        return member.metric("grpc_server_handled_total", "grpc_method=\"Txn\"");
    };
    auto holder = connect();
    auto held = holder->acquire("line", permits(1, 5s));
    ASSERT_TRUE(held);
    ASSERT_TRUE(dlock::test::wait_until([&] { return watchers() == 1; }, 5s)); // the hold's
    std::vector<std::unique_ptr<dlock::client>> clients;
    std::vector<std::future<dlock::lease>> waiters;
    for (int i = 0; i < waiting; ++i) {
        clients.push_back(connect());
        auto* c = clients.back().get();
        waiters.push_back(
            std::async(std::launch::async, [c] { return c->acquire("line", permits(1, 20s)); }));
        // One at a time, so the line's order is the vector's; a waiter's watch comes after
        // its line was read.
        ASSERT_TRUE(dlock::test::wait_until([&] { return watchers() == i + 2; }, 5s));
    }
    const auto before = txns();
    ASSERT_GE(before, 0);
    held.release();
    ASSERT_EQ(waiters[0].wait_for(5s), std::future_status::ready);
    auto first = waiters[0].get();
    ASSERT_TRUE(first);
    first.release();
    ASSERT_EQ(waiters[1].wait_for(5s), std::future_status::ready);
    auto second = waiters[1].get();
    ASSERT_TRUE(second);
    EXPECT_EQ(txns() - before, 2);
    second.release();
    for (std::size_t i = 2; i < waiters.size(); ++i) {
        ASSERT_EQ(waiters[i].wait_for(5s), std::future_status::ready);
        auto l = waiters[i].get();
        EXPECT_TRUE(l);
        l.release();
    }
}

// A holder whose lease ends (revoked here, as when its process died and the TTL ran out) gives
// its permit back, and its loss is signalled.
TEST_F(etcd_semaphore, a_revoked_lease_returns_its_permit) {
    auto a = connect(), b = connect();
    auto held = a->acquire("one", permits(1, 5s));
    ASSERT_TRUE(held);
    auto waiter =
        std::async(std::launch::async, [&] { return b->acquire("one", permits(1, 10s)); });
    std::error_code ec;
    ASSERT_TRUE(dlock::test::wait_until(
        [&] { return b->inspect("one", lock_kind::semaphore, ec).contenders.size() == 2; }, 5s))
        << ec.message();
    ASSERT_EQ(waiter.wait_for(0ms), std::future_status::timeout);
    const auto st = b->inspect("one", lock_kind::semaphore, ec);
    ASSERT_EQ(st.contenders.size(), 2U) << ec.message();
    auto [out, rc] = etcd_->etcdctl({"lease", "revoke", st.contenders.front().session});
    ASSERT_EQ(rc, 0) << out;
    ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(waiter.get());
    EXPECT_TRUE(dlock::test::wait_until([&] { return held.lost(); }, 2s));
}

// Every client of one semaphore names the same number of permits: another number is refused
// (invalid_argument, the reason in the last error), and leaves no key behind.
TEST_F(etcd_semaphore, another_number_of_permits_is_refused) {
    auto a = connect(), b = connect();
    auto held = a->acquire("agreed", permits(2, 5s));
    ASSERT_TRUE(held);
    std::error_code ec;
    EXPECT_FALSE(b->acquire("agreed", permits(5, 1s), ec));
    EXPECT_EQ(ec, dlock::errc::invalid_argument) << ec.message();
    EXPECT_NE(b->last_error_detail().find("held with 2 permits"), std::string::npos)
        << b->last_error_detail();
    EXPECT_FALSE(b->acquire("agreed", permits(0, 1s), ec));
    EXPECT_EQ(ec, dlock::errc::invalid_argument);
    EXPECT_TRUE(dlock::test::wait_until(
        [&] { return a->inspect("agreed", lock_kind::semaphore, ec).contenders.size() == 1; }, 2s));
}

// status: every holder first (holds), then the waiters, the permits and the count.
TEST_F(etcd_semaphore, status_names_holders_and_waiters) {
    auto a = connect(), b = connect();
    auto one = a->acquire("shown", permits(2, 5s));
    auto two = b->acquire("shown", permits(2, 5s));
    ASSERT_TRUE(one && two);
    auto waiter =
        std::async(std::launch::async, [&] { return b->acquire("shown", permits(2, 10s)); });
    std::error_code ec;
    ASSERT_TRUE(dlock::test::wait_until(
        [&] { return a->inspect("shown", lock_kind::semaphore, ec).contenders.size() == 3; }, 5s));
    const auto st = a->inspect("shown", lock_kind::semaphore, ec);
    EXPECT_EQ(st.kind, "semaphore");
    EXPECT_EQ(st.details.at("permits"), "2");
    EXPECT_EQ(st.detail, "2 of 2 permit(s) in use, 1 waiting");
    EXPECT_TRUE(st.contenders[0].holds);
    EXPECT_TRUE(st.contenders[1].holds);
    EXPECT_FALSE(st.contenders[2].holds);
    EXPECT_EQ(st.contenders[0].token, one.token());
    one.release();
    ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(waiter.get());
}

} // namespace
