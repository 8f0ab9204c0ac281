// etcd_fixture.hpp: RAII etcd members for tests and benchmarks.
//
// A standalone member or a cluster of N members from Debian's etcd-server package, each a child
// process (it dies with the test process) on free loopback ports for its client and peer URLs,
// in its own temporary data directory; ready when its HTTP /health answers "true" (a leader
// exists); stopped and its directory removed on destruction, also when a test fails. The
// fixture speaks only HTTP /health over a plain socket: it does not depend on the code under
// test. etcdctl (Debian's etcd-client) is run through etcdctl().
//
// Binaries: $DLOCK_TEST_ETCD or /usr/bin/etcd; $DLOCK_TEST_ETCDCTL or /usr/bin/etcdctl. Tests
// GTEST_SKIP() when etcd_available() is false.
#pragma once

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

bool etcd_available();
/// The etcdctl binary ("" when missing).
std::string etcdctl_binary();

class etcd_cluster;

/// One etcd member (standalone, or one of an etcd_cluster).
class etcd_member {
public:
    ~etcd_member();
    etcd_member(const etcd_member&) = delete;
    etcd_member& operator=(const etcd_member&) = delete;

    std::uint16_t client_port() const { return client_port_; }
    std::uint16_t peer_port() const { return peer_port_; }
    /// "127.0.0.1:PORT" (the client port)
    std::string host_port() const;
    pid_t pid() const { return pid_; }
    bool running() const { return pid_ > 0; }

    void start(); ///< (re)start on the same ports and data (as an existing member)
    void stop();  ///< SIGTERM, SIGKILL after 5 s
    void kill();  ///< SIGKILL
    void pause();
    void resume();
    /// The body of GET /health ("" when it does not answer).
    std::string health() const;
    /// Waits up to `budget` for /health to say true; false on timeout.
    bool wait_healthy(std::chrono::milliseconds budget) const;

private:
    friend class etcd_cluster;
    etcd_member(std::string name, std::filesystem::path dir);
    std::vector<std::string> argv(const std::string& initial_cluster, bool fresh) const;

    std::string name_;
    std::filesystem::path dir_;
    std::uint16_t client_port_ = 0;
    std::uint16_t peer_port_ = 0;
    std::string initial_cluster_{};
    bool started_once_ = false;
    pid_t pid_ = -1;
};

/// `size` members on loopback (1: a standalone server), heartbeat 50 ms and election timeout
/// 500 ms so that a leader is elected again quickly. Starts them and waits (30 s budget) until
/// each answers /health with true. Errors: std::runtime_error with the tail of a member's log.
class etcd_cluster {
public:
    explicit etcd_cluster(std::size_t size = 1);
    ~etcd_cluster();
    etcd_cluster(const etcd_cluster&) = delete;
    etcd_cluster& operator=(const etcd_cluster&) = delete;

    std::size_t size() const { return members_.size(); }
    etcd_member& member(std::size_t i) { return *members_.at(i); }
    /// "127.0.0.1:P1,127.0.0.1:P2,..." (every member's client address)
    std::string endpoints() const;
    /// "etcd://" + endpoints() + prefix (e.g. "/locks") + query (e.g. "?ttl=5").
    std::string url(const std::string& prefix = {}, const std::string& query = {}) const;
    /// Runs etcdctl against every member with `args`; stdout (trimmed) and the exit status.
    std::pair<std::string, int> etcdctl(const std::vector<std::string>& args) const;
    /// The argv that runs etcdctl with `args` (for a child the test keeps running).
    std::vector<std::string> etcdctl_argv(const std::vector<std::string>& args) const;
    /// The index of the member that etcdctl's `endpoint status` reports as the leader.
    std::optional<std::size_t> leader() const;
    const std::filesystem::path& dir() const { return dir_; }

private:
    std::filesystem::path dir_{};
    std::vector<std::unique_ptr<etcd_member>> members_{};
};

} // namespace dlock::test
