// zk_fault_proxy: a TCP proxy between a ZooKeeper client and one server that can lose the
// answer to a create request: armed, it forwards the client's next create/create2 request
// (opcode 1 or 15) to the server and then closes both sides before the reply comes back, so
// the node exists but the client only sees a connection loss (what protected mode is for).
// It can also cut the current connection and refuse new ones for a while (refuse(true), cut()):
// a connection loss within the session, for the reconnect tests.
// One thread per proxy; connections are served one at a time in that thread (poll).
#pragma once

#include "redis_fixture.hpp" // free_port()

#include <arpa/inet.h>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace dlock::test {

class zk_fault_proxy {
public:
    explicit zk_fault_proxy(std::uint16_t server_port)
        : server_port_(server_port)
        , port_(free_port()) {
        listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int one = 1;
        ::setsockopt(listen_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        const auto a = addr(port_);
        if (::bind(listen_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 ||
            ::listen(listen_, 16) != 0)
            throw std::runtime_error("proxy: cannot listen");
        thread_ = std::thread([this] { run(); });
    }
    ~zk_fault_proxy() {
        stop_ = true;
        thread_.join();
        ::close(listen_);
    }
    zk_fault_proxy(const zk_fault_proxy&) = delete;
    zk_fault_proxy& operator=(const zk_fault_proxy&) = delete;

    std::uint16_t port() const { return port_; }
    /// Drop the connection right after forwarding the next create request.
    void arm() { armed_ = true; }
    /// Closes the connection being served (both sides), at once.
    void cut() { cut_ = true; }
    /// While true, new connections are accepted and closed at once (the client keeps retrying).
    void refuse(bool on) { refuse_ = on; }
    /// How many create requests were forwarded and then had their answer dropped.
    int dropped() const { return dropped_; }

private:
    static sockaddr_in addr(std::uint16_t port) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        return a;
    }

    void run() {
        while (!stop_) {
            pollfd p{listen_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const int c = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0) continue;
            if (refuse_) {
                ::close(c);
                continue;
            }
            const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            const auto a = addr(server_port_);
            if (::connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
                ::close(c);
                ::close(s);
                continue;
            }
            serve(c, s);
            ::close(c);
            ::close(s);
        }
    }

    /// Relays until either side closes; parses the client's frames (4-byte length, then xid
    /// and opcode; the first frame is the ConnectRequest without them).
    void serve(int c, int s) {
        std::vector<char> from_client;
        bool handshake = true;
        while (!stop_) {
            if (cut_.exchange(false)) return;
            pollfd p[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
            if (::poll(p, 2, 50) <= 0) continue;
            char buf[65536];
            if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                const ssize_t n = ::read(s, buf, sizeof buf);
                if (n <= 0 || ::send(c, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n)
                    return;
            }
            if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                const ssize_t n = ::read(c, buf, sizeof buf);
                if (n <= 0) return;
                from_client.insert(from_client.end(), buf, buf + n);
                // Forward whole frames; after an armed create, stop relaying answers.
                for (;;) {
                    if (from_client.size() < 4) break;
                    std::uint32_t len = 0;
                    std::memcpy(&len, from_client.data(), 4);
                    len = ntohl(len);
                    if (from_client.size() < 4 + static_cast<std::size_t>(len)) break;
                    bool is_create = false;
                    if (!handshake && len >= 8) {
                        std::uint32_t op = 0;
                        std::memcpy(&op, from_client.data() + 8, 4);
                        op = ntohl(op);
                        is_create = op == 1 || op == 15;
                    }
                    handshake = false;
                    const auto frame = static_cast<std::ptrdiff_t>(4 + len);
                    if (::send(s, from_client.data(), static_cast<std::size_t>(frame),
                               MSG_NOSIGNAL) != frame)
                        return;
                    from_client.erase(from_client.begin(), from_client.begin() + frame);
                    if (is_create && armed_.exchange(false)) {
                        ++dropped_;
                        // Give the server time to apply it, then cut both sides unanswered.
                        pollfd w{s, POLLIN, 0};
                        ::poll(&w, 1, 200);
                        return;
                    }
                }
            }
        }
    }

    std::uint16_t server_port_;
    std::uint16_t port_;
    int listen_ = -1;
    std::atomic<bool> stop_{false};
    std::atomic<bool> armed_{false};
    std::atomic<bool> cut_{false};
    std::atomic<bool> refuse_{false};
    std::atomic<int> dropped_{0};
    std::thread thread_;
};

} // namespace dlock::test
