// The dlock command on postgresql:// URLs: exec (exclusion among processes, --kind shedlock),
// status and list from pg_locks, unlock --force ending the holding session (the exec child is
// stopped as after any loss: exit 73), elect and leader.
#include "elect_check.hpp"
#include "once_race.hpp"
#include "postgres/postgres_test_util.hpp"

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

class pg_cli : public pg_suite {
public:
    struct outcome {
        int code = -1;
        std::string out;
    };
    /// Runs `dlock --url URL ARGS` through sh; returns its exit code and stdout.
    static outcome dlock(const std::string& args) {
        return shell(std::string(DLOCK_CLI_BINARY) + " --url '" + server().url() + "' " + args +
                     " 2>&1");
    }
    /// Runs `cmd` through sh; its exit code and stdout.
    static outcome shell(const std::string& cmd) {
        outcome o;
        if (FILE* p = ::popen(cmd.c_str(), "r")) {
            char buf[512];
            while (std::fgets(buf, sizeof buf, p))
                o.out += buf;
            const int st = ::pclose(p);
            o.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
        }
        return o;
    }
};

TEST_F(pg_cli, exec_excludes_among_processes) {
    const auto dir = std::filesystem::path(server().dir()) / "cs";
    std::filesystem::create_directory(dir);
    const std::string d = dir.string();
    // Each child checks that nobody else is inside, stays a while, and leaves.
    const std::string body = "sh -c 'if [ -e " + d + "/inside ]; then echo x >> " + d +
                             "/overlap; fi; touch " + d + "/inside; sleep 0.05; rm " + d +
                             "/inside; echo done >> " + d + "/log'";
    std::vector<std::thread> ts;
    std::vector<int> codes(6, -1);
    for (std::size_t i = 0; i < codes.size(); ++i)
        ts.emplace_back([&, i] { codes[i] = dlock("exec --wait 20s cli:mutex -- " + body).code; });
    for (auto& t : ts)
        t.join();
    for (int c : codes)
        EXPECT_EQ(c, 0);
    EXPECT_FALSE(std::filesystem::exists(dir / "overlap"));
    std::ifstream log(dir / "log");
    int lines = 0;
    for (std::string l; std::getline(log, l);)
        ++lines;
    EXPECT_EQ(lines, 6);
    // ShedLock rows too.
    EXPECT_EQ(dlock("exec --kind shedlock --wait 0 cli:shed -- true").code, 0);
    EXPECT_EQ(server().psql("SELECT count(*) FROM shedlock WHERE name = 'cli:shed'"), "1");
    // dlock's lease rows: the row is kept, expired, on release.
    EXPECT_EQ(dlock("exec --kind lease --wait 0 cli:lease -- true").code, 0);
    EXPECT_EQ(server().psql("SELECT count(*) FROM dlock_lease WHERE expires_at > now()"), "0");
    EXPECT_EQ(server().psql("SELECT count(*) FROM dlock_lease WHERE name = 'cli:lease'"), "1");
}

TEST_F(pg_cli, status_list_and_unlock_force_on_a_held_lock) {
    outcome held;
    std::thread holder([&] { held = dlock("exec cli:held -- sleep 60"); });
    if (!eventually([&] { return granted() == 1; }, 10s)) {
        dlock("unlock --force cli:held"); // the holder must not outlive the test
        holder.join();
        FAIL() << "the holder did not take its lock: " << held.code << " " << held.out;
    }
    const auto st = dlock("status cli:held");
    EXPECT_EQ(st.code, 0);
    EXPECT_NE(st.out.find("holder   dlock:cli:held"), std::string::npos) << st.out;
    EXPECT_NE(st.out.find("advisory key bigint"), std::string::npos) << st.out;
    const auto js = dlock("status --json cli:held");
    EXPECT_NE(js.out.find("\"holds\":true"), std::string::npos) << js.out;
    const auto ls = dlock("list 'cli:*'");
    EXPECT_NE(ls.out.find("cli:held"), std::string::npos) << ls.out;
    EXPECT_EQ(dlock("exec --wait 0 cli:held -- true").code, 75); // not acquired
    const auto un = dlock("unlock --force cli:held");
    EXPECT_EQ(un.code, 0) << un.out;
    holder.join();
    EXPECT_EQ(held.code, 73) << held.out; // the child was stopped: the lock was lost
    EXPECT_EQ(dlock("exec --wait 0 cli:held -- true").code, 0);
    EXPECT_NE(dlock("status cli:free").out.find("kind     none"), std::string::npos);
}

// elect and leader on PostgreSQL (postgres/election.hpp): the command runs while leading with
// DLOCK_EPOCH, `leader --json` (run by it) shows the value and that epoch; resigned when it
// exits; not elected while another leads (75); `unlock --force NAME` ends the leader's session,
// and elect stops its command and exits 73.
TEST_F(pg_cli, elect_and_leader) {
    auto r = dlock("leader cli:lead");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("vacant"), std::string::npos) << r.out;
    r = dlock("elect --value host-a --wait 5s cli:lead -- sh -c '" +
              print_epoch_and_leader(
                  std::string(DLOCK_CLI_BINARY) + " --url \"" + server().url() + "\"", "cli:lead") +
              "'");
    EXPECT_EQ(r.code, 0) << r.out;
    expect_led_with_its_epoch(r.out, "host-a");
    EXPECT_NE(dlock("leader --json cli:lead").out.find("\"vacant\":true"), std::string::npos);

    outcome leading;
    std::thread t([&] { leading = dlock("elect --value host-b cli:lead -- sleep 60"); });
    const bool led = eventually(
        [&] { return dlock("leader cli:lead").out.find("host-b") != std::string::npos; }, 10s);
    if (!led) {
        dlock("unlock --force cli:lead"); // the leader must not outlive the test
        t.join();
        FAIL() << "elect did not lead: " << leading.code << " " << leading.out;
    }
    EXPECT_EQ(dlock("elect --wait 0 cli:lead -- true").code, 75) << "not elected";
    EXPECT_EQ(dlock("unlock --force cli:lead").code, 0);
    t.join();
    EXPECT_EQ(leading.code, 73) << leading.out;
    EXPECT_NE(leading.out.find("leadership of 'cli:lead' lost"), std::string::npos) << leading.out;
    EXPECT_NE(dlock("leader cli:lead").out.find("vacant"), std::string::npos);
}

// unlock --force of the row kinds: ShedLock's lock_until and lease's expires_at set to now
// (rows kept), versioned rows deleted; another exec takes the lock at once.
TEST_F(pg_cli, unlock_force_ends_every_row_kind) {
    const std::vector<std::string> kinds{"shedlock", "lease", "versioned"};
    std::vector<outcome> held(kinds.size());
    std::vector<std::thread> ts;
    for (std::size_t i = 0; i < kinds.size(); ++i)
        ts.emplace_back([&, i] {
            held[i] = dlock("exec --kind " + kinds[i] + " --lease 30s cli:row-" + kinds[i] +
                            " -- sleep 60");
        });
    const auto rows_held = [&] {
        return server().psql("SELECT (SELECT count(*) FROM shedlock WHERE name = "
                             "'cli:row-shedlock' AND lock_until > timezone('utc', now())) + "
                             "(SELECT count(*) FROM dlock_lease WHERE name = 'cli:row-lease' AND "
                             "expires_at > "
                             "now()) + "
                             "(SELECT count(*) FROM locks WHERE name = 'cli:row-versioned' AND "
                             "record_version_number IS NOT NULL)") == "3";
    };
    const bool up = eventually(
        [&] {
            try {
                return rows_held();
            } catch (const std::exception&) { // a table not created yet
                return false;
            }
        },
        10s);
    for (std::size_t i = 0; up && i < kinds.size(); ++i) {
        const auto name = "cli:row-" + kinds[i];
        EXPECT_EQ(dlock("exec --kind " + kinds[i] + " --wait 0 " + name + " -- true").code, 75);
        const auto un = dlock("unlock --force " + name);
        EXPECT_EQ(un.code, 0) << un.out;
        EXPECT_NE(un.out.find("unlocked '" + name + "' (" + kinds[i]), std::string::npos) << un.out;
        EXPECT_EQ(dlock("exec --kind " + kinds[i] + " --wait 0 " + name + " -- true").code, 0);
        EXPECT_NE(dlock("unlock --force " + name).out.find("nothing ended"), std::string::npos);
    }
    for (std::size_t i = 0; !up && i < kinds.size(); ++i)
        dlock("unlock --force cli:row-" + kinds[i]); // the holders must not outlive the test
    for (auto& t : ts)
        t.join();
    for (std::size_t i = 0; i < kinds.size(); ++i) // each child stopped: its lock was lost
        EXPECT_EQ(held[i].code, 73) << kinds[i] << ": " << held[i].out;
    ASSERT_TRUE(up) << "the holders did not take their rows";
    EXPECT_EQ(server().psql("SELECT count(*) FROM shedlock WHERE name = 'cli:row-shedlock'"), "1");
}

// The demo with its lock on a private PostgreSQL that it starts (initdb + postgres, as the
// postgres user under root) and stops; the stock stays in a private redis-server.
// exec --once-per: three processes racing over about three 1 s slots never run twice in one
// slot (the slot is counted on the server's clock: docs/design/once.md).
// exec --kind semaphore --permits 2 next to a library holder; a third is refused while both
// permits are out; status shows the count and each permit's slot; unlock --force ends both.
TEST_F(pg_cli, exec_with_permits_and_the_semaphores_status) {
    auto holder = backend();
    std::error_code ec;
    auto o = wait_for(0ms, lock_kind::semaphore);
    o.permits = 2;
    auto h = holder->acquire("cli:pool", o, ec);
    ASSERT_TRUE(h) << ec.message();
    auto r = dlock("exec --kind semaphore --permits 2 --wait 5s cli:pool -- sh -c "
                   "'echo token=$DLOCK_FENCING_TOKEN'");
    EXPECT_EQ(r.code, 0) << "the second of 2 permits: " << r.out;
    EXPECT_EQ(r.out.find("token=\n"), std::string::npos) << "a token from dlock_fence: " << r.out;
    auto h2 = holder->acquire("cli:pool", o, ec);
    ASSERT_TRUE(h2) << "the CLI's permit is back: " << ec.message();
    r = dlock("exec --kind semaphore --permits 2 --wait 0 cli:pool -- true");
    EXPECT_EQ(r.code, 75) << "both permits taken: " << r.out;
    r = dlock("status cli:pool");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("kind     semaphore"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("2 holder(s)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[slot 1]  token " + std::to_string(*h2->fencing_token())),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("2 of 2 permit(s) in use"), std::string::npos) << r.out;
    r = dlock("list 'cli:p*'");
    EXPECT_NE(r.out.find("semaphore"), std::string::npos) << r.out;
    r = dlock("unlock --force cli:pool");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("every permit's row expired"), std::string::npos) << r.out;
    h->extend(30s, ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_NE(dlock("status cli:pool").out.find("not locked"), std::string::npos);
    r = dlock("exec --kind semaphore --permits 0 cli:pool -- true");
    EXPECT_EQ(r.code, 64) << r.out;
}

TEST_F(pg_cli, exec_once_per_runs_once_per_slot_among_processes) {
    const auto r = race_once_per([&](const std::string& args) { dlock(args); }, "cli:once");
    EXPECT_GE(r.runs, 3U) << "in 30 s of 1 s slots";
    EXPECT_EQ(r.runs, r.slots) << "two runs in one slot";
}

TEST_F(pg_cli, demo_on_a_private_postgresql) {
    if (!redis_available()) GTEST_SKIP() << "the demo's stock lives in redis-server";
    const std::string cmd = std::string(DLOCK_CLI_BINARY) +
                            " demo --backend postgresql --stock 30 --processes 2 --threads 2 2>&1";
    const auto r = shell(cmd);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("lock: private PostgreSQL on postgresql://postgres@127.0.0.1:"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("the stock is exact: 30 sold"), std::string::npos) << r.out;
}

TEST_F(pg_cli, bad_urls_and_unreachable_servers_have_their_exit_codes) {
    const std::string bin = DLOCK_CLI_BINARY;
    const auto run = [&](const std::string& url) {
        const int st = std::system((bin + " --url '" + url + "' status x >/dev/null 2>&1").c_str());
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    };
    EXPECT_EQ(run(server().url("dlock_key=nope")), 64);
    EXPECT_EQ(run("postgresql://postgres:pw@127.0.0.1:" + std::to_string(free_port()) + "/x"), 69);
    EXPECT_EQ(run(server().url_as("postgres", "wrong")), 69);
}

} // namespace
} // namespace dlock::test
