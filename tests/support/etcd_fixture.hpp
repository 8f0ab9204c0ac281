// etcd_fixture.hpp: RAII etcd members for tests and benchmarks.
//
// A standalone member or a cluster of N members from Debian's etcd-server package, each a child
// process (it dies with the test process) on free loopback ports for its client and peer URLs,
// in its own temporary data directory; ready when its HTTP /health answers "true" (a leader
// exists); stopped and its directory removed on destruction, also when a test fails. The
// fixture speaks only HTTP /health over a plain socket: it does not depend on the code under
// test. etcdctl (Debian's etcd-client) is run through etcdctl(). With etcd_options::tls the
// client port speaks only TLS (certificates from make_tls(), redis_fixture.hpp), /health moves
// to a plain metrics port, and etcdctl() verifies the server with the test CA.
//
// Binaries: $DLOCK_TEST_ETCD or /usr/bin/etcd; $DLOCK_TEST_ETCDCTL or /usr/bin/etcdctl. Tests
// GTEST_SKIP() when etcd_available() is false.
#pragma once

#include "redis_fixture.hpp" // tls_files, make_tls()

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace dlock::test {

bool etcd_available();
/// The etcdctl binary ("" when missing).
std::string etcdctl_binary();

class etcd_cluster;

struct etcd_options {
    bool tls = false;              ///< https client URLs with tls_files::server_cert
    bool client_cert_auth = false; ///< with tls: a client must show a certificate the CA signed
};

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
    /// The sum of the samples of metric `name` on the member's Prometheus /metrics whose
    /// labels contain `label` (e.g. grpc_server_handled_total with grpc_method="Txn": the Txns
    /// it answered). -1 when it does not answer.
    long long metric(std::string_view name, std::string_view label = {}) const;

private:
    friend class etcd_cluster;
    etcd_member(std::string name, std::filesystem::path dir, const etcd_cluster& cluster);
    std::vector<std::string> argv(const std::string& initial_cluster, bool fresh) const;

    std::string name_;
    std::filesystem::path dir_;
    const etcd_cluster* cluster_;
    std::uint16_t client_port_ = 0;
    std::uint16_t peer_port_ = 0;
    std::uint16_t metrics_port_ = 0; ///< /health with TLS on (0: the client port)
    std::string initial_cluster_{};
    bool started_once_ = false;
    pid_t pid_ = -1;
};

/// `size` members on loopback (1: a standalone server), heartbeat 50 ms and election timeout
/// 500 ms so that a leader is elected again quickly. Starts them and waits (30 s budget) until
/// each answers /health with true. Errors: std::runtime_error with the tail of a member's log.
class etcd_cluster {
public:
    explicit etcd_cluster(std::size_t size = 1, etcd_options opts = {});
    ~etcd_cluster();
    etcd_cluster(const etcd_cluster&) = delete;
    etcd_cluster& operator=(const etcd_cluster&) = delete;

    std::size_t size() const { return members_.size(); }
    etcd_member& member(std::size_t i) { return *members_.at(i); }
    /// "127.0.0.1:P1,127.0.0.1:P2,..." (every member's client address)
    std::string endpoints() const;
    /// "etcd://" (with TLS "etcds://") + endpoints() + prefix (e.g. "/locks") + query (e.g.
    /// "?ttl=5"; with TLS the caller adds cacert=, cert=, key= as the test needs).
    std::string url(const std::string& prefix = {}, const std::string& query = {}) const;
    const etcd_options& options() const { return opts_; }
    /// The certificates (empty paths without TLS).
    const tls_files& tls() const { return tls_; }
    /// Runs etcdctl against every member with `args`; stdout (trimmed) and the exit status.
    std::pair<std::string, int> etcdctl(const std::vector<std::string>& args) const;
    /// The argv that runs etcdctl with `args` (for a child the test keeps running).
    std::vector<std::string> etcdctl_argv(const std::vector<std::string>& args) const;
    /// The index of the member that etcdctl's `endpoint status` reports as the leader.
    std::optional<std::size_t> leader() const;
    const std::filesystem::path& dir() const { return dir_; }

private:
    /// etcdctl against `endpoints`, with the TLS flags the cluster needs.
    std::vector<std::string> etcdctl_argv_for(const std::string& endpoints,
                                              const std::string& dial_timeout,
                                              const std::vector<std::string>& args) const;

    std::filesystem::path dir_{};
    etcd_options opts_{};
    tls_files tls_{};
    std::vector<std::unique_ptr<etcd_member>> members_{};
};

} // namespace dlock::test
