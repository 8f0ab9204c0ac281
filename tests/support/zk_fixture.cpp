#include "zk_fixture.hpp"

#include "redis_fixture.hpp" // free_port(), spawn_child(), reap_child()

#include <csignal>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace dlock::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string java_binary() {
    if (const char* p = std::getenv("DLOCK_TEST_JAVA"); p && *p) return p;
    for (const char* c : {"/usr/bin/java", "/usr/lib/jvm/default-java/bin/java"})
        if (::access(c, X_OK) == 0) return c;
    return {};
}

std::string zookeeper_jar() {
    if (const char* p = std::getenv("DLOCK_TEST_ZOOKEEPER_JAR"); p && *p) return p;
    return "/usr/share/java/zookeeper.jar";
}

std::string class_path() {
    // The jar's manifest names its dependencies by absolute path; slf4j-simple logs to stderr
    // (the server log file) so that a failing start can be diagnosed.
    std::string cp = zookeeper_jar();
    if (::access("/usr/share/java/slf4j-simple.jar", R_OK) == 0)
        cp += ":/usr/share/java/slf4j-simple.jar";
    return cp;
}

std::string tail_of(const fs::path& log) {
    std::ifstream f(log);
    std::deque<std::string> lines;
    for (std::string l; std::getline(f, l);) {
        lines.push_back(std::move(l));
        if (lines.size() > 15) lines.pop_front();
    }
    std::string out;
    for (auto& l : lines)
        out += l + "\n";
    return out;
}

} // namespace

bool zookeeper_available() {
    return !java_binary().empty() && ::access(zookeeper_jar().c_str(), R_OK) == 0;
}

zk_server::zk_server(zk_options opts)
    : opts_(std::move(opts)) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dlock-zk-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    try {
        port_ = free_port();
        write_config({});
        start();
    } catch (...) {
        std::error_code ec;
        fs::remove_all(dir_, ec);
        throw;
    }
}

zk_server::zk_server(zk_options opts, std::uint16_t port, fs::path dir, int myid)
    : opts_(std::move(opts))
    , dir_(std::move(dir))
    , port_(port)
    , myid_(myid)
    , owns_dir_(false) {}

zk_server::~zk_server() {
    stop();
    if (owns_dir_) {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
}

std::string zk_server::host_port() const {
    return "127.0.0.1:" + std::to_string(port_);
}

std::string zk_server::url(const std::string& chroot) const {
    return "zk://" + host_port() + chroot;
}

void zk_server::write_config(const std::vector<std::string>& quorum_lines) {
    fs::create_directories(dir_ / "data");
    std::ofstream cfg(dir_ / "zoo.cfg");
    cfg << "tickTime=" << opts_.tick_ms << "\n"
        << "dataDir=" << (dir_ / "data").string() << "\n"
        << "clientPortAddress=127.0.0.1\n"
        << "clientPort=" << port_ << "\n"
        << "admin.enableServer=false\n"
        << "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons\n"
        << "maxClientCnxns=0\n";
    if (!quorum_lines.empty()) {
        cfg << "initLimit=20\nsyncLimit=10\n"; // zk_ensemble::server_lag() counts on 10
        for (const auto& l : quorum_lines)
            cfg << l << "\n";
        std::ofstream(dir_ / "data" / "myid") << myid_ << "\n";
    }
    for (const auto& l : opts_.extra_config)
        cfg << l << "\n";
    if (!cfg) throw std::runtime_error("cannot write " + (dir_ / "zoo.cfg").string());
}

void zk_server::start() {
    if (pid_ > 0) return;
    const auto java = java_binary();
    if (java.empty()) throw std::runtime_error("java not found");
    const std::vector<std::string> argv{java,
                                        "-Xmx128m",
                                        "-XX:+UseSerialGC",
                                        "-XX:TieredStopAtLevel=1",
                                        "-Dznode.container.checkIntervalMs=1000",
                                        "-Dzookeeper.admin.enableServer=false",
                                        "-cp",
                                        class_path(),
                                        myid_ ? "org.apache.zookeeper.server.quorum.QuorumPeerMain"
                                              : "org.apache.zookeeper.server.ZooKeeperServerMain",
                                        (dir_ / "zoo.cfg").string()};
    pid_ = spawn_child(argv, dir_ / "server.log");
    if (myid_ == 0) wait_ready(20s, false);
}

void zk_server::wait_ready(std::chrono::milliseconds budget, bool quorum) {
    const auto until = std::chrono::steady_clock::now() + budget;
    for (;;) {
        if (pid_ > 0 && reap_child(pid_, 0ms)) {
            pid_ = -1;
            throw std::runtime_error("zookeeper exited during start:\n" +
                                     tail_of(dir_ / "server.log"));
        }
        if (quorum) {
            const auto s = four_letter("srvr");
            if (s.find("Mode: leader") != std::string::npos ||
                s.find("Mode: follower") != std::string::npos)
                return;
        } else if (four_letter("ruok") == "imok") {
            return;
        }
        if (std::chrono::steady_clock::now() >= until)
            throw std::runtime_error("zookeeper not ready on " + host_port() + ":\n" +
                                     tail_of(dir_ / "server.log"));
        std::this_thread::sleep_for(50ms);
    }
}

void zk_server::stop() {
    stop_child(pid_);
}

void zk_server::kill() {
    kill_child(pid_);
}

void zk_server::pause() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void zk_server::resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string zk_server::four_letter(const std::string& word) const {
    return loopback_exchange(port_, word);
}

zk_ensemble::zk_ensemble(zk_options opts)
    : tick_ms_(opts.tick_ms) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dlock-zkq-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    try {
        std::vector<std::string> quorum;
        std::vector<std::uint16_t> ports;
        for (int i = 1; i <= 3; ++i) {
            ports.push_back(free_port());
            quorum.push_back("server." + std::to_string(i) + "=127.0.0.1:" +
                             std::to_string(free_port()) + ":" + std::to_string(free_port()));
        }
        for (int i = 1; i <= 3; ++i) {
            auto s = std::unique_ptr<zk_server>(
                new zk_server(opts, ports[static_cast<std::size_t>(i - 1)],
                              dir_ / ("node" + std::to_string(i)), i));
            s->write_config(quorum);
            servers_.push_back(std::move(s));
        }
        for (auto& s : servers_)
            s->start();
        for (auto& s : servers_)
            s->wait_ready(30s, true);
    } catch (...) {
        servers_.clear();
        std::error_code ec;
        fs::remove_all(dir_, ec);
        throw;
    }
}

zk_ensemble::~zk_ensemble() {
    servers_.clear();
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

std::string zk_ensemble::url(const std::string& chroot) const {
    std::string u = "zk://";
    for (std::size_t i = 0; i < servers_.size(); ++i)
        u += (i ? "," : "") + servers_[i]->host_port();
    return u + chroot;
}

std::optional<std::size_t> zk_ensemble::leader() const {
    for (std::size_t i = 0; i < servers_.size(); ++i)
        if (servers_[i]->pid() > 0 &&
            servers_[i]->four_letter("srvr").find("Mode: leader") != std::string::npos)
            return i;
    return std::nullopt;
}

std::size_t zk_ensemble::wait_leader(std::chrono::milliseconds budget) const {
    const auto until = std::chrono::steady_clock::now() + budget;
    for (;;) {
        if (auto l = leader()) return *l;
        if (std::chrono::steady_clock::now() >= until)
            throw std::runtime_error("no ZooKeeper leader elected in time");
        std::this_thread::sleep_for(50ms);
    }
}

} // namespace dlock::test
