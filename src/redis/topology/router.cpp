#include "redis/topology/router.hpp"

#include <dlock/error.hpp>

namespace dlock::detail {

router::router(asio::io_context& io, const client_options& opts) {
    if (opts.kind != topology::standalone)
        throw error(errc::configuration_error,
                    "dlock: Sentinel and Cluster topologies are not supported by the client yet "
                    "(" +
                        to_string(opts) + ")");
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
    for (auto& n : nodes_)
        n->start();
}

void router::stop() {
    for (auto& n : nodes_)
        n->stop();
}

void router::stop_subscribers() {
    for (auto& n : nodes_)
        n->stop_subscriber();
}

} // namespace dlock::detail
