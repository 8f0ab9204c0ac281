// pg_fixture.hpp: an RAII PostgreSQL server for tests and benchmarks.
//
// initdb into a fresh temporary directory, then the postmaster as a child process on a free
// loopback port (killed by the kernel if the test process dies: PR_SET_PDEATHSIG; pg_ctl would
// detach it, and a test killed by its CTest timeout would leave the server behind), declared
// ready when psql answers `SELECT 1` on the private Unix socket; stopped (pg_ctl's fast
// shutdown signal, SIGINT) and its directory removed on destruction, also when a test fails.
// As root, initdb and the server run as the `postgres` user (initdb refuses root).
//
// Authentication: trust on the private Unix socket (psql, the fixture's own queries), SCRAM on
// TCP; the superuser `postgres` has password() and the role `limited` (LOGIN, no CREATE on any
// schema) has limited_password(). The fixture talks to the server through psql only, so it
// does not depend on the code under test.
//
// Binaries: $DLOCK_TEST_PG_BIN, else /usr/lib/postgresql/15/bin (Debian's postgresql-15).
// Tests GTEST_SKIP() when postgres_available() is false.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace dlock::test {

bool postgres_available();

/// The path of the PostgreSQL program `name` (psql, initdb ...) the fixture uses.
std::string pg_bin(const char* name);

class pg_server {
public:
    /// initdb (about 0.7 s) and start (about 0.2 s); throws std::runtime_error with the log tail.
    /// `extra_config`: `name=value` server settings added with -c.
    explicit pg_server(std::vector<std::string> extra_config = {});
    ~pg_server();
    pg_server(const pg_server&) = delete;
    pg_server& operator=(const pg_server&) = delete;

    std::uint16_t port() const { return port_; }
    static std::string password() { return "dlock-test-pw"; }
    static std::string limited_password() { return "limited-pw"; }
    /// "postgresql://postgres:PASSWORD@127.0.0.1:PORT/postgres", then `?params` when given.
    std::string url(std::string_view params = {}) const;
    /// The same URL for another user and password.
    std::string url_as(std::string_view user, std::string_view pass,
                       std::string_view params = {}) const;

    /// Runs `sql` through psql as the superuser on the Unix socket; returns the unaligned,
    /// tuples-only output without the trailing newline. Throws on psql failure.
    std::string psql(const std::string& sql) const;

    /// Starts `argv` as the server's user (`postgres` when we are root; a program that refuses
    /// root, as PgBouncer does), output to `log`, killed if this process dies. Returns its pid.
    pid_t spawn_as_server(const std::vector<std::string>& argv,
                          const std::filesystem::path& log) const;

    pid_t pid() const { return pid_; }
    bool running() const;
    void start(); ///< (re)starts on the same port and data; waits until it answers
    void stop();  ///< fast shutdown (SIGINT): sessions are ended with 57P01
    void kill();  ///< SIGKILL of the postmaster (its backends exit when they notice)
    /// SIGSTOP / SIGCONT of the postmaster and every process it started (the session backends
    /// too: a paused server answers no session).
    void pause();
    void resume();
    void restart() {
        stop();
        start();
    }
    const std::filesystem::path& dir() const { return dir_; }

private:
    std::string log_tail() const;
    std::filesystem::path dir_{};
    std::vector<std::string> extra_{};
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
};

} // namespace dlock::test
