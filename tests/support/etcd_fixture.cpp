#include "etcd_fixture.hpp"

#include "redis_fixture.hpp" // free_port(); process.hpp: spawn_child(), reap_child()

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace dlock::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string binary(const char* env, const char* fallback) {
    if (const char* p = std::getenv(env); p && *p) return p;
    return ::access(fallback, X_OK) == 0 ? fallback : std::string{};
}

std::string etcd_binary() {
    return binary("DLOCK_TEST_ETCD", "/usr/bin/etcd");
}

std::string loopback_url(std::uint16_t port) {
    return "http://127.0.0.1:" + std::to_string(port);
}

} // namespace

bool etcd_available() {
    return !etcd_binary().empty() && !etcdctl_binary().empty();
}

std::string etcdctl_binary() {
    return binary("DLOCK_TEST_ETCDCTL", "/usr/bin/etcdctl");
}

etcd_member::etcd_member(std::string name, fs::path dir, const etcd_cluster& cluster)
    : name_(std::move(name))
    , dir_(std::move(dir))
    , cluster_(&cluster)
    , client_port_(free_port())
    , peer_port_(free_port())
    , metrics_port_(cluster.options().tls ? free_port() : 0) {
    fs::create_directories(dir_);
}

etcd_member::~etcd_member() {
    stop();
}

std::string etcd_member::host_port() const {
    return "127.0.0.1:" + std::to_string(client_port_);
}

std::vector<std::string> etcd_member::argv(const std::string& initial_cluster, bool fresh) const {
    const auto& o = cluster_->options();
    const auto client_url =
        o.tls ? "https://127.0.0.1:" + std::to_string(client_port_) : loopback_url(client_port_);
    std::vector<std::string> a{etcd_binary(),
                               "--name",
                               name_,
                               "--data-dir",
                               (dir_ / "data").string(),
                               "--listen-client-urls",
                               client_url,
                               "--advertise-client-urls",
                               client_url,
                               "--listen-peer-urls",
                               loopback_url(peer_port_),
                               "--initial-advertise-peer-urls",
                               loopback_url(peer_port_),
                               "--initial-cluster",
                               initial_cluster,
                               "--initial-cluster-state",
                               fresh ? "new" : "existing",
                               "--initial-cluster-token",
                               "dlock-test",
                               "--heartbeat-interval",
                               "50",
                               "--election-timeout",
                               "500",
                               "--logger",
                               "zap",
                               "--log-outputs",
                               "stderr"};
    if (o.tls) {
        const auto& t = cluster_->tls();
        a.insert(a.end(),
                 {"--cert-file", t.server_cert.string(), "--key-file", t.server_key.string(),
                  "--listen-metrics-urls", loopback_url(metrics_port_)});
        if (o.client_cert_auth)
            a.insert(a.end(), {"--client-cert-auth", "--trusted-ca-file", t.ca_cert.string()});
    }
    return a;
}

void etcd_member::start() {
    if (pid_ > 0) return;
    const auto bin = etcd_binary();
    if (bin.empty()) throw std::runtime_error("etcd not found");
    pid_ = spawn_child(argv(initial_cluster_, !started_once_), dir_ / "server.log");
    started_once_ = true;
}

void etcd_member::stop() {
    stop_child(pid_);
}

void etcd_member::kill() {
    kill_child(pid_);
}

void etcd_member::pause() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void etcd_member::resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string etcd_member::health() const {
    const auto reply =
        loopback_exchange(metrics_port_ ? metrics_port_ : client_port_,
                          "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    const auto body = reply.find("\r\n\r\n");
    return body == std::string::npos ? std::string{} : reply.substr(body + 4);
}

long long etcd_member::metric(std::string_view name, std::string_view label) const {
    const auto reply =
        loopback_exchange(metrics_port_ ? metrics_port_ : client_port_,
                          "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    if (reply.find("\r\n\r\n") == std::string::npos) return -1;
    long long sum = 0;
    std::size_t at = 0;
    while ((at = reply.find('\n', at)) != std::string::npos) {
        const auto line = std::string_view(reply).substr(at + 1, reply.find('\n', at + 1) - at - 1);
        ++at;
        if (!line.starts_with(name)) continue;
        const auto rest = line.substr(name.size());
        if (rest.empty() || (rest[0] != ' ' && rest[0] != '{')) continue; // a longer name
        const auto value = rest.rfind(' ');
        if (value == std::string_view::npos) continue;
        if (!label.empty() && rest.substr(0, value).find(label) == std::string_view::npos) continue;
        sum += static_cast<long long>(std::stod(std::string(rest.substr(value + 1))));
    }
    return sum;
}

bool etcd_member::wait_healthy(std::chrono::milliseconds budget) const {
    const auto until = std::chrono::steady_clock::now() + budget;
    for (;;) {
        if (health().find("\"health\":\"true\"") != std::string::npos) return true;
        if (pid_ <= 0 || reap_child(pid_, 0ms) || std::chrono::steady_clock::now() >= until)
            return false;
        std::this_thread::sleep_for(50ms);
    }
}

etcd_cluster::etcd_cluster(std::size_t size, etcd_options opts)
    : opts_(opts) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dlock-etcd-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    try {
        if (opts_.tls) tls_ = make_tls(dir_);
        std::string initial;
        for (std::size_t i = 0; i < std::max<std::size_t>(size, 1); ++i) {
            const auto name = "m" + std::to_string(i);
            members_.push_back(
                std::unique_ptr<etcd_member>(new etcd_member(name, dir_ / name, *this)));
            initial += (i ? "," : "") + name + "=" + loopback_url(members_.back()->peer_port());
        }
        for (auto& m : members_) {
            m->initial_cluster_ = initial;
            m->start();
        }
        for (auto& m : members_)
            if (!m->wait_healthy(30s))
                throw std::runtime_error("etcd member " + m->host_port() + " not healthy:\n" +
                                         read_tail(m->dir_ / "server.log", 2000));
    } catch (...) {
        members_.clear();
        std::error_code ec;
        fs::remove_all(dir_, ec);
        throw;
    }
}

etcd_cluster::~etcd_cluster() {
    members_.clear();
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

std::string etcd_cluster::endpoints() const {
    std::string out;
    for (std::size_t i = 0; i < members_.size(); ++i)
        out += (i ? "," : "") + members_[i]->host_port();
    return out;
}

std::string etcd_cluster::url(const std::string& prefix, const std::string& query) const {
    return (opts_.tls ? "etcds://" : "etcd://") + endpoints() + prefix + query;
}

std::vector<std::string> etcd_cluster::etcdctl_argv(const std::vector<std::string>& args) const {
    return etcdctl_argv_for(endpoints(), "2s", args);
}

std::vector<std::string>
etcd_cluster::etcdctl_argv_for(const std::string& endpoints, const std::string& dial_timeout,
                               const std::vector<std::string>& args) const {
    std::vector<std::string> argv{etcdctl_binary(), "--endpoints=" + endpoints,
                                  "--dial-timeout=" + dial_timeout, "--command-timeout=5s"};
    if (opts_.tls) argv.push_back("--cacert=" + tls_.ca_cert.string());
    if (opts_.client_cert_auth)
        argv.insert(argv.end(),
                    {"--cert=" + tls_.server_cert.string(), "--key=" + tls_.server_key.string()});
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

std::pair<std::string, int> etcd_cluster::etcdctl(const std::vector<std::string>& args) const {
    return run_capture(etcdctl_argv(args), {"ETCDCTL_API=3"});
}

std::optional<std::size_t> etcd_cluster::leader() const {
    for (std::size_t i = 0; i < members_.size(); ++i) {
        if (!members_[i]->running()) continue;
        // "endpoint, id, version, db size, is leader, ..." in etcdctl's simple format.
        auto [out, rc] =
            run_capture(etcdctl_argv_for(members_[i]->host_port(), "1s", {"endpoint", "status"}),
                        {"ETCDCTL_API=3"});
        if (rc == 0 && out.find(", true, ") != std::string::npos) return i;
    }
    return std::nullopt;
}

} // namespace dlock::test
