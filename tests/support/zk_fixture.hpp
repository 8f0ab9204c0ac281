// zk_fixture.hpp: RAII ZooKeeper servers for tests and benchmarks (zookeeper-sql.md §1b).
//
// A standalone server or a 3-node ensemble from Debian's `zookeeper` package (jars only; never
// `zookeeperd`, whose postinst starts a system service), run by Java 17 on free loopback
// ports, each in its own temporary directory with its own zoo.cfg; a child process that dies
// with the test process (PR_SET_PDEATHSIG); ready when it answers the four-letter word `ruok`
// with `imok` (and, for an ensemble, when `srvr` reports a leader and the followers); stopped
// and its directory removed on destruction, also when a test fails. The fixture speaks only
// the four-letter words over a plain socket: it does not depend on the code under test.
//
// tickTime defaults to 200 ms, so sessions may be 400 ms .. 4 s (the server clamps a requested
// timeout to [2, 20] x tickTime) and expiry tests are fast. Containers are reaped every second.
//
// Binaries: $DLOCK_TEST_JAVA or java on PATH; the jars from $DLOCK_TEST_ZOOKEEPER_JAR or
// /usr/share/java/zookeeper.jar. Tests GTEST_SKIP() when zookeeper_available() is false.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace dlock::test {

bool zookeeper_available();

struct zk_options {
    int tick_ms = 200;                       ///< tickTime (session bounds 2x..20x)
    std::vector<std::string> extra_config{}; ///< raw zoo.cfg lines appended
};

class zk_server {
public:
    /// Starts a standalone server and waits (20 s budget) until it answers `ruok`.
    /// Errors: std::runtime_error with the tail of the server log.
    explicit zk_server(zk_options opts = {});
    ~zk_server();
    zk_server(const zk_server&) = delete;
    zk_server& operator=(const zk_server&) = delete;

    std::uint16_t port() const { return port_; }
    /// "127.0.0.1:PORT"
    std::string host_port() const;
    /// "zk://127.0.0.1:PORT" + chroot (e.g. "/locks").
    std::string url(const std::string& chroot = {}) const;
    pid_t pid() const { return pid_; }
    const std::filesystem::path& dir() const { return dir_; }

    void start(); ///< (re)start on the same port and data; waits for `imok`
    void stop();  ///< SIGTERM, SIGKILL after 5 s
    void kill();  ///< SIGKILL
    void pause();
    void resume();
    /// Sends a four-letter word ("ruok", "srvr", "mntr", "cons") and returns the answer ("" on
    /// a connect error).
    std::string four_letter(const std::string& word) const;

private:
    friend class zk_ensemble;
    zk_server(zk_options opts, std::uint16_t port, std::filesystem::path dir, int myid);
    void write_config(const std::vector<std::string>& quorum_lines);
    void wait_ready(std::chrono::milliseconds budget, bool quorum);

    zk_options opts_{};
    std::filesystem::path dir_{};
    std::uint16_t port_ = 0;
    int myid_ = 0; ///< 0: standalone
    pid_t pid_ = -1;
    bool owns_dir_ = true;
};

/// Three QuorumPeerMain servers on loopback (tickTime 200, initLimit 20, syncLimit 10). Ready
/// when one reports `Mode: leader` and the others `Mode: follower`.
class zk_ensemble {
public:
    explicit zk_ensemble(zk_options opts = {});
    ~zk_ensemble();
    zk_ensemble(const zk_ensemble&) = delete;
    zk_ensemble& operator=(const zk_ensemble&) = delete;

    std::size_t size() const { return servers_.size(); }
    zk_server& server(std::size_t i) { return *servers_.at(i); }
    /// "zk://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3" + chroot
    std::string url(const std::string& chroot = {}) const;
    /// How long a follower cut off from the leader may go on answering, (syncLimit + 1) x
    /// tickTime: the zk:// URL's server_lag for this ensemble.
    std::chrono::milliseconds server_lag() const {
        return std::chrono::milliseconds(11 * tick_ms_);
    }
    /// The index of the server whose `srvr` says leader, if any.
    std::optional<std::size_t> leader() const;
    /// Waits (budget) until the running servers have a leader; returns its index.
    std::size_t wait_leader(std::chrono::milliseconds budget) const;

private:
    std::filesystem::path dir_{};
    int tick_ms_ = 200;
    std::vector<std::unique_ptr<zk_server>> servers_{};
};

} // namespace dlock::test
