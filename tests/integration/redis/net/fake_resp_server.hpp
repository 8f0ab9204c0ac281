// fake_resp_server: a scripted RESP server on 127.0.0.1, only for protocol faults a real
// redis-server cannot produce (huge declared lengths, desync, truncation, resets, silence).
// It answers the HELLO handshake like Redis 7 (or hands it to the script too, for handshake
// faults), then hands every later command to `reply`. The script runs on one thread per
// connection: a script that records must lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

class fake_resp_server {
public:
    /// What to do with one command.
    struct action {
        std::string bytes{}; ///< written back as-is
        bool close = false;  ///< then close the connection (FIN)
        bool reset = false;  ///< then reset it (RST, SO_LINGER 0)
        bool silent = false; ///< write nothing, keep the connection open
    };
    using script = std::function<action(const std::vector<std::string>& command)>;
    /// Who answers HELLO: the server, like Redis 7 (default), or the script.
    enum class handshake { answered, scripted };

    explicit fake_resp_server(script reply, handshake h = handshake::answered);
    ~fake_resp_server();
    std::uint16_t port() const { return port_; }
    std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
    int connections() const { return connections_.load(); }

private:
    void serve(int fd);
    script reply_;
    handshake handshake_;
    int listen_fd_ = -1;
    std::uint16_t port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> connections_{0};
    std::thread thread_;
    std::vector<std::thread> workers_;
    std::vector<int> fds_;
};

} // namespace dlock::test
