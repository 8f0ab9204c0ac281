#include "pg_fixture.hpp"

#include "process.hpp"
#include "redis_fixture.hpp" // free_port()
#include "throwaway_postgres.hpp"

#include <cstdlib>
#include <fstream>
#include <optional>
#include <pwd.h>
#include <signal.h>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace dlock::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// The uid/gid the server runs as: `postgres` when we are root, else ourselves.
struct identity {
    bool drop = false;
    uid_t uid = 0;
    gid_t gid = 0;
};

/// The `postgres` user's ids, if there is one (getpwnam_r: tests start servers from threads).
std::optional<std::pair<uid_t, gid_t>> postgres_user() {
    passwd pw{};
    passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r("postgres", &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr)
        return std::nullopt;
    return std::make_pair(pw.pw_uid, pw.pw_gid);
}

identity server_identity() {
    identity id;
    if (::geteuid() != 0) return id;
    const auto user = postgres_user();
    if (!user) throw std::runtime_error("running as root and there is no `postgres` user");
    id.drop = true;
    id.uid = user->first;
    id.gid = user->second;
    return id;
}

/// `argv` started as the server identity; stdout and stderr to `log`. `die_with_parent`
/// for the long-running postmaster. Returns the child's pid.
pid_t launch(const std::vector<std::string>& argv, const fs::path& log, bool die_with_parent) {
    const identity id = server_identity();
    spawn_options o;
    o.die_with_parent = die_with_parent;
    if (id.drop) o.run_as = std::make_pair(id.uid, id.gid);
    return spawn_child(argv, log, o);
}

void write_file(const fs::path& p, const std::string& text) {
    std::ofstream f(p);
    f << text;
    if (!f) throw std::runtime_error("cannot write " + p.string());
}

void give_to_server(const fs::path& p) {
    const identity id = server_identity();
    if (id.drop && ::chown(p.c_str(), id.uid, id.gid) != 0)
        throw std::runtime_error("chown failed on " + p.string());
}

/// Runs psql (as ourselves; the socket is trusted) and captures stdout; stderr to `err`.
std::pair<std::string, int> run_psql(const fs::path& sock_dir, std::uint16_t port,
                                     const std::string& sql, const fs::path& err) {
    return run_capture({pg_bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h",
                        sock_dir.string(), "-p", std::to_string(port), "-U", "postgres", "-d",
                        "postgres", "-c", sql},
                       {}, err);
}

} // namespace

std::string pg_bin(const char* name) {
    const char* env = std::getenv("DLOCK_TEST_PG_BIN");
    const fs::path dir = env && *env ? fs::path(env) : fs::path("/usr/lib/postgresql/15/bin");
    return (dir / name).string();
}

bool postgres_available() {
    if (::access(pg_bin("initdb").c_str(), X_OK) != 0 ||
        ::access(pg_bin("postgres").c_str(), X_OK) != 0 ||
        ::access(pg_bin("psql").c_str(), X_OK) != 0)
        return false;
    return ::geteuid() != 0 || postgres_user().has_value();
}

pg_server::pg_server(std::vector<std::string> extra_config)
    : extra_(std::move(extra_config)) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dlock-pg-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    try {
        give_to_server(dir_);
        write_file(dir_ / "pw", password() + "\n");
        give_to_server(dir_ / "pw");
        const pid_t init = launch(
            tools::throwaway_initdb_args(pg_bin("initdb"), (dir_ / "data").string(),
                                         {"--pwfile=" + (dir_ / "pw").string(),
                                          "--auth-local=trust", "--auth-host=scram-sha-256"}),
            dir_ / "initdb.log", false);
        if (wait_child(init) != 0)
            throw std::runtime_error("initdb failed: " + read_tail(dir_ / "initdb.log", 2000));
        port_ = free_port();
        start();
        psql("CREATE ROLE limited LOGIN PASSWORD '" + limited_password() + "'");
    } catch (...) {
        if (pid_ > 0) kill();
        std::error_code ec;
        fs::remove_all(dir_, ec);
        throw;
    }
}

pg_server::~pg_server() {
    try {
        stop();
    } catch (...) {
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

pid_t pg_server::spawn_as_server(const std::vector<std::string>& argv, const fs::path& log) const {
    return launch(argv, log, true);
}

std::string pg_server::url(std::string_view params) const {
    return url_as("postgres", password(), params);
}

std::string pg_server::url_as(std::string_view user, std::string_view pass,
                              std::string_view params) const {
    std::string u = "postgresql://";
    u.append(user).append(":").append(pass).append("@127.0.0.1:");
    u.append(std::to_string(port_)).append("/postgres");
    if (!params.empty()) u.append("?").append(params);
    return u;
}

std::string pg_server::psql(const std::string& sql) const {
    auto [out, rc] = run_psql(dir_, port_, sql, dir_ / "psql.err");
    if (rc != 0)
        throw std::runtime_error("psql failed (" + sql + "): " + read_tail(dir_ / "psql.err", 500));
    return out;
}

bool pg_server::running() const {
    return pid_ > 0 && ::kill(pid_, 0) == 0;
}

void pg_server::start() {
    std::vector<std::string> settings{"max_connections=200"};
    settings.insert(settings.end(), extra_.begin(), extra_.end());
    const auto argv = tools::throwaway_server_args(pg_bin("postgres"), (dir_ / "data").string(),
                                                   port_, dir_.string(), settings);
    pid_ = launch(argv, dir_ / "server.log", true);
    const auto until = std::chrono::steady_clock::now() + 30s;
    for (;;) {
        if (::kill(pid_, 0) != 0 || reap_child(pid_, 0ms)) {
            pid_ = -1;
            throw std::runtime_error("postgres exited: " + log_tail());
        }
        auto [out, rc] = run_psql(dir_, port_, "SELECT 1", dir_ / "psql.err");
        if (rc == 0 && out == "1") return;
        if (std::chrono::steady_clock::now() >= until)
            throw std::runtime_error("postgres not ready within 30 s: " + log_tail());
        std::this_thread::sleep_for(20ms);
    }
}

void pg_server::stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGINT); // fast shutdown
    if (!reap_child(pid_, 10s)) {
        ::kill(pid_, SIGKILL);
        reap_child(pid_, 5s);
    }
    pid_ = -1;
}

namespace {

/// The processes whose parent is `parent` (from /proc/PID/stat).
std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> out;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
        const auto name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream in(e.path() / "stat");
        std::string line;
        if (!std::getline(in, line)) continue;
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        const auto close = line.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(line.substr(close + 1));
        char state = 0;
        pid_t ppid = 0;
        if (rest >> state >> ppid && ppid == parent) out.push_back(std::stoi(name));
    }
    return out;
}

} // namespace

void pg_server::pause() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGSTOP); // first: it starts no process while its children are stopped
    for (const pid_t c : children_of(pid_))
        ::kill(c, SIGSTOP);
}

void pg_server::resume() {
    if (pid_ <= 0) return;
    for (const pid_t c : children_of(pid_))
        ::kill(c, SIGCONT);
    ::kill(pid_, SIGCONT);
}

void pg_server::kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    reap_child(pid_, 5s);
    pid_ = -1;
}

std::string pg_server::log_tail() const {
    return read_tail(dir_ / "server.log", 2000);
}

} // namespace dlock::test
