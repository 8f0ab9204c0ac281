#include "fake_resp_server.hpp"

#include "redis/resp3/parser.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace dlock::test {

fake_resp_server::fake_resp_server(script reply, handshake h)
    : reply_(std::move(reply))
    , handshake_(h) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::runtime_error("fake server: bind/listen failed");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
        while (!stop_) {
            pollfd p{listen_fd_, POLLIN, 0};
            if (::poll(&p, 1, 20) <= 0) continue;
            const int fd = ::accept(listen_fd_, nullptr, nullptr);
            if (fd < 0) continue;
            ++connections_;
            fds_.push_back(fd);
            workers_.emplace_back([this, fd] { serve(fd); });
        }
    });
}

fake_resp_server::~fake_resp_server() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_)
        ::shutdown(fd, SHUT_RDWR);
    for (auto& w : workers_)
        w.join();
    for (int fd : fds_)
        ::close(fd);
    ::close(listen_fd_);
}

void fake_resp_server::serve(int fd) {
    resp3::parser parser;
    std::string buf;
    char chunk[4096];
    while (!stop_) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 20) <= 0) continue;
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return;
        buf.append(chunk, static_cast<std::size_t>(n));
        for (;;) {
            std::size_t used = 0;
            std::error_code ec;
            auto v = parser.consume(buf, used, ec);
            buf.erase(0, used);
            if (ec) return;
            if (!v) break;
            std::vector<std::string> cmd;
            for (auto& e : v->elements)
                cmd.push_back(e.str);
            if (handshake_ == handshake::answered && !cmd.empty() &&
                (cmd[0] == "HELLO" || cmd[0] == "hello")) {
                const std::string hello = "%1\r\n+server\r\n+fake\r\n";
                ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
                continue;
            }
            const action a = reply_(cmd);
            if (!a.silent && !a.bytes.empty())
                ::send(fd, a.bytes.data(), a.bytes.size(), MSG_NOSIGNAL);
            if (a.reset) {
                linger l{1, 0};
                ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
                ::shutdown(fd, SHUT_RDWR);
                return;
            }
            if (a.close) {
                ::shutdown(fd, SHUT_RDWR);
                return;
            }
        }
    }
}

} // namespace dlock::test
