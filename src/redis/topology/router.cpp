#include "redis/topology/router.hpp"

#include "redis/topology/sentinel.hpp"

#include <dlock/error.hpp>

namespace dlock::detail {

router::router(asio::io_context& io, const client_options& opts) {
    if (opts.kind == topology::cluster)
        throw error(errc::configuration_error,
                    "dlock: the Cluster topology is not supported by the client yet (" +
                        to_string(opts) + ")");
    if (opts.kind == topology::sentinel) {
        if (opts.endpoints.empty() || opts.master_name.empty())
            throw error(errc::configuration_error,
                        "dlock: a Sentinel client needs sentinel endpoints and a master name");
        sentinel_ = std::make_shared<sentinel_source>(io, opts);
        // The target is a placeholder: the connections ask the source before each connect.
        nodes_.push_back(
            std::make_unique<node>(io, opts, net::target{}, pubsub::mode::classic, sentinel_));
        return;
    }
    net::target t;
    if (!opts.unix_socket.empty()) {
        t.unix_socket = opts.unix_socket;
    } else {
        t.host = opts.endpoints.at(0).host;
        t.port = opts.endpoints.at(0).port;
    }
    nodes_.push_back(std::make_unique<node>(io, opts, t, pubsub::mode::classic));
}

node& router::for_slot(std::uint16_t) noexcept {
    return *nodes_.front();
}

void router::start() {
    if (sentinel_) {
        sentinel_->on_change([this] {
            for (auto& n : nodes_)
                n->retarget();
            if (on_change_) on_change_();
        });
        sentinel_->start();
    }
    for (auto& n : nodes_)
        n->start();
}

void router::stop() {
    for (auto& n : nodes_)
        n->stop();
    if (sentinel_) sentinel_->stop();
}

std::uint64_t router::master_changes() const noexcept {
    return sentinel_ ? sentinel_->changes() : 0;
}

void router::stop_subscribers() {
    for (auto& n : nodes_)
        n->stop_subscriber();
}

} // namespace dlock::detail
