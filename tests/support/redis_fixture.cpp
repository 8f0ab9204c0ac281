#include "redis_fixture.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <netinet/in.h>
#include <random>
#include <signal.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace dlock::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string find_binary(const char* env, const char* name) {
    if (const char* p = std::getenv(env); p && *p) return p;
    const char* path = std::getenv("PATH");
    std::stringstream ss(path ? path : "/usr/bin:/bin");
    std::string dir;
    while (std::getline(ss, dir, ':')) {
        const fs::path candidate = fs::path(dir) / name;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
    return {};
}

std::string server_binary() {
    return find_binary("DLOCK_TEST_REDIS_SERVER", "redis-server");
}
std::string cli_binary() {
    return find_binary("DLOCK_TEST_REDIS_CLI", "redis-cli");
}
std::string sentinel_binary() {
    return find_binary("DLOCK_TEST_REDIS_SENTINEL", "redis-sentinel");
}

fs::path make_temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dlock-test-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    return tmpl;
}

void terminate(pid_t pid, int sig) {
    if (pid <= 0) return;
    ::kill(pid, SIGCONT);
    ::kill(pid, sig);
    if (!reap_child(pid, 5s)) {
        ::kill(pid, SIGKILL);
        reap_child(pid, 5s);
    }
}

bool port_free(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

void write_file(const fs::path& p, const std::string& text) {
    std::ofstream f(p);
    f << text;
    if (!f) throw std::runtime_error("cannot write " + p.string());
}

void openssl(const std::vector<std::string>& args, const fs::path& dir) {
    std::vector<std::string> argv{find_binary("DLOCK_TEST_OPENSSL", "openssl")};
    argv.insert(argv.end(), args.begin(), args.end());
    if (argv[0].empty()) throw std::runtime_error("openssl not found");
    auto [out, rc] = run_capture(argv);
    if (rc != 0) throw std::runtime_error("openssl failed in " + dir.string() + ": " + args[0]);
}

std::vector<std::string> cli_base(const std::string& port, const server_options& o,
                                  const tls_files& t) {
    std::vector<std::string> a{cli_binary(), "--no-auth-warning", "--raw", "-h", "127.0.0.1", "-p",
                               port};
    if (o.tls) {
        a.insert(a.end(), {"--tls", "--cacert", t.ca_cert.string()});
        if (o.tls_wrong_host) a.insert(a.end(), {"--sni", "other.example"});
    }
    return a;
}

std::vector<std::string> auth_env(const std::string& password) {
    if (password.empty()) return {};
    return {"REDISCLI_AUTH=" + password};
}

} // namespace

tls_files make_tls(const fs::path& dir) {
    tls_files t;
    t.ca_cert = dir / "ca.crt";
    t.server_cert = dir / "server.crt";
    t.server_key = dir / "server.key";
    t.wrong_ca_cert = dir / "wrong-ca.crt";
    t.wrong_host_cert = dir / "other.crt";
    t.wrong_host_key = dir / "other.key";
    const auto p = [&](const char* f) { return (dir / f).string(); };
    const auto ca = [&](const char* key, const char* crt, const char* cn) {
        openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", p(key), "-out", p(crt), "-days", "1", "-subj",
                 std::string("/CN=") + cn},
                dir);
    };
    ca("ca.key", "ca.crt", "dlock test CA");
    ca("wrong-ca.key", "wrong-ca.crt", "unrelated CA");
    const auto leaf = [&](const char* key, const char* crt, const char* cn, const char* san) {
        const std::string csr = p("leaf.csr");
        const std::string ext = p("leaf.ext");
        write_file(ext, std::string("subjectAltName=") + san + "\n");
        openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                 p(key), "-out", csr, "-subj", std::string("/CN=") + cn},
                dir);
        openssl({"x509", "-req", "-in", csr, "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
                 "-CAcreateserial", "-out", p(crt), "-days", "1", "-extfile", ext},
                dir);
    };
    leaf("server.key", "server.crt", "localhost", "IP:127.0.0.1,DNS:localhost");
    leaf("other.key", "other.crt", "other.example", "DNS:other.example");
    return t;
}

bool redis_available() {
    return !server_binary().empty() && !cli_binary().empty();
}
bool sentinel_available() {
    return redis_available() && !sentinel_binary().empty();
}

namespace {

/// The kernel's ephemeral port range (outgoing connections take their local port from it).
std::pair<int, int> ephemeral_range() {
    std::ifstream f("/proc/sys/net/ipv4/ip_local_port_range");
    int lo = 0;
    int hi = 0;
    if (f >> lo >> hi && lo > 0 && hi >= lo) return {lo, hi};
    return {32768, 60999};
}

/// The last `lines_wanted` lines of a log file.
std::string file_tail(const fs::path& file, std::size_t lines_wanted) {
    std::ifstream f(file);
    std::deque<std::string> lines;
    for (std::string l; std::getline(f, l);) {
        lines.push_back(l);
        if (lines.size() > lines_wanted) lines.pop_front();
    }
    std::string s;
    for (auto& l : lines)
        s += l + "\n";
    return s;
}

} // namespace

std::uint16_t free_port(bool with_bus) {
    // Outside the ephemeral range: a port from it can be handed to an outgoing connection
    // between this check and the server's bind, and some servers bind late (a ZooKeeper
    // member binds its quorum port only when it becomes the leader; the fault suite's
    // free_listen_port() has the same rule, after Z08 seed 12 found the port taken).
    static const auto [lo, hi] = ephemeral_range();
    const auto outside = [](int p) { return p < lo || p > hi; };
    std::vector<int> candidates;
    for (int p = 10000; p < 65536 - (with_bus ? 10000 : 0); ++p)
        if (outside(p) && (!with_bus || outside(p + 10000))) candidates.push_back(p);
    if (candidates.empty()) throw std::runtime_error("no port outside the ephemeral range");
    thread_local std::mt19937 rng{std::random_device{}() ^ static_cast<unsigned>(::getpid())};
    std::uniform_int_distribution<std::size_t> dist(0, candidates.size() - 1);
    for (int i = 0; i < 500; ++i) {
        const auto p = static_cast<std::uint16_t>(candidates[dist(rng)]);
        if (port_free(p) && (!with_bus || port_free(static_cast<std::uint16_t>(p + 10000))))
            return p;
    }
    throw std::runtime_error("no free loopback port found");
}

redis_server::redis_server(server_options opts)
    : opts_(std::move(opts)) {
    binary_ = server_binary();
    if (binary_.empty()) throw std::runtime_error("redis-server not found");
    dir_ = make_temp_dir();
    try {
        if (opts_.tls) tls_ = make_tls(dir_);
        for (int attempt = 1;; ++attempt) {
            port_ = opts_.port ? *opts_.port : free_port(true);
            write_config();
            try {
                start();
                break;
            } catch (const std::runtime_error&) {
                // free_port() found the port free, and another test's server bound it before
                // this one did: try another port (a few times), with a fresh log.
                if (opts_.port || attempt == 5 ||
                    log_tail().find("Address already in use") == std::string::npos)
                    throw;
                std::error_code ec;
                fs::remove(dir_ / "redis.log", ec);
            }
        }
    } catch (...) {
        std::error_code ec;
        fs::remove_all(dir_, ec);
        throw;
    }
}

redis_server::~redis_server() {
    try {
        stop();
    } catch (...) {
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

std::string redis_server::url() const {
    return std::string(opts_.tls ? "rediss" : "redis") + "://127.0.0.1:" + std::to_string(port_);
}

void redis_server::write_config() {
    std::ostringstream c;
    if (opts_.tls) {
        c << "port 0\ntls-port " << port_ << "\n";
        const bool wrong = opts_.tls_wrong_host;
        c << "tls-cert-file " << (wrong ? tls_.wrong_host_cert : tls_.server_cert).string() << "\n";
        c << "tls-key-file " << (wrong ? tls_.wrong_host_key : tls_.server_key).string() << "\n";
        c << "tls-ca-cert-file " << tls_.ca_cert.string() << "\ntls-auth-clients no\n";
    } else {
        c << "port " << port_ << "\n";
    }
    c << "bind 127.0.0.1\nsave \"\"\nappendonly no\ndaemonize no\n";
    c << "dir " << dir_.string() << "\n";
    c << "logfile " << (dir_ / "redis.log").string() << "\n";
    c << "unixsocket " << unix_socket() << "\nunixsocketperm 700\n";
    c << "enable-debug-command local\n";
    if (!opts_.password.empty()) c << "requirepass " << opts_.password << "\n";
    for (auto& l : opts_.acl_lines)
        c << l << "\n";
    for (auto& l : opts_.extra_config)
        c << l << "\n";
    write_file(dir_ / "redis.conf", c.str());
}

bool redis_server::running() const {
    if (pid_ <= 0) return false;
    int status = 0;
    return ::waitpid(pid_, &status, WNOHANG) == 0;
}

void redis_server::start() {
    if (running()) return;
    pid_ = spawn_child({binary_, (dir_ / "redis.conf").string()}, dir_ / "stdout.log",
                       {.cpu = opts_.cpu});
    wait_ready(10s);
}

void redis_server::wait_ready(std::chrono::milliseconds budget) {
    const auto until = std::chrono::steady_clock::now() + budget;
    auto args = cli_base(std::to_string(port_), opts_, tls_);
    args.push_back("PING");
    for (;;) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            throw std::runtime_error("redis-server exited during start:\n" + log_tail());
        }
        // Without the password: a NOAUTH answer also proves the server is up.
        auto [out, rc] = run_capture(args);
        if (out.find("PONG") != std::string::npos || out.find("NOAUTH") != std::string::npos ||
            out.find("Authentication required") != std::string::npos)
            return;
        if (std::chrono::steady_clock::now() >= until) {
            kill();
            throw std::runtime_error("redis-server did not answer PING in time:\n" + log_tail());
        }
        std::this_thread::sleep_for(10ms);
    }
}

std::string redis_server::log_tail() const {
    return file_tail(dir_ / "redis.log", 20);
}

void redis_server::kill() {
    terminate(pid_, SIGKILL);
    pid_ = -1;
}

void redis_server::stop() {
    terminate(pid_, SIGTERM);
    pid_ = -1;
}

void redis_server::pause() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void redis_server::resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string redis_server::cli(const std::vector<std::string>& args) const {
    auto a = cli_base(std::to_string(port_), opts_, tls_);
    a.insert(a.end(), args.begin(), args.end());
    return run_capture(a, auth_env(opts_.password)).first;
}

// ---- N masters ---------------------------------------------------------------------------

redis_masters::redis_masters(std::size_t n, server_options opts) {
    for (std::size_t i = 0; i < n; ++i)
        servers_.push_back(std::make_unique<redis_server>(opts));
}

std::vector<std::string> redis_masters::urls() const {
    std::vector<std::string> u;
    for (auto& s : servers_)
        u.push_back(s->url());
    return u;
}

// ---- Sentinel ----------------------------------------------------------------------------

redis_sentinel_group::redis_sentinel_group(server_options opts, std::string sentinel_password)
    : password_(opts.password)
    , sentinel_password_(std::move(sentinel_password)) {
    if (!opts.password.empty()) opts.extra_config.push_back("masterauth " + opts.password);
    nodes_.push_back(std::make_unique<redis_server>(opts));
    const auto master_port = std::to_string(nodes_[0]->port());
    auto replica_opts = opts;
    replica_opts.extra_config.push_back("replicaof 127.0.0.1 " + master_port);
    for (int i = 0; i < 2; ++i)
        nodes_.push_back(std::make_unique<redis_server>(replica_opts));
    try {
        const auto bin = sentinel_binary();
        if (bin.empty()) throw std::runtime_error("redis-sentinel not found");
        for (int i = 0; i < 3; ++i)
            sentinels_.push_back(start_sentinel(bin, master_port, opts.password));
        // Ready: replicas linked, every sentinel sees 2 replicas and 2 other sentinels.
        const bool ok = eventually(
            [&] {
                for (int i = 1; i <= 2; ++i)
                    if (nodes_[static_cast<std::size_t>(i)]
                            ->cli({"INFO", "replication"})
                            .find("master_link_status:up") == std::string::npos)
                        return false;
                for (std::size_t i = 0; i < sentinels_.size(); ++i) {
                    const auto info = sentinel_cli(i, {"SENTINEL", "MASTER", "mymaster"});
                    std::istringstream ss(info);
                    std::string key, value;
                    int replicas = -1, others = -1;
                    while (std::getline(ss, key) && std::getline(ss, value)) {
                        if (key == "num-slaves") replicas = std::stoi(value);
                        if (key == "num-other-sentinels") others = std::stoi(value);
                    }
                    if (replicas != 2 || others != 2) return false;
                }
                return true;
            },
            30s);
        if (!ok)
            throw std::runtime_error("sentinel group did not become ready in 30 s:\n" +
                                     readiness_report());
    } catch (...) {
        stop_sentinels();
        throw;
    }
}

redis_sentinel_group::sentinel
redis_sentinel_group::start_sentinel(const std::string& bin, const std::string& master_port,
                                     const std::string& master_password) {
    for (int attempt = 1;; ++attempt) {
        sentinel s;
        s.dir = make_temp_dir();
        s.port = free_port();
        std::ostringstream c;
        c << "port " << s.port << "\nbind 127.0.0.1\ndaemonize no\n"
          << "dir " << s.dir.string() << "\nlogfile " << (s.dir / "sentinel.log").string()
          << "\nsentinel monitor mymaster 127.0.0.1 " << master_port << " 2\n"
          << "sentinel down-after-milliseconds mymaster 1000\n"
          << "sentinel failover-timeout mymaster 3000\n"
          << "sentinel parallel-syncs mymaster 1\n";
        if (!master_password.empty())
            c << "sentinel auth-pass mymaster " << master_password << "\n";
        if (!sentinel_password_.empty())
            c << "requirepass " << sentinel_password_ << "\nsentinel sentinel-pass "
              << sentinel_password_ << "\n";
        write_file(s.dir / "sentinel.conf", c.str());
        s.pid = spawn_child({bin, (s.dir / "sentinel.conf").string()}, s.dir / "stdout.log");
        // Up when it answers (NOAUTH too). A sentinel that exits lost its port to another
        // test's server between free_port() and its bind (as redis_server does): another port.
        bool up = false;
        bool exited = false;
        eventually(
            [&] {
                int status = 0;
                if (::waitpid(s.pid, &status, WNOHANG) == s.pid) return exited = true;
                const auto out = run_capture({cli_binary(), "-h", "127.0.0.1", "-p",
                                              std::to_string(s.port), "PING"})
                                     .first;
                up = out.find("PONG") != std::string::npos ||
                     out.find("NOAUTH") != std::string::npos ||
                     out.find("Authentication required") != std::string::npos;
                return up;
            },
            10s);
        if (up) return s;
        const auto log = file_tail(s.dir / "sentinel.log", 20);
        if (exited) s.pid = -1;
        terminate(s.pid, SIGKILL);
        std::error_code ec;
        fs::remove_all(s.dir, ec);
        if (!exited || attempt == 5 || log.find("Address already in use") == std::string::npos)
            throw std::runtime_error("redis-sentinel did not start on port " +
                                     std::to_string(s.port) + ":\n" + log);
    }
}

std::string redis_sentinel_group::readiness_report() const {
    std::string r;
    for (std::size_t i = 1; i < nodes_.size(); ++i) {
        const auto info = nodes_[i]->cli({"INFO", "replication"});
        r += "replica " + std::to_string(i) + ": " +
             (info.find("master_link_status:up") != std::string::npos ? "link up" : "link down") +
             "\n";
    }
    for (std::size_t i = 0; i < sentinels_.size(); ++i) {
        r += "sentinel " + std::to_string(sentinels_[i].port) + ":\n" +
             sentinel_cli(i, {"SENTINEL", "MASTER", "mymaster"}) + "log:\n" +
             file_tail(sentinels_[i].dir / "sentinel.log", 10);
    }
    return r;
}

redis_sentinel_group::~redis_sentinel_group() {
    stop_sentinels();
}

void redis_sentinel_group::stop_sentinels() {
    for (auto& s : sentinels_) {
        terminate(s.pid, SIGTERM);
        std::error_code ec;
        fs::remove_all(s.dir, ec);
    }
    sentinels_.clear();
}

std::string redis_sentinel_group::url() const {
    std::string u = "redis-sentinel://";
    for (std::size_t i = 0; i < sentinels_.size(); ++i) {
        if (i) u += ',';
        u += "127.0.0.1:" + std::to_string(sentinels_[i].port);
    }
    return u + "/mymaster";
}

std::string redis_sentinel_group::sentinel_cli(std::size_t i,
                                               const std::vector<std::string>& args) const {
    std::vector<std::string> a{cli_binary(), "--raw", "-h",
                               "127.0.0.1",  "-p",    std::to_string(sentinels_.at(i).port)};
    a.insert(a.end(), args.begin(), args.end());
    return run_capture(a, auth_env(sentinel_password_)).first;
}

std::pair<std::string, std::uint16_t> redis_sentinel_group::current_master() const {
    const auto out = sentinel_cli(0, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"});
    std::istringstream ss(out);
    std::string host, port;
    std::getline(ss, host);
    std::getline(ss, port);
    if (port.empty()) return {host, 0};
    return {host, static_cast<std::uint16_t>(std::stoi(port))};
}

void redis_sentinel_group::failover_and_wait(std::chrono::milliseconds budget) {
    const auto before = current_master();
    sentinel_cli(0, {"SENTINEL", "FAILOVER", "mymaster"});
    const bool ok = eventually(
        [&] {
            const auto now = current_master();
            if (now.second == 0 || now == before) return false;
            for (auto& n : nodes_)
                if (n->port() == now.second) return n->cli({"ROLE"}).rfind("master", 0) == 0;
            return false;
        },
        budget);
    if (!ok) throw std::runtime_error("sentinel failover did not complete in time");
}

// ---- Cluster -----------------------------------------------------------------------------

redis_cluster::redis_cluster(server_options opts) {
    opts.extra_config.insert(opts.extra_config.end(),
                             {"cluster-enabled yes", "cluster-config-file nodes.conf",
                              "cluster-node-timeout 2000", "cluster-require-full-coverage yes",
                              // Replicas sync at once (Redis 7.0 waits 5 s for more of them).
                              "repl-diskless-sync-delay 0"});
    for (int i = 0; i < 6; ++i)
        nodes_.push_back(std::make_unique<redis_server>(opts));
    std::vector<std::string> create{cli_binary(), "--cluster", "create"};
    for (auto& n : nodes_)
        create.push_back("127.0.0.1:" + std::to_string(n->port()));
    create.insert(create.end(), {"--cluster-replicas", "1", "--cluster-yes"});
    auto [out, rc] = run_capture(create, auth_env(opts.password));
    if (rc != 0) throw std::runtime_error("redis-cli --cluster create failed:\n" + out);
    const bool ok = eventually(
        [&] {
            for (auto& n : nodes_) {
                const auto info = n->cli({"CLUSTER", "INFO"});
                if (info.find("cluster_state:ok") == std::string::npos ||
                    info.find("cluster_known_nodes:6") == std::string::npos)
                    return false;
            }
            // Every master has its replica attached.
            const auto nodes = nodes_[0]->cli({"CLUSTER", "NODES"});
            std::size_t masters = 0, replicas = 0;
            std::istringstream ss(nodes);
            for (std::string line; std::getline(ss, line);) {
                if (line.find("master") != std::string::npos) ++masters;
                if (line.find("slave") != std::string::npos) ++replicas;
            }
            if (masters != 3 || replicas != 3) return false;
            // ... and in sync, so that a write reaches it (tests that fail over rely on it).
            for (auto& n : nodes_) {
                const auto info = n->cli({"INFO", "replication"});
                if (info.find("role:slave") != std::string::npos &&
                    info.find("master_link_status:up") == std::string::npos)
                    return false;
            }
            return true;
        },
        30s);
    if (!ok) throw std::runtime_error("cluster did not reach cluster_state:ok in 30 s");
}

namespace {

/// CLUSTER NODES lines as words: id, ip:port@cport, flags, master-id, ..., slots.
std::vector<std::vector<std::string>> cluster_nodes(const redis_server& s) {
    std::vector<std::vector<std::string>> out;
    std::istringstream ss(s.cli({"CLUSTER", "NODES"}));
    for (std::string line; std::getline(ss, line);) {
        std::istringstream ls(line);
        std::vector<std::string> words;
        for (std::string w; ls >> w;)
            words.push_back(w);
        if (words.size() >= 8) out.push_back(std::move(words));
    }
    return out;
}

std::uint16_t port_of(const std::string& addr) {
    const auto colon = addr.rfind(':');
    return static_cast<std::uint16_t>(std::stoi(addr.substr(colon + 1)));
}

std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
        s.pop_back();
    return s;
}

} // namespace

std::string redis_cluster::node_id(std::size_t i) const {
    return trimmed(nodes_.at(i)->cli({"CLUSTER", "MYID"}));
}

std::size_t redis_cluster::master_of(std::uint16_t slot) const {
    for (const auto& w : cluster_nodes(*nodes_[0])) {
        if (w[2].find("master") == std::string::npos || w[2].find("fail") != std::string::npos)
            continue;
        for (std::size_t i = 8; i < w.size(); ++i) {
            if (w[i].front() == '[') continue; // a migration in progress
            const auto dash = w[i].find('-');
            const int lo = std::stoi(w[i].substr(0, dash));
            const int hi = dash == std::string::npos ? lo : std::stoi(w[i].substr(dash + 1));
            if (slot < lo || slot > hi) continue;
            const auto port = port_of(w[1].substr(0, w[1].find('@')));
            for (std::size_t n = 0; n < nodes_.size(); ++n)
                if (nodes_[n]->port() == port) return n;
        }
    }
    throw std::runtime_error("no master serves slot " + std::to_string(slot));
}

std::size_t redis_cluster::replica_of(std::size_t i) const {
    const auto id = node_id(i);
    for (const auto& w : cluster_nodes(*nodes_[0])) {
        if (w[3] != id) continue;
        const auto port = port_of(w[1].substr(0, w[1].find('@')));
        for (std::size_t n = 0; n < nodes_.size(); ++n)
            if (nodes_[n]->port() == port) return n;
    }
    throw std::runtime_error("node " + std::to_string(i) + " has no replica");
}

void redis_cluster::begin_migration(std::uint16_t slot, std::size_t from, std::size_t to) {
    const auto s = std::to_string(slot);
    nodes_.at(to)->cli({"CLUSTER", "SETSLOT", s, "IMPORTING", node_id(from)});
    nodes_.at(from)->cli({"CLUSTER", "SETSLOT", s, "MIGRATING", node_id(to)});
}

void redis_cluster::move_keys(std::uint16_t slot, std::size_t from, std::size_t to) {
    for (;;) {
        std::istringstream ss(
            nodes_.at(from)->cli({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"}));
        std::vector<std::string> keys;
        for (std::string k; std::getline(ss, k);)
            if (!trimmed(k).empty()) keys.push_back(trimmed(k));
        if (keys.empty()) return;
        std::vector<std::string> migrate{
            "MIGRATE", "127.0.0.1", std::to_string(nodes_.at(to)->port()), "", "0", "5000", "KEYS"};
        migrate.insert(migrate.end(), keys.begin(), keys.end());
        const auto out = nodes_.at(from)->cli(migrate);
        if (out.find("OK") == std::string::npos && out.find("NOKEY") == std::string::npos)
            throw std::runtime_error("MIGRATE failed: " + out);
    }
}

void redis_cluster::finish_migration(std::uint16_t slot, std::size_t to) {
    const auto s = std::to_string(slot);
    const auto id = node_id(to);
    nodes_.at(to)->cli({"CLUSTER", "SETSLOT", s, "NODE", id});
    for (std::size_t n = 0; n < nodes_.size(); ++n)
        if (n != to) nodes_[n]->cli({"CLUSTER", "SETSLOT", s, "NODE", id});
}

void redis_cluster::migrate_slot(std::uint16_t slot, std::size_t from, std::size_t to) {
    begin_migration(slot, from, to);
    move_keys(slot, from, to);
    finish_migration(slot, to);
}

void redis_cluster::failover_to(std::size_t r, std::chrono::milliseconds budget) {
    // A manual failover needs the old master's cooperation within the server's manual-failover
    // timeout (5 s); on a loaded machine it can time out and leave everything as it was. Then
    // it is asked again with FORCE (no handshake with the master; the replica is in sync here),
    // once, after a third of the budget.
    const auto started = std::chrono::steady_clock::now();
    const auto ask = [&](bool force) {
        auto args = std::vector<std::string>{"CLUSTER", "FAILOVER"};
        if (force) args.emplace_back("FORCE");
        const auto out = nodes_.at(r)->cli(args);
        if (out.find("OK") == std::string::npos)
            throw std::runtime_error("CLUSTER FAILOVER refused: " + out);
    };
    ask(false);
    bool forced = false;
    std::string waiting_for;
    const bool ok = eventually(
        [&] {
            if (nodes_[r]->cli({"ROLE"}).rfind("master", 0) != 0) {
                if (!forced && std::chrono::steady_clock::now() - started > budget / 3) {
                    forced = true;
                    ask(true);
                }
                waiting_for = "the replica to become master";
                return false;
            }
            for (auto& n : nodes_)
                if (n->cli({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) {
                    waiting_for = "cluster_state:ok on node " + std::to_string(n->port());
                    return false;
                }
            // Node 0's view (master_of reads it) names `r` a master too.
            waiting_for = "node 0's view to name the new master";
            for (const auto& w : cluster_nodes(*nodes_[0]))
                if (port_of(w[1].substr(0, w[1].find('@'))) == nodes_[r]->port())
                    return w[2].find("master") != std::string::npos;
            return false;
        },
        budget);
    if (!ok)
        throw std::runtime_error("cluster failover did not complete in time (waiting for " +
                                 waiting_for + (forced ? ", FORCE sent)" : ")"));
}

std::string redis_cluster::url() const {
    std::string u = "redis-cluster://";
    for (std::size_t i = 0; i < 3; ++i) {
        if (i) u += ',';
        u += "127.0.0.1:" + std::to_string(nodes_[i]->port());
    }
    return u;
}

} // namespace dlock::test
