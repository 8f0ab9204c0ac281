// redis_fixture.hpp: RAII fixtures that start real Redis topologies for tests and benchmarks.
//
// Every server gets a free loopback port, its own temporary directory and config, is started
// as a child process (killed by the kernel if the test process dies: PR_SET_PDEATHSIG), is
// declared ready only when it answers PING (or the topology reports itself healthy), and is
// stopped and its directory removed on destruction, also when a test fails. Nothing leaves
// 127.0.0.1. The fixtures talk to the servers through the `redis-cli` binary, so they do not
// depend on the code under test.
//
// Binaries: $DLOCK_TEST_REDIS_SERVER, $DLOCK_TEST_REDIS_CLI, $DLOCK_TEST_REDIS_SENTINEL, or
// redis-server / redis-cli / redis-sentinel on PATH. Tests GTEST_SKIP() when
// redis_available() is false.
#pragma once

#include "process.hpp" // spawn_child(), reap_child(), shared with the other fixtures

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace dlock::test {

bool redis_available();
bool sentinel_available();

/// TLS material generated with the openssl CLI into the server's directory.
struct tls_files {
    std::filesystem::path ca_cert{};     ///< CA that signed server_cert and wrong_host_cert
    std::filesystem::path server_cert{}; ///< SAN IP:127.0.0.1, DNS:localhost
    std::filesystem::path server_key{};
    std::filesystem::path wrong_ca_cert{};   ///< an unrelated CA
    std::filesystem::path wrong_host_cert{}; ///< SAN DNS:other.example, signed by ca_cert
    std::filesystem::path wrong_host_key{};
};

/// Writes the files above into `dir` (EC P-256 keys, valid for a day); std::runtime_error when
/// openssl is missing or fails. Used by redis_server and etcd_cluster.
tls_files make_tls(const std::filesystem::path& dir);

struct server_options {
    std::string password{};                  ///< requirepass of the default user ("" = none)
    std::vector<std::string> acl_lines{};    ///< raw "user ..." config lines
    bool tls = false;                        ///< TLS only: port 0, tls-port = the chosen port
    bool tls_wrong_host = false;             ///< serve the other.example certificate
    std::vector<std::string> extra_config{}; ///< raw config lines appended
    std::optional<std::uint16_t> port{};     ///< fixed port; default: a free one
    std::optional<int> cpu{};                ///< pin the server to this CPU (benchmarks)
};

/// Picks a free loopback TCP port from 10000 up, outside the kernel's ephemeral range (and
/// port+10000 when `with_bus`, also outside it).
std::uint16_t free_port(bool with_bus = false);

class redis_server {
public:
    /// Starts the server and waits (10 s budget) until it answers PING (NOAUTH counts as up).
    /// Errors: std::runtime_error with the tail of the server log.
    explicit redis_server(server_options opts = {});
    /// Stops the server (SIGTERM, then SIGKILL after 5 s) and removes its directory.
    ~redis_server();
    redis_server(const redis_server&) = delete;
    redis_server& operator=(const redis_server&) = delete;

    std::string host() const { return "127.0.0.1"; }
    std::uint16_t port() const { return port_; }
    std::string unix_socket() const { return (dir_ / "redis.sock").string(); }
    /// "redis://127.0.0.1:PORT" or "rediss://..."; never contains the password.
    std::string url() const;
    const std::filesystem::path& dir() const { return dir_; }
    const tls_files& tls() const { return tls_; }
    const server_options& options() const { return opts_; }
    pid_t pid() const { return pid_; }
    bool running() const;

    void kill();   ///< SIGKILL and reap
    void stop();   ///< SIGTERM and reap
    void start();  ///< (re)start on the same port and directory; waits for PING
    void pause();  ///< SIGSTOP
    void resume(); ///< SIGCONT

    /// Runs `redis-cli <args>` against this server (password via REDISCLI_AUTH, TLS flags as
    /// needed) and returns its standard output without the trailing newline. Raw mode:
    /// integers and bulk strings print bare, arrays one element per line.
    std::string cli(const std::vector<std::string>& args) const;

private:
    void write_config();
    void wait_ready(std::chrono::milliseconds budget);
    std::string log_tail() const;

    server_options opts_{};
    std::filesystem::path dir_{};
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
    tls_files tls_{};
    std::string binary_{};
};

/// N independent standalone masters (Redlock).
class redis_masters {
public:
    explicit redis_masters(std::size_t n, server_options opts = {});
    std::size_t size() const { return servers_.size(); }
    redis_server& operator[](std::size_t i) { return *servers_.at(i); }
    std::vector<std::string> urls() const;

private:
    std::vector<std::unique_ptr<redis_server>> servers_{};
};

/// One master, two replicas, three redis-sentinel processes watching "mymaster"
/// (down-after 1000 ms, failover-timeout 3000 ms, quorum 2).
class redis_sentinel_group {
public:
    /// `sentinel_password`: requirepass of the sentinels (and sentinel-pass among them).
    explicit redis_sentinel_group(server_options opts = {}, std::string sentinel_password = {});
    ~redis_sentinel_group();
    std::string master_name() const { return "mymaster"; }
    /// "redis-sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster"
    std::string url() const;
    redis_server& master() { return *nodes_.at(0); }
    redis_server& replica(std::size_t i) { return *nodes_.at(1 + i); }
    std::uint16_t sentinel_port(std::size_t i) const { return sentinels_.at(i).port; }
    std::string sentinel_cli(std::size_t i, const std::vector<std::string>& args) const;
    /// The master's address as the first sentinel reports it.
    std::pair<std::string, std::uint16_t> current_master() const;
    /// SENTINEL FAILOVER, then waits until the reported master changed and reports role:master.
    void failover_and_wait(std::chrono::milliseconds budget);

private:
    struct sentinel {
        std::uint16_t port = 0;
        pid_t pid = -1;
        std::filesystem::path dir;
    };
    sentinel start_sentinel(const std::string& bin, const std::string& master_port,
                            const std::string& master_password);
    /// Why the group is not ready: each replica's link, each sentinel's view and log tail.
    std::string readiness_report() const;
    void stop_sentinels();
    std::vector<std::unique_ptr<redis_server>> nodes_{};
    std::vector<sentinel> sentinels_{};
    std::string password_{};
    std::string sentinel_password_{};
};

/// Six cluster-enabled nodes, joined by `redis-cli --cluster create --cluster-replicas 1`:
/// three masters with one replica each. Ready when every node reports cluster_state:ok.
class redis_cluster {
public:
    explicit redis_cluster(server_options opts = {});
    /// "redis-cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
    std::string url() const;
    std::size_t size() const { return nodes_.size(); }
    redis_server& node(std::size_t i) { return *nodes_.at(i); }

    /// CLUSTER MYID of node i.
    std::string node_id(std::size_t i) const;
    /// The index of the node that is master of `slot` now (by node 0's CLUSTER NODES, flags
    /// without "fail").
    std::size_t master_of(std::uint16_t slot) const;
    /// The index of a replica of master `i`.
    std::size_t replica_of(std::size_t i) const;
    /// Slot migration by hand, in the three steps `redis-cli --cluster reshard` takes:
    /// SETSLOT IMPORTING on `to` and MIGRATING on `from`; MIGRATE of every key of the slot;
    /// SETSLOT NODE `to` on every master. migrate_slot() does all three.
    void begin_migration(std::uint16_t slot, std::size_t from, std::size_t to);
    void move_keys(std::uint16_t slot, std::size_t from, std::size_t to);
    void finish_migration(std::uint16_t slot, std::size_t to);
    void migrate_slot(std::uint16_t slot, std::size_t from, std::size_t to);
    /// CLUSTER FAILOVER on replica `r`; waits until it reports ROLE master and every node
    /// cluster_state:ok, or throws after `budget`.
    void failover_to(std::size_t r, std::chrono::milliseconds budget);

private:
    std::vector<std::unique_ptr<redis_server>> nodes_{};
};

/// Polls `pred` every 5 ms until it returns true or `budget` passes. Returns the last result.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds budget);

} // namespace dlock::test

#include <thread>

template <class Pred>
bool dlock::test::eventually(Pred pred, std::chrono::milliseconds budget) {
    const auto until = std::chrono::steady_clock::now() + budget;
    for (;;) {
        if (pred()) return true;
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}
