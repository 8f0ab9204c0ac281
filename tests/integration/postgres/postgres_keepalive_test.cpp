// A holder whose host vanished: its packets are dropped (not refused, not reset), so only the
// server's TCP keepalive (set per session by dlock: dlock_keepalive=idle:interval:count:
// user_timeout) can end its session and free its advisory lock. The holder runs in a network
// namespace of its own, joined to the server by a veth pair; an nftables rule inside that
// namespace drops everything. The namespace (and with it the veth pair and the rule) is removed
// on every exit path; without the right to create it the test is skipped.
#include "postgres/settings.hpp"
#include "postgres_test_util.hpp"

#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <future>
#include <iostream>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dlock::test {
namespace {

using clock = std::chrono::steady_clock;

bool sh(const std::string& cmd) {
    return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

/// A network namespace `ns` with a veth pair: `host_ip` on this side, `peer_ip` inside.
/// Removed (with the pair and any rule in it) when destroyed.
struct netns {
    std::string name, host_if, host_ip, peer_ip;
    bool up = false;
    std::string why;

    netns() {
        const auto id = std::to_string(::getpid() % 100000);
        name = "dlockka" + id;
        host_if = "dlkh" + id;
        const auto n = static_cast<unsigned>(::getpid());
        const auto net = "10.213." + std::to_string(n % 250) + ".";
        const auto base = 4 * ((n / 250) % 60);
        host_ip = net + std::to_string(base + 1);
        peer_ip = net + std::to_string(base + 2);
        if (!sh("ip netns add " + name)) {
            why = "cannot create a network namespace (ip netns add; needs root and iproute2)";
            return;
        }
        up = sh("ip link add " + host_if + " type veth peer name dlkn" + id + " netns " + name) &&
             sh("ip addr add " + host_ip + "/30 dev " + host_if) &&
             sh("ip link set " + host_if + " up") &&
             sh("ip -n " + name + " addr add " + peer_ip + "/30 dev dlkn" + id) &&
             sh("ip -n " + name + " link set dlkn" + id + " up") &&
             sh("ip -n " + name + " link set lo up");
        if (!up) why = "cannot set up a veth pair into the namespace";
    }
    ~netns() {
        sh("ip link del " + host_if);
        sh("ip netns del " + name);
    }
    /// Drops every packet in and out of the namespace (the host vanished).
    bool drop_all() const {
        return sh("ip netns exec " + name + " nft add table inet dlock_drop") &&
               sh("ip netns exec " + name +
                  " nft 'add chain inet dlock_drop in { type filter hook input priority 0; "
                  "policy drop; }'") &&
               sh("ip netns exec " + name +
                  " nft 'add chain inet dlock_drop out { type filter hook output priority 0; "
                  "policy drop; }'");
    }
};

/// A forked child, killed and reaped when destroyed.
struct child_process {
    pid_t pid = -1;
    ~child_process() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
};

TEST(pg_keepalive, a_vanished_holder_host_is_freed_within_the_keepalive_bound) {
    if (!postgres_available()) GTEST_SKIP() << "PostgreSQL 15 server binaries not found";
    if (std::system("command -v nft >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "nft (package nftables) not found";
    netns ns;
    if (!ns.up) GTEST_SKIP() << ns.why;
    pg_server server({"listen_addresses=127.0.0.1," + ns.host_ip});
    {
        std::ofstream hba(server.dir() / "data" / "pg_hba.conf", std::ios::app);
        hba << "host all all " << ns.peer_ip << "/32 scram-sha-256\n";
    }
    server.psql("SELECT pg_reload_conf()");

    // The holder: two locks, one per keepalive setting (the default 5:2:3:10000 and a short
    // one); the lock check is slow so that only the server's keepalive decides.
    struct setting {
        std::string name, keepalive;
    };
    const std::vector<setting> settings{{"ka:default", "5:2:3:10000"}, {"ka:short", "1:1:2:3000"}};
    const std::string remote = "postgresql://postgres:" + pg_server::password() + "@" + ns.host_ip +
                               ":" + std::to_string(server.port()) + "/postgres";
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    child_process holder;
    holder.pid = ::fork();
    ASSERT_GE(holder.pid, 0);
    if (holder.pid == 0) {
        ::close(ready[0]);
        char ok = '0';
        const int fd = ::open(("/run/netns/" + ns.name).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0) {
            std::vector<std::shared_ptr<detail::lock_backend>> bs;
            std::vector<std::shared_ptr<detail::hold>> hs;
            for (const auto& s : settings) {
                std::error_code ec;
                auto b = detail::make_postgres_backend(
                    remote + "?dlock_check=1000&dlock_keepalive=" + s.keepalive, ec, nullptr);
                auto h = b ? b->acquire(s.name, wait_for(5s), ec) : nullptr;
                if (h) {
                    bs.push_back(b);
                    hs.push_back(h);
                }
            }
            ok = hs.size() == settings.size() ? '1' : '0';
            (void)!::write(ready[1], &ok, 1);
            for (;;)
                ::pause(); // hold until killed
        }
        (void)!::write(ready[1], &ok, 1);
        ::_exit(1);
    }
    ::close(ready[1]);
    char ok = 0;
    ASSERT_EQ(::read(ready[0], &ok, 1), 1);
    ::close(ready[0]);
    ASSERT_EQ(ok, '1') << "the holder in the namespace did not take its locks";

    std::error_code ec;
    std::string why;
    auto local = detail::make_postgres_backend(server.url(), ec, &why);
    ASSERT_TRUE(local) << why;
    for (const auto& s : settings)
        ASSERT_FALSE(local->acquire(s.name, wait_for(0ms), ec)) << s.name;

    ASSERT_TRUE(ns.drop_all()) << "cannot add the nftables drop rule in the namespace";
    const auto dropped = clock::now();
    std::vector<std::future<clock::duration>> freed;
    for (const auto& s : settings)
        freed.push_back(std::async(std::launch::async, [&server, s, dropped] {
            std::error_code e;
            auto b = detail::make_postgres_backend(server.url(), e, nullptr);
            auto h = b ? b->acquire(s.name, wait_for(40s), e) : nullptr;
            return h ? clock::now() - dropped : clock::duration::max();
        }));
    for (std::size_t i = 0; i < settings.size(); ++i) {
        std::string w;
        const auto st = detail::pg::parse_settings(
            remote + "?dlock_keepalive=" + settings[i].keepalive, ec, &w);
        const auto bound = st.keep.server_bound();
        const auto took = freed[i].get();
        ASSERT_NE(took, clock::duration::max()) << settings[i].name << " never freed";
        std::cout << "[ measure  ] " << settings[i].name << " (" << settings[i].keepalive
                  << "): freed "
                  << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                  << " ms after its host vanished; bound " << bound.count() << " ms\n";
        // Not before the keepalive could have noticed, and within its bound (plus the probe
        // timer's granularity and a loaded machine's scheduling).
        EXPECT_GE(took, std::chrono::seconds(st.keep.idle_s)) << settings[i].name;
        EXPECT_LE(took, bound + 2s) << settings[i].name;
    }
}

} // namespace
} // namespace dlock::test
