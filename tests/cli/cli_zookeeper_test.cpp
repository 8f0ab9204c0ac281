// The dlock command on zk:// URLs: exec runs a command under the lock (DLOCK_FENCING_TOKEN = the
// node's czxid), status shows holder and waiters with sessions, list finds the lock, unlock
// --force deletes the holder's node, a bad URL exits 78, and the demo runs with its lock on
// a private ZooKeeper.
#include "elect_check.hpp"
#include "once_race.hpp"
#include "zookeeper/zookeeper_peer.hpp"
#include "zookeeper/zookeeper_test_util.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

struct run_result {
    int code = -1;
    std::string out;
};

/// Runs the dlock binary with `args` through the shell (stdout and stderr captured).
run_result dlock_cli(const std::string& args) {
    const std::string cmd = std::string(DLOCK_CLI_BINARY) + " " + args + " 2>&1";
    run_result r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf{};
    while (const auto n = std::fread(buf.data(), 1, buf.size(), p))
        r.out.append(buf.data(), n);
    const int status = ::pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    return r;
}

class zk_cli : public ::testing::Test {
protected:
    void SetUp() override {
        DLOCK_SKIP_WITHOUT_ZOOKEEPER();
        server_ = std::make_unique<zk_server>();
        url_ = "--url '" + server_->url() + "?connect_timeout=3000'";
    }
    std::unique_ptr<zk_server> server_;
    std::string url_;
};

TEST_F(zk_cli, exec_status_list_and_forced_unlock) {
    auto r =
        dlock_cli(url_ + " exec --wait 5s jobs/nightly -- sh -c 'echo token=$DLOCK_FENCING_TOKEN'");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("token="), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("token=\n"), std::string::npos) << "a czxid token: " << r.out;

    // A holder in this process, a waiter in another; the CLI shows both, then breaks the lock.
    auto holder = zk_backend_for(server_->url());
    std::error_code ec;
    auto h = holder->acquire("jobs/nightly", waiting(5s), ec);
    ASSERT_TRUE(h);
    r = dlock_cli(url_ + " exec --wait 0 jobs/nightly -- true");
    EXPECT_EQ(r.code, 75) << r.out; // not acquired
    r = dlock_cli(url_ + " status jobs/nightly");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("1 holder(s)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(detail::zk::session_hex(holder->current_session()->id())),
              std::string::npos)
        << r.out;
    r = dlock_cli(url_ + " status --json jobs/nightly");
    EXPECT_NE(r.out.find("\"holds\":true"), std::string::npos) << r.out;
    r = dlock_cli(url_ + " list 'jobs/*'");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("jobs/nightly"), std::string::npos) << r.out;
    r = dlock_cli(url_ + " unlock --force jobs/nightly");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("unlocked 'jobs/nightly'"), std::string::npos) << r.out;
    EXPECT_TRUE(eventually([&] { return h->lost(); }, 5s)) << "the holder learns its node is gone";
    r = dlock_cli(url_ + " status jobs/nightly");
    EXPECT_NE(r.out.find("not locked"), std::string::npos) << r.out;
}

TEST_F(zk_cli, exec_with_permits_and_the_semaphores_status) {
    auto holder = zk_backend_for(server_->url());
    std::error_code ec;
    acquire_options o = waiting(5s, lock_kind::semaphore);
    o.permits = 2;
    auto h = holder->acquire("pool", o, ec);
    ASSERT_TRUE(h);
    auto r = dlock_cli(url_ + " exec --kind semaphore --permits 2 --wait 5s pool -- sh -c "
                              "'echo token=$DLOCK_FENCING_TOKEN'");
    EXPECT_EQ(r.code, 0) << "the second of 2 permits: " << r.out;
    EXPECT_EQ(r.out.find("token=\n"), std::string::npos) << "the lease node's czxid: " << r.out;
    auto h2 = holder->acquire("pool", o, ec);
    ASSERT_TRUE(h2);
    r = dlock_cli(url_ + " exec --kind semaphore --permits 2 --wait 0 pool -- true");
    EXPECT_EQ(r.code, 75) << "both permits taken: " << r.out;
    r = dlock_cli(url_ + " status pool");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("kind     semaphore"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("2 holder(s)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("/pool/leases/_c_"), std::string::npos) << r.out;
    r = dlock_cli(url_ + " list");
    EXPECT_NE(r.out.find("semaphore"), std::string::npos) << r.out;
    // Usage errors: --permits only with --kind semaphore, which needs it.
    r = dlock_cli(url_ + " exec --permits 2 pool -- true");
    EXPECT_EQ(r.code, 64) << r.out;
    r = dlock_cli(url_ + " exec --kind semaphore pool -- true");
    EXPECT_EQ(r.code, 64) << r.out;
    r = dlock_cli(url_ + " exec --kind semaphore --permits 0 pool -- true");
    EXPECT_EQ(r.code, 64) << r.out;
}

TEST_F(zk_cli, elect_runs_the_command_while_leading_and_leader_shows_it) {
    auto r = dlock_cli(url_ + " leader jobs/lead");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("vacant"), std::string::npos) << r.out;
    // The command runs while leading: DLOCK_EPOCH is set, and `leader` (run by it) shows the
    // value and that epoch.
    r = dlock_cli(url_ + " elect --value host-a --wait 5s jobs/lead -- sh -c '" +
                  print_epoch_and_leader(std::string(DLOCK_CLI_BINARY) + " " + url_, "jobs/lead") +
                  "'");
    EXPECT_EQ(r.code, 0) << r.out;
    expect_led_with_its_epoch(r.out, "host-a");
    // Resigned when the command exited; its status is elect's.
    r = dlock_cli(url_ + " leader --json jobs/lead");
    EXPECT_NE(r.out.find("\"vacant\":true"), std::string::npos) << r.out;
    r = dlock_cli(url_ + " elect jobs/lead -- sh -c 'exit 3'");
    EXPECT_EQ(r.code, 3) << r.out;
    // Someone else leads: not elected within --wait (75).
    auto other = zk_backend_for(server_->url());
    std::error_code ec;
    auto h = other->campaign("jobs/lead", "other", {.wait = 5s}, ec);
    ASSERT_TRUE(h);
    r = dlock_cli(url_ + " elect --wait 0 jobs/lead -- true");
    EXPECT_EQ(r.code, 75) << r.out;
    r = dlock_cli(url_ + " leader jobs/lead");
    EXPECT_NE(r.out.find("leader 'other'"), std::string::npos) << r.out;
}

TEST_F(zk_cli, elect_forwards_sigterm_and_reports_a_missing_command) {
    auto r = dlock_cli(url_ + " elect --wait 5s jobs/fwd -- no-such-command-dlock-test");
    EXPECT_EQ(r.code, 127) << r.out;
    // SIGTERM to dlock reaches the command (which exits 7 on it); dlock resigns and exits 7.
    peer_process elect({DLOCK_CLI_BINARY, "--url", server_->url(), "elect", "--wait", "5s",
                        "jobs/fwd", "--", "sh", "-c",
                        "trap 'exit 7' TERM; echo leading; while :; do sleep 0.05; done"});
    ASSERT_EQ(elect.line(20s), "leading");
    ::kill(elect.pid(), SIGTERM);
    int status = 0;
    ASSERT_TRUE(
        eventually([&] { return ::waitpid(elect.pid(), &status, WNOHANG) == elect.pid(); }, 20s));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7) << status;
    r = dlock_cli(url_ + " leader jobs/fwd");
    EXPECT_NE(r.out.find("vacant"), std::string::npos) << "resigned: " << r.out;
}

TEST_F(zk_cli, leader_watch_prints_every_change_until_a_signal) {
    peer_process watch(
        {DLOCK_CLI_BINARY, "--url", server_->url(), "leader", "--watch", "--json", "jobs/watched"});
    EXPECT_EQ(watch.line(20s), "{\"name\":\"jobs/watched\",\"vacant\":true}");
    auto other = zk_backend_for(server_->url());
    std::error_code ec;
    auto h = other->campaign("jobs/watched", "host-b", {.wait = 5s}, ec);
    ASSERT_TRUE(h);
    EXPECT_EQ(watch.line(20s), "{\"name\":\"jobs/watched\",\"vacant\":false,\"value\":\"host-b\","
                               "\"epoch\":" +
                                   std::to_string(*h->fencing_token()) + "}");
    h->release_blocking(ec);
    EXPECT_EQ(watch.line(20s), "{\"name\":\"jobs/watched\",\"vacant\":true}");
    ::kill(watch.pid(), SIGTERM);
    EXPECT_EQ(watch.line(20s), "") << "ended by the signal";
}

TEST_F(zk_cli, elect_stops_the_command_when_leadership_is_lost) {
    // The leader's node is deleted under it: SIGTERM to the command, exit 73. The node is
    // deleted once the command runs (it touches a file): a node deleted while the campaign still
    // lists the directory is not a loss but a restart (a new node, leading again).
    const auto leading = "/tmp/dlock-zk-cli-lost-" + std::to_string(::getpid());
    ::unlink(leading.c_str());
    std::atomic<bool> done{false};
    run_result r;
    std::jthread t([&] {
        r = dlock_cli(url_ + " elect --wait 5s jobs/lost -- sh -c 'touch " + leading +
                      "; exec sleep 30'");
        done = true;
    });
    ASSERT_TRUE(eventually([&] { return ::access(leading.c_str(), F_OK) == 0 || done; }, 20s));
    ::unlink(leading.c_str());
    raw_zk raw(server_->host_port());
    const auto kids = raw.children("/jobs/lost");
    ASSERT_EQ(kids.size(), 1U);
    // The hold watches its own node once it is 25 ms old: the delete is seen either way.
    EXPECT_EQ(raw.remove("/jobs/lost/" + kids[0]), ZOK);
    EXPECT_TRUE(eventually([&] { return done.load(); }, 20s));
    t.join();
    EXPECT_EQ(r.code, 73) << r.out;
    EXPECT_NE(r.out.find("leadership of 'jobs/lost' lost"), std::string::npos) << r.out;
}

// exec --once-per: three processes racing over about three 1 s slots never run twice in one
// slot (the slot is counted on the server's clock: docs/design/once.md).
TEST_F(zk_cli, exec_once_per_runs_once_per_slot_among_processes) {
    const auto r =
        race_once_per([&](const std::string& args) { dlock_cli(url_ + " " + args); }, "cli/once");
    EXPECT_GE(r.runs, 3U) << "in 30 s of 1 s slots";
    EXPECT_EQ(r.runs, r.slots) << "two runs in one slot";
}

TEST_F(zk_cli, demo_on_a_private_zookeeper) {
    if (!redis_available()) GTEST_SKIP() << "the demo's stock lives in redis-server";
    const auto r = dlock_cli("demo --backend zookeeper --stock 30 --processes 2 --threads 2");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("lock: private ZooKeeper on zk://127.0.0.1:"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("the stock is exact: 30 sold"), std::string::npos) << r.out;
}

TEST_F(zk_cli, bad_urls_and_missing_chroot) {
    auto r = dlock_cli("--url zks://127.0.0.1:1 status x");
    EXPECT_EQ(r.code, 78) << r.out; // unsupported: no TLS in Debian's C client
    r = dlock_cli("--url '" + server_->url("/nope") + "?connect_timeout=2000' status x");
    EXPECT_EQ(r.code, 78) << r.out; // configuration_error: chroot missing
    EXPECT_NE(r.out.find("/nope"), std::string::npos) << r.out;
}

// An unreachable ensemble is named as ZooKeeper, with ZooKeeper's remedy, in dlock's own words:
// never redis-server's remedy, never a line of the C client's log.
TEST_F(zk_cli, an_unreachable_server_is_named_as_zookeeper) {
    const auto r = dlock_cli("--url 'zk://127.0.0.1:" + std::to_string(free_port()) +
                             "/x?connect_timeout=1000' status x");
    EXPECT_EQ(r.code, 69) << r.out; // unavailable
    EXPECT_NE(r.out.find("is a ZooKeeper server running there?"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("redis"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("ZOO_"), std::string::npos) << r.out;
}

} // namespace
} // namespace dlock::test
