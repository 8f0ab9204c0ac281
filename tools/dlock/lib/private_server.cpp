// private_server.cpp: the throw-away server of `dlock demo` (redis-server, ZooKeeper,
// PostgreSQL).
#include "private_server.hpp"

#include "common.hpp"
#include "throwaway_postgres.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sstream>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <vector>

namespace dlock::cli {
namespace {

namespace fs = std::filesystem;
using clock = std::chrono::steady_clock;

/// `name` on $PATH (or `override_env` when set); empty when not found.
std::string find_binary(const char* override_env, const char* name) {
    if (const char* p = std::getenv(override_env); p && *p) return p;
    const char* path = std::getenv("PATH");
    std::stringstream ss(path ? path : "/usr/local/bin:/usr/bin:/bin");
    std::string dir;
    while (std::getline(ss, dir, ':')) {
        if (dir.empty()) continue;
        const fs::path candidate = fs::path(dir) / name;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
    return {};
}

/// A socket descriptor closed on scope exit.
struct socket_fd {
    int fd;
    ~socket_fd() {
        if (fd >= 0) ::close(fd);
    }
};

/// PostgreSQL's binaries: $DLOCK_PG_BIN, else Debian's postgresql-15 directory.
std::string pg_bin_dir() {
    const char* env = std::getenv("DLOCK_PG_BIN");
    return env && *env ? env : "/usr/lib/postgresql/15/bin";
}

/// Who runs PostgreSQL: initdb refuses root, so root hands it to the `postgres` user.
struct pg_identity {
    bool drop = false;
    uid_t uid = 0;
    gid_t gid = 0;
};

pg_identity postgres_identity() {
    pg_identity id;
    if (::geteuid() != 0) return id;
    passwd entry{};
    passwd* pw = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r("postgres", &entry, buf.data(), buf.size(), &pw) != 0) pw = nullptr;
    if (!pw)
        throw failure(exit_code::unavailable,
                      "running as root and there is no `postgres` user (install postgresql-15)");
    id.drop = true;
    id.uid = pw->pw_uid;
    id.gid = pw->pw_gid;
    return id;
}

/// In a forked child: the server's identity (PostgreSQL when root); false when that failed.
bool become(const pg_identity& id) {
    return !id.drop || (::setgid(id.gid) == 0 && ::setuid(id.uid) == 0);
}

sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    return a;
}

} // namespace

std::uint16_t pick_free_port() {
    socket_fd s{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    if (s.fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
    auto a = loopback(0);
    socklen_t len = sizeof a;
    if (::bind(s.fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::system_error(errno, std::generic_category(), "bind to a free port");
    return ntohs(a.sin_port);
}

namespace {
/// Sends `request` to 127.0.0.1:`port` and reads until `done(reply)` or `budget` passed.
std::string ask(std::uint16_t port, std::string_view request, std::chrono::milliseconds budget,
                bool (*done)(const std::string&)) {
    socket_fd s{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    if (s.fd < 0) return {};
    auto a = loopback(port);
    if (::connect(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return {};
    if (::send(s.fd, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size()))
        return {};
    std::string reply;
    const auto until = clock::now() + budget;
    while (!done(reply)) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - clock::now());
        if (left.count() <= 0) return reply;
        pollfd p{s.fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return reply;
        char buf[64];
        const auto n = ::recv(s.fd, buf, sizeof buf, 0);
        if (n <= 0) return reply;
        reply.append(buf, static_cast<std::size_t>(n));
    }
    return reply;
}
} // namespace

bool answers_ping(std::uint16_t port, std::chrono::milliseconds budget) {
    const auto reply = ask(port, "PING\r\n", budget, [](const std::string& r) {
        return r.find("\r\n") != std::string::npos;
    });
    return reply.rfind("+PONG", 0) == 0;
}

bool answers_ruok(std::uint16_t port, std::chrono::milliseconds budget) {
    // The server closes the connection after its answer; "imok" is all of it.
    return ask(port, "ruok", budget, [](const std::string& r) { return r.size() >= 4; }) == "imok";
}

bool answers_health(std::uint16_t port, std::chrono::milliseconds budget) {
    // HTTP/1.0: the member closes the connection after its answer.
    return ask(port, "GET /health HTTP/1.0\r\n\r\n", budget, [](const std::string& r) {
               return r.find("}") != std::string::npos;
           }).find("\"health\":\"true\"") != std::string::npos;
}

private_server::private_server(std::chrono::milliseconds ready_budget, kind k)
    : kind_(k) {
    const bool zk = k == kind::zookeeper, pg = k == kind::postgresql, etcd = k == kind::etcd;
    const auto binary = pg     ? pg_bin_dir() + "/postgres"
                        : zk   ? find_binary("DLOCK_JAVA", "java")
                        : etcd ? find_binary("DLOCK_ETCD", "etcd")
                               : find_binary("DLOCK_REDIS_SERVER", "redis-server");
    if (binary.empty() || ::access(binary.c_str(), X_OK) != 0)
        throw failure(exit_code::unavailable,
                      pg     ? binary + " not found (install Debian's postgresql-15, or set "
                                        "DLOCK_PG_BIN)"
                      : zk   ? "java not found on PATH (install Debian's zookeeper package)"
                      : etcd ? "etcd not found on PATH (install Debian's etcd-server package)"
                             : "redis-server not found on PATH (install redis-server, or give "
                               "--url redis://HOST:PORT)");
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dlock-demo-XXXXXX";
    if (!::mkdtemp(tmpl.data()))
        throw std::system_error(errno, std::generic_category(), "mkdtemp " + tmpl);
    dir_ = tmpl;
    try {
        if (pg) init_postgres(pg_bin_dir());
        for (int attempt = 0; attempt < 3; ++attempt)
            if (start_once(binary, ready_budget)) return;
        throw failure(exit_code::unavailable, std::string(pg     ? "PostgreSQL"
                                                          : zk   ? "ZooKeeper"
                                                          : etcd ? "etcd"
                                                                 : "redis-server") +
                                                  " did not start: " + last_log_line());
    } catch (...) {
        stop();
        throw;
    }
}

private_server::~private_server() {
    stop();
}

std::string private_server::url() const {
    if (kind_ == kind::postgresql)
        return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres";
    if (kind_ == kind::etcd) return "etcd://127.0.0.1:" + std::to_string(port_);
    return (kind_ == kind::zookeeper ? "zk://127.0.0.1:" : "redis://127.0.0.1:") +
           std::to_string(port_);
}

void private_server::init_postgres(const std::string& bin_dir) {
    const auto id = postgres_identity();
    if (id.drop && ::chown(dir_.c_str(), id.uid, id.gid) != 0)
        throw std::system_error(errno, std::generic_category(), "chown " + dir_.string());
    const auto args = tools::throwaway_initdb_args(bin_dir + "/initdb", (dir_ / "data").string(),
                                                   {"--auth=trust"});
    std::vector<char*> argv;
    for (const auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const auto log_path = (dir_ / "server.log").string();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
    if (pid == 0) {
        if (!become(id)) ::_exit(126); // first: the log is then the server's to append to
        const int devnull = ::open("/dev/null", O_RDWR);
        if (devnull >= 0) ::dup2(devnull, 0);
        const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        for (int fd = 1; fd < 3; ++fd)
            ::dup2(log >= 0 ? log : devnull, fd);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw failure(exit_code::unavailable, "initdb failed: " + last_log_line());
}

std::vector<std::string> private_server::arguments(const std::string& binary) const {
    if (kind_ == kind::postgresql) // no durability: the data dies with the demo
        return tools::throwaway_server_args(binary, (dir_ / "data").string(), port_, dir_.string(),
                                            {});
    if (kind_ == kind::etcd) { // one member, its data in the directory
        const auto client = "http://127.0.0.1:" + std::to_string(port_);
        const auto peer = "http://127.0.0.1:" + std::to_string(peer_port_);
        return {binary,
                "--name",
                "demo",
                "--data-dir",
                (dir_ / "data").string(),
                "--listen-client-urls",
                client,
                "--advertise-client-urls",
                client,
                "--listen-peer-urls",
                peer,
                "--initial-advertise-peer-urls",
                peer,
                "--initial-cluster",
                "demo=" + peer};
    }
    if (kind_ == kind::redis)
        return {binary,        "--port",    std::to_string(port_), "--bind",      "127.0.0.1",
                "--save",      "",          "--appendonly",        "no",          "--dir",
                dir_.string(), "--logfile", "redis.log",           "--daemonize", "no"};
    // ZooKeeper standalone: zoo.cfg in the directory (no admin server, `ruok` allowed).
    std::ofstream cfg(dir_ / "zoo.cfg");
    cfg << "tickTime=2000\ndataDir=" << (dir_ / "data").string()
        << "\nclientPortAddress=127.0.0.1\nclientPort=" << port_
        << "\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\n";
    const char* jar = std::getenv("DLOCK_ZOOKEEPER_JAR");
    return {binary,
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-cp",
            jar && *jar ? jar : "/usr/share/java/zookeeper.jar",
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            (dir_ / "zoo.cfg").string()};
}

bool private_server::ready() const {
    if (kind_ == kind::postgresql) {
        // As pg_ctl waits: the postmaster.pid's 8th line says "ready" once connections are
        // accepted (its 4th line is the port, a check that this is our server).
        std::ifstream pid_file(dir_ / "data" / "postmaster.pid");
        std::string line;
        for (int i = 1; std::getline(pid_file, line); ++i) {
            if (i == 4 && line != std::to_string(port_)) return false;
            if (i == 8) return line.rfind("ready", 0) == 0;
        }
        return false;
    }
    if (kind_ == kind::etcd) return answers_health(port_, std::chrono::milliseconds(200));
    return kind_ == kind::zookeeper ? answers_ruok(port_, std::chrono::milliseconds(200))
                                    : answers_ping(port_, std::chrono::milliseconds(200));
}

bool private_server::start_once(const std::string& binary, std::chrono::milliseconds budget) {
    port_ = pick_free_port();
    if (kind_ == kind::etcd) peer_port_ = pick_free_port();
    const auto args = arguments(binary);
    std::vector<char*> argv;
    for (const auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const auto log_path = (dir_ / "server.log").string();
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) throw std::system_error(errno, std::generic_category(), "fork");
    const auto id = kind_ == kind::postgresql ? postgres_identity() : pg_identity{};
    if (pid_ == 0) {
        // Credentials first: a change of them clears the parent-death signal.
        if (!become(id)) ::_exit(126);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);
        const int devnull = ::open("/dev/null", O_RDWR);
        if (devnull >= 0) ::dup2(devnull, 0);
        // ZooKeeper logs to stderr (when an SLF4J binding is present); redis to its logfile.
        const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        for (int fd = 1; fd < 3; ++fd)
            ::dup2(log >= 0 ? log : devnull, fd);
        sigset_t none;
        sigemptyset(&none);
        ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    const auto until = clock::now() + budget;
    for (;;) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return false; // exited: port taken meanwhile, or a broken binary
        }
        if (ready()) return true;
        if (clock::now() >= until)
            throw failure(exit_code::unavailable,
                          std::string(kind_ == kind::postgresql  ? "PostgreSQL was not ready"
                                      : kind_ == kind::zookeeper ? "ZooKeeper did not answer ruok"
                                      : kind_ == kind::etcd      ? "etcd's /health did not say true"
                                                            : "redis-server did not answer PING") +
                              " within " + std::to_string(budget.count()) + " ms");
        std::this_thread::sleep_for(std::chrono::milliseconds(10)); // readiness poll interval
    }
}

void private_server::stop() noexcept {
    if (pid_ > 0 && kind_ == kind::postgresql) {
        // A fast shutdown (SIGINT) removes the server's shared memory; SIGKILL would leave it.
        ::kill(pid_, SIGINT);
        const auto until = clock::now() + std::chrono::seconds(10);
        int status = 0;
        pid_t r = 0;
        while ((r = ::waitpid(pid_, &status, WNOHANG)) == 0 && clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(10)); // shutdown poll interval
        if (r == pid_) pid_ = -1;
    }
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
    }
    if (!dir_.empty()) {
        std::error_code ec;
        fs::remove_all(dir_, ec);
        dir_.clear();
    }
}

std::string private_server::last_log_line() const {
    std::ifstream log(dir_ / (kind_ == kind::redis ? "redis.log" : "server.log"));
    std::string line, last;
    while (std::getline(log, line))
        if (!line.empty()) last = line;
    return last.empty() ? "no log output (is the server binary working?)" : last;
}

} // namespace dlock::cli
