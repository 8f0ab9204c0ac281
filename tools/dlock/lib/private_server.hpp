// private_server.hpp: a throw-away redis-server for `dlock demo` when no --url is given, or a
// throw-away ZooKeeper (`dlock demo --backend zookeeper`: Debian's zookeeper jars run by java),
// or a throw-away PostgreSQL (`dlock demo --backend postgresql`: Debian's postgresql-15, initdb
// and postgres run as the `postgres` user when dlock runs as root, which initdb requires), or a
// throw-away etcd member (`dlock demo --backend etcd`: Debian's etcd-server).
//
// A small launcher of its own (the test fixture in tests/support is test-only): a free loopback
// port chosen by binding port 0, a temporary directory, no persistence, readiness by PING with
// a deadline, and the server killed (also when dlock dies: PR_SET_PDEATHSIG) and its directory
// removed at the end, also on errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <sys/types.h>
#include <vector>

namespace dlock::cli {

class private_server {
public:
    enum class kind { redis, zookeeper, postgresql, etcd };
    /// Starts `redis-server` ($DLOCK_REDIS_SERVER, else the one on PATH) and waits until it
    /// answers PING; or ZooKeeper (java on PATH, $DLOCK_ZOOKEEPER_JAR, else
    /// /usr/share/java/zookeeper.jar) until it answers `ruok` with `imok`; or PostgreSQL
    /// (initdb and postgres from $DLOCK_PG_BIN, else /usr/lib/postgresql/15/bin; trust
    /// authentication on 127.0.0.1 only) until its postmaster.pid says "ready"; or etcd
    /// ($DLOCK_ETCD, else etcd on PATH) until its /health says true. Blocking: up to
    /// `ready_budget` (per attempt; a port taken meanwhile is retried on another port, three
    /// attempts in all). Errors: std::runtime_error naming the cause (binary missing, the server's
    /// last log line, no answer within the budget).
    explicit private_server(std::chrono::milliseconds ready_budget = std::chrono::seconds(10),
                            kind k = kind::redis);
    /// Kills the server (SIGKILL: it has nothing to save), reaps it, removes its directory.
    ~private_server();
    private_server(const private_server&) = delete;
    private_server& operator=(const private_server&) = delete;

    std::uint16_t port() const { return port_; }
    /// "redis://127.0.0.1:PORT", "zk://127.0.0.1:PORT" or
    /// "postgresql://postgres@127.0.0.1:PORT/postgres" or "etcd://127.0.0.1:PORT".
    std::string url() const;

private:
    /// One attempt on a fresh port; false when the server exited (port taken, bad binary).
    bool start_once(const std::string& binary, std::chrono::milliseconds budget);
    std::vector<std::string> arguments(const std::string& binary) const;
    bool ready() const;
    /// PostgreSQL: initdb into the directory (once; as `postgres` when root).
    void init_postgres(const std::string& bin_dir);
    void stop() noexcept;
    std::string last_log_line() const;

    kind kind_;
    std::filesystem::path dir_{};
    std::uint16_t port_ = 0;
    std::uint16_t peer_port_ = 0; ///< etcd's peer URL (unused: one member)
    pid_t pid_ = -1;
};

/// A loopback TCP port that was free a moment ago (bound to port 0, then closed).
/// Errors: std::system_error.
std::uint16_t pick_free_port();

/// True when a server on 127.0.0.1:`port` answers "+PONG" to PING within `budget`.
bool answers_ping(std::uint16_t port, std::chrono::milliseconds budget);
/// True when a ZooKeeper on 127.0.0.1:`port` answers "imok" to "ruok" within `budget`.
bool answers_ruok(std::uint16_t port, std::chrono::milliseconds budget);
/// True when an etcd member on 127.0.0.1:`port` answers GET /health with "health":"true".
bool answers_health(std::uint16_t port, std::chrono::milliseconds budget);

} // namespace dlock::cli
