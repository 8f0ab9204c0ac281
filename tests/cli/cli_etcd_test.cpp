// The dlock command on etcd:// URLs: exec runs a command under the lock (DLOCK_FENCING_TOKEN =
// the key's create revision), a held lock makes `exec --wait 0` exit 75, status and list show
// the holder with its lease, unlock --force deletes the holder's key, and `etcdctl lease
// revoke` of exec's lease makes exec stop its command and exit 73; --kind read / write take
// the read-write lock; a killed semaphore holder's permit returns after its lease; elect runs a
// command while leading an election, which leader shows and `etcdctl elect` respects.
#include "elect_check.hpp"
#include "etcd_fixture.hpp"
#include "process.hpp"

#include <dlock/dlock.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sys/wait.h>
#include <thread>

namespace {

using namespace std::chrono_literals;

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds budget) {
    return dlock::test::wait_until(pred, budget);
}

std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class etcd_cli : public ::testing::Test {
protected:
    void SetUp() override {
        if (!dlock::test::etcd_available()) GTEST_SKIP() << "etcd or etcdctl not installed";
        etcd_ = std::make_unique<dlock::test::etcd_cluster>(1);
        url_ = etcd_->url("", "?ttl=5&connect_timeout=2000");
    }
    /// Runs `dlock --url URL args...`: stdout and the exit status (stderr to a file).
    std::pair<std::string, int> dlock_cli(std::vector<std::string> args) const {
        args.insert(args.begin(), {DLOCK_CLI_BINARY, "--url", url_});
        return dlock::test::run_capture(args, {}, etcd_->dir() / "cli.err");
    }
    dlock::lock_status status(dlock::client& c, const std::string& name) const {
        std::error_code ec;
        return c.inspect(name, dlock::lock_kind::reentrant, ec);
    }
    std::unique_ptr<dlock::test::etcd_cluster> etcd_;
    std::string url_;
};

TEST_F(etcd_cli, exec_status_list_and_forced_unlock) {
    auto [out, code] = dlock_cli(
        {"exec", "--wait", "5s", "nightly", "--", "sh", "-c", "echo token=$DLOCK_FENCING_TOKEN"});
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("token="), std::string::npos) << out;
    EXPECT_EQ(out.find("token=\n"), std::string::npos) << "a revision token: " << out;

    dlock::client holder(url_);
    auto h = holder.acquire("nightly", {.wait = 5s});
    ASSERT_TRUE(h);
    const auto lease = status(holder, "nightly").contenders.at(0).session;
    std::tie(out, code) = dlock_cli({"exec", "--wait", "0", "nightly", "--", "true"});
    EXPECT_EQ(code, 75) << out; // not acquired
    std::tie(out, code) = dlock_cli({"status", "nightly"});
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("1 holder(s)"), std::string::npos) << out;
    EXPECT_NE(out.find(lease), std::string::npos) << out;
    std::tie(out, code) = dlock_cli({"status", "--json", "nightly"});
    EXPECT_NE(out.find("\"holds\":true"), std::string::npos) << out;
    std::tie(out, code) = dlock_cli({"list", "night*"});
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("nightly"), std::string::npos) << out;
    std::tie(out, code) = dlock_cli({"unlock", "--force", "nightly"});
    EXPECT_EQ(code, 0) << out;
    EXPECT_TRUE(eventually([&] { return h.lost(); }, 5s)) << "the holder learns its key is gone";
    std::tie(out, code) = dlock_cli({"status", "nightly"});
    EXPECT_NE(out.find("not locked"), std::string::npos) << out;
}

// --kind read / write: two readers share while one holds (exec read runs), a writer is kept
// out (exit 75), status shows the read-write lock in read mode with its holder.
TEST_F(etcd_cli, read_and_write_kinds) {
    dlock::client holder(url_);
    auto r = holder.acquire("report", {.wait = 5s, .kind = dlock::lock_kind::read});
    ASSERT_TRUE(r);
    auto [out, code] = dlock_cli({"exec", "--kind", "read", "--wait", "5s", "report", "--", "sh",
                                  "-c", "echo token=$DLOCK_FENCING_TOKEN"});
    EXPECT_EQ(code, 0) << out;
    EXPECT_EQ(out.find("token=\n"), std::string::npos) << "readers have a token: " << out;
    std::tie(out, code) =
        dlock_cli({"exec", "--kind", "write", "--wait", "0", "report", "--", "true"});
    EXPECT_EQ(code, 75) << out;
    std::tie(out, code) = dlock_cli({"status", "--json", "report"});
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("\"kind\":\"read-write\""), std::string::npos) << out;
    EXPECT_NE(out.find("\"mode\":\"read\""), std::string::npos) << out;
    r.release();
    std::tie(out, code) =
        dlock_cli({"exec", "--kind", "write", "--wait", "5s", "report", "--", "true"});
    EXPECT_EQ(code, 0) << out;
}

TEST_F(etcd_cli, lease_revoked_exec_exits_73) {
    const auto log = etcd_->dir() / "exec.log";
    const auto pid = dlock::test::spawn_child(
        {DLOCK_CLI_BINARY, "--url", url_, "exec", "--wait", "5s", "revoked", "--", "sleep", "30"},
        log);
    dlock::client watcher(url_);
    ASSERT_TRUE(eventually([&] { return status(watcher, "revoked").exists; }, 10s));
    const auto lease = status(watcher, "revoked").contenders.at(0).session;
    auto [out, rc] = etcd_->etcdctl({"lease", "revoke", lease});
    ASSERT_EQ(rc, 0) << out;
    int st = 0;
    const bool exited = eventually([&] { return ::waitpid(pid, &st, WNOHANG) == pid; }, 10s);
    if (!exited) {
        ::kill(pid, SIGKILL);
        dlock::test::reap_child(pid, 5s);
    }
    ASSERT_TRUE(exited) << "exec did not end after its lease was revoked";
    EXPECT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 73) << dlock::test::read_tail(log, 2000);
}

// exec --kind semaphore --permits 2: two execs hold, a third waits; kill -9 of a holder gives
// its permit back once its lease (ttl=5) runs out, and the waiter runs then.
TEST_F(etcd_cli, a_killed_semaphore_holder_frees_its_permit_after_the_lease) {
    std::vector<pid_t> holders;
    struct reaper { // a failed assertion leaves no holder running
        std::vector<pid_t>& pids;
        ~reaper() {
            for (const auto pid : pids) {
                ::kill(pid, SIGKILL);
                dlock::test::reap_child(pid, 5s);
            }
        }
    } reap{holders};
    for (int i = 0; i < 2; ++i)
        holders.push_back(dlock::test::spawn_child(
            {DLOCK_CLI_BINARY, "--url", url_, "exec", "--kind", "semaphore", "--permits", "2",
             "--wait", "5s", "pool", "--", "sleep", "60"},
            etcd_->dir() / ("holder" + std::to_string(i) + ".log")));
    dlock::client watcher(url_);
    const auto holding = [&] {
        std::error_code ec;
        const auto st = watcher.inspect("pool", dlock::lock_kind::semaphore, ec);
        return std::count_if(st.contenders.begin(), st.contenders.end(),
                             [](const dlock::lock_contender& c) { return c.holds; });
    };
    ASSERT_TRUE(eventually([&] { return holding() == 2; }, 10s));
    auto [out, code] = dlock_cli(
        {"exec", "--kind", "semaphore", "--permits", "2", "--wait", "0", "pool", "--", "true"});
    EXPECT_EQ(code, 75) << out;
    ::kill(holders[0], SIGKILL);
    dlock::test::reap_child(holders[0], 5s);
    holders.erase(holders.begin());
    const auto killed_at = std::chrono::steady_clock::now();
    std::tie(out, code) = dlock_cli(
        {"exec", "--kind", "semaphore", "--permits", "2", "--wait", "15s", "pool", "--", "true"});
    EXPECT_EQ(code, 0) << out;
    const auto waited = std::chrono::steady_clock::now() - killed_at;
    EXPECT_GT(waited, 2s) << "the permit came back before the lease ran out";
    EXPECT_LT(waited, 12s);
}

// exec --once-per on etcd (docs/design/once.md, "etcd"): a slot is a key with a lease of the
// period less 1 s, timed by etcd. Three processes race over 3 s slots until three runs happened
// (at most 40 s); one of them has its wall clock 10 minutes ahead (the skew shim of
// tests/fault; not under a sanitizer, whose runtime must be preloaded first). Two runs are never
// closer than the period less 1 s, less what starting a command can take (0.5 s here): two
// winners of one slot would run within milliseconds of each other.
TEST_F(etcd_cli, exec_once_per_runs_at_most_once_per_slot_whatever_the_clients_clocks) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    const bool skew = false;
#else
    const bool skew = std::filesystem::exists(DLOCK_SKEW_LIB);
#endif
    const auto log = etcd_->dir() / "once-runs";
    std::ofstream(etcd_->dir() / "skew") << "600000 1\n";
    const auto lines = [&] {
        const auto text = slurp(log);
        return std::count(text.begin(), text.end(), '\n');
    };
    const auto end = std::chrono::steady_clock::now() + 40s;
    std::vector<std::thread> ts;
    for (int p = 0; p < 3; ++p)
        ts.emplace_back([&, p] {
            std::vector<std::string> env;
            if (p == 2 && skew)
                env = {"LD_PRELOAD=" + std::string(DLOCK_SKEW_LIB),
                       "DLOCK_SKEW_FILE=" + (etcd_->dir() / "skew").string()};
            // The command's own clock is the machine's (no shim), so the runs' times compare.
            const std::string cmd = "env -u LD_PRELOAD date +%s%N >> " + log.string();
            while (std::chrono::steady_clock::now() < end && lines() < 3)
                dlock::test::run_capture({DLOCK_CLI_BINARY, "--url", url_, "exec", "--once-per",
                                          "3s", "cli-once", "--", "sh", "-c", cmd},
                                         env);
        });
    for (auto& t : ts)
        t.join();
    std::vector<long long> starts;
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);)
        starts.push_back(std::stoll(line));
    ASSERT_GE(starts.size(), 3u) << "runs in 40 s of 3 s slots";
    std::sort(starts.begin(), starts.end());
    for (std::size_t i = 1; i < starts.size(); ++i)
        EXPECT_GE(starts[i] - starts[i - 1], 1'500'000'000LL) << "runs " << i - 1 << " and " << i;
    // The shim did skew: a clock read under it is 10 minutes ahead.
    if (skew) {
        const auto [shifted, rc] = dlock::test::run_capture(
            {"/bin/date", "+%s"}, {"LD_PRELOAD=" + std::string(DLOCK_SKEW_LIB),
                                   "DLOCK_SKEW_FILE=" + (etcd_->dir() / "skew").string()});
        ASSERT_EQ(rc, 0);
        const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
        EXPECT_GE(std::stoll(shifted) - now, 590) << "the skew shim did not skew";
    }
    // A period etcd cannot time is a usage error of the option's value.
    const auto [out, code] =
        dlock_cli({"exec", "--once-per", "2s", "cli-once-short", "--", "true"});
    EXPECT_NE(code, 0) << out;
}

TEST_F(etcd_cli, elect_runs_the_command_while_leading_and_leader_shows_it) {
    auto [out, code] = dlock_cli({"leader", "lead"});
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("vacant"), std::string::npos) << out;
    // The command runs while leading: DLOCK_EPOCH is set, and `leader` (run by it) shows the
    // value and that epoch (the key's create revision).
    std::tie(out, code) =
        dlock_cli({"elect", "--value", "host-a", "--wait", "5s", "lead", "--", "sh", "-c",
                   dlock::test::print_epoch_and_leader(
                       std::string(DLOCK_CLI_BINARY) + " --url '" + url_ + "'", "lead")});
    EXPECT_EQ(code, 0) << out;
    dlock::test::expect_led_with_its_epoch(out, "host-a");
    // Resigned when the command exited; its status is elect's.
    std::tie(out, code) = dlock_cli({"leader", "--json", "lead"});
    EXPECT_NE(out.find("\"vacant\":true"), std::string::npos) << out;
    std::tie(out, code) = dlock_cli({"elect", "lead", "--", "sh", "-c", "exit 3"});
    EXPECT_EQ(code, 3) << out;
    // etcdctl leads: not elected within --wait (75), and leader names etcdctl's value.
    const auto log = etcd_->dir() / "elect.log";
    const auto pid = dlock::test::spawn_child(etcd_->etcdctl_argv({"elect", "lead", "etcdctl"}),
                                              log, {.env_extra = {"ETCDCTL_API=3"}});
    // etcdctl prints its key and value once Campaign returned; a SIGTERM after that resigns.
    ASSERT_TRUE(eventually([&] { return slurp(log).find("\netcdctl") != std::string::npos; }, 10s));
    std::tie(out, code) = dlock_cli({"leader", "lead"});
    EXPECT_NE(out.find("etcdctl"), std::string::npos) << out;
    std::tie(out, code) = dlock_cli({"elect", "--wait", "0", "lead", "--", "true"});
    EXPECT_EQ(code, 75) << out;
    ::kill(pid, SIGTERM); // etcdctl resigns
    EXPECT_EQ(dlock::test::wait_child(pid), 0);
    std::tie(out, code) = dlock_cli({"elect", "--wait", "5s", "lead", "--", "true"});
    EXPECT_EQ(code, 0) << out;
}

} // namespace
