#include "pg_fixture.hpp"

#include "redis_fixture.hpp" // free_port()

#include <array>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <pwd.h>
#include <signal.h>
#include <sstream>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace dlock::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string pg_bin(const char* name) {
    const char* env = std::getenv("DLOCK_TEST_PG_BIN");
    const fs::path dir = env && *env ? fs::path(env) : fs::path("/usr/lib/postgresql/15/bin");
    return (dir / name).string();
}

/// The uid/gid the server runs as: `postgres` when we are root, else ourselves.
struct identity {
    bool drop = false;
    uid_t uid = 0;
    gid_t gid = 0;
};

identity server_identity() {
    identity id;
    if (::geteuid() != 0) return id;
    const passwd* pw = ::getpwnam("postgres");
    if (!pw) throw std::runtime_error("running as root and there is no `postgres` user");
    id.drop = true;
    id.uid = pw->pw_uid;
    id.gid = pw->pw_gid;
    return id;
}

/// fork + exec of `argv` as the server identity; stdout and stderr to `log`. `die_with_parent`
/// for the long-running postmaster. Returns the child's pid.
pid_t launch(const std::vector<std::string>& argv, const fs::path& log, bool die_with_parent) {
    const identity id = server_identity();
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid != 0) return pid;
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
    }
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    for (int i = 3; i < 1024; ++i)
        ::close(i);
    if (id.drop && (::setgid(id.gid) != 0 || ::setuid(id.uid) != 0)) ::_exit(126);
    // After setuid: a change of credentials clears the parent-death signal.
    if (die_with_parent) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
}

int wait_exit(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

bool reaped(pid_t pid, std::chrono::milliseconds budget) {
    const auto until = std::chrono::steady_clock::now() + budget;
    for (;;) {
        int status = 0;
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD)) return true;
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(5ms);
    }
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
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    const std::string psql = pg_bin("psql");
    const std::string host = sock_dir.string(), p = std::to_string(port);
    std::vector<std::string> argv{psql,       "-X", "-q", "-A", "-t", "-v",       "ON_ERROR_STOP=1",
                                  "-h",       host, "-p", p,    "-U", "postgres", "-d",
                                  "postgres", "-c", sql};
    std::vector<char*> args;
    for (auto& a : argv)
        args.push_back(a.data());
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        ::dup2(out[1], 1);
        const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) ::dup2(fd, 2);
        ::close(out[0]);
        ::close(out[1]);
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    ::close(out[1]);
    std::string text;
    std::array<char, 4096> buf{};
    for (;;) {
        const ssize_t n = ::read(out[0], buf.data(), buf.size());
        if (n > 0)
            text.append(buf.data(), static_cast<std::size_t>(n));
        else if (n == 0 || errno != EINTR)
            break;
    }
    ::close(out[0]);
    const int rc = wait_exit(pid);
    while (!text.empty() && text.back() == '\n')
        text.pop_back();
    return {text, rc};
}

std::string read_tail(const fs::path& p, std::size_t max) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    return s.size() > max ? s.substr(s.size() - max) : s;
}

} // namespace

bool postgres_available() {
    if (::access(pg_bin("initdb").c_str(), X_OK) != 0 ||
        ::access(pg_bin("postgres").c_str(), X_OK) != 0 ||
        ::access(pg_bin("psql").c_str(), X_OK) != 0)
        return false;
    return ::geteuid() != 0 || ::getpwnam("postgres") != nullptr;
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
        const pid_t init = launch({pg_bin("initdb"), "-D", (dir_ / "data").string(), "-U",
                                   "postgres", "--pwfile=" + (dir_ / "pw").string(),
                                   "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
                                   "--locale=C.UTF-8", "--no-sync", "--no-instructions"},
                                  dir_ / "initdb.log", false);
        if (wait_exit(init) != 0)
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

std::string pg_server::url(std::string_view params) const {
    return url_as("postgres", password(), params);
}

std::string pg_server::url_as(std::string_view user, std::string_view pass,
                              std::string_view params) const {
    std::string u = "postgresql://" + std::string(user) + ":" + std::string(pass) +
                    "@127.0.0.1:" + std::to_string(port_) + "/postgres";
    if (!params.empty()) u += "?" + std::string(params);
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
    std::vector<std::string> argv{pg_bin("postgres"),
                                  "-D",
                                  (dir_ / "data").string(),
                                  "-p",
                                  std::to_string(port_),
                                  "-k",
                                  dir_.string(),
                                  "-c",
                                  "listen_addresses=127.0.0.1",
                                  "-c",
                                  "fsync=off",
                                  "-c",
                                  "synchronous_commit=off",
                                  "-c",
                                  "full_page_writes=off",
                                  "-c",
                                  "max_connections=200"};
    for (const auto& c : extra_) {
        argv.push_back("-c");
        argv.push_back(c);
    }
    pid_ = launch(argv, dir_ / "server.log", true);
    const auto until = std::chrono::steady_clock::now() + 30s;
    for (;;) {
        if (::kill(pid_, 0) != 0 || reaped(pid_, 0ms)) {
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
    if (!reaped(pid_, 10s)) {
        ::kill(pid_, SIGKILL);
        reaped(pid_, 5s);
    }
    pid_ = -1;
}

void pg_server::kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    reaped(pid_, 5s);
    pid_ = -1;
}

std::string pg_server::log_tail() const {
    return read_tail(dir_ / "server.log", 2000);
}

} // namespace dlock::test
