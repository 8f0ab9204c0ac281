// The peer processes of the ZooKeeper interop tests: a child process driven by its stdin and read
// line by line from its stdout (with deadlines), and a real Apache Curator 5.4.0 client
// (Debian's libcurator-recipes-java, run by Java 17's single-file launcher from
// CuratorPeer.java). curator_peer exists where DLOCK_CURATOR_PEER_SOURCE is defined; tests that
// use it skip when curator_class_path() is empty.
#pragma once

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <stdexcept>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace dlock::test {

using namespace std::chrono_literals;

inline const char* const curator_jars[] = {
    "curator-recipes",  "curator-framework", "curator-client",     "guava",
    "slf4j-api",        "slf4j-nop",         "zookeeper",          "zookeeper-jute",
    "jackson-databind", "jackson-core",      "jackson-annotations"};

inline std::string curator_class_path() {
    std::string cp;
    for (const char* j : curator_jars) {
        const auto p = std::string("/usr/share/java/") + j + ".jar";
        if (::access(p.c_str(), R_OK) != 0) return {};
        cp += (cp.empty() ? "" : ":") + p;
    }
    return cp;
}

/// One peer process (CuratorPeer.java or kazoo_peer.py): its stdout read line by line (with a
/// deadline), its stdin closed to make a holder release.
class peer_process {
public:
    explicit peer_process(const std::vector<std::string>& argv) {
        int in[2];
        int out[2];
        if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
            throw std::runtime_error("pipe");
        std::vector<char*> args;
        for (const auto& a : argv)
            args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            ::dup2(in[0], 0);
            ::dup2(out[1], 1);
            ::close(in[1]);
            ::close(out[0]);
            ::execv(args[0], args.data());
            ::_exit(127);
        }
        ::close(in[0]);
        ::close(out[1]);
        to_ = in[1];
        from_ = out[0];
    }
    ~peer_process() {
        if (to_ >= 0) ::close(to_);
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        ::close(from_);
    }
    peer_process(const peer_process&) = delete;
    peer_process& operator=(const peer_process&) = delete;

    /// The next output line, or "" when none came within `budget`.
    std::string line(std::chrono::milliseconds budget = 30s) {
        const auto until = std::chrono::steady_clock::now() + budget;
        for (;;) {
            if (const auto nl = buf_.find('\n'); nl != std::string::npos) {
                auto l = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                return l;
            }
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                until - std::chrono::steady_clock::now());
            if (left <= 0ms) return {};
            pollfd p{from_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return {};
            char b[256];
            const ssize_t n = ::read(from_, b, sizeof b);
            if (n <= 0) return {};
            buf_.append(b, static_cast<std::size_t>(n));
        }
    }
    pid_t pid() const { return pid_; }
    /// Writes `l` and a newline to its stdin (a command of an interactive peer).
    void send(const std::string& l) {
        static const bool ignore_sigpipe = [] { return ::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
        (void)ignore_sigpipe; // a peer that exited must not kill the test
        const auto m = l + "\n";
        if (to_ >= 0) (void)!::write(to_, m.data(), m.size());
    }
    /// Closes its stdin: a holder releases.
    void release() {
        ::close(to_);
        to_ = -1;
    }

private:
    pid_t pid_ = -1;
    int to_ = -1;
    int from_ = -1;
    std::string buf_{};
};

#ifdef DLOCK_CURATOR_PEER_SOURCE
/// A Curator 5.4.0 client: CuratorPeer.java <connect> <path> <kind> <action> <ms>.
class curator_peer : public peer_process {
public:
    curator_peer(const std::string& connect, const std::string& path, const std::string& kind,
                 const std::string& action, std::chrono::milliseconds wait)
        : peer_process({"/usr/bin/java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp",
                        curator_class_path(), std::string(DLOCK_CURATOR_PEER_SOURCE), connect, path,
                        kind, action, std::to_string(wait.count())}) {}
};
#endif

} // namespace dlock::test
