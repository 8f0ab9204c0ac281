#include "redis/topology/router.hpp"

#include "redis/topology/cluster.hpp"
#include "redis/topology/sentinel.hpp"

#include <dlock/error.hpp>

namespace dlock::detail {

router::router(asio::io_context& io, const client_options& opts)
    : lock_delay_(lock_delay(opts)) {
    if (opts.kind == topology::cluster) {
        cluster_ = std::make_shared<detail::cluster>(io, opts);
        return;
    }
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

router::~router() = default;

node& router::any() noexcept {
    return cluster_ ? cluster_->first() : *nodes_.front();
}

node& router::for_slot(std::uint16_t slot) noexcept {
    return cluster_ ? cluster_->for_slot(slot) : *nodes_.front();
}

std::vector<node*> router::masters() {
    if (cluster_) return cluster_->masters();
    return {nodes_.front().get()};
}

void router::wait_ready(std::chrono::steady_clock::time_point deadline) {
    if (cluster_) cluster_->wait_ready(deadline);
}

void router::start() {
    if (cluster_) {
        cluster_->on_master_change([this](const std::string& address) {
            if (on_change_) on_change_(address);
        });
        return cluster_->start();
    }
    if (sentinel_) {
        sentinel_->on_change([this](const net::target& t) {
            for (auto& n : nodes_)
                n->master_changed(lock_delay_);
            if (on_change_) on_change_(t.host + ':' + std::to_string(t.port));
        });
        sentinel_->start();
    }
    for (auto& n : nodes_)
        n->start();
}

void router::stop() {
    if (cluster_) return cluster_->stop();
    for (auto& n : nodes_)
        n->stop();
    if (sentinel_) sentinel_->stop();
}

std::uint64_t router::master_changes() const noexcept {
    return sentinel_ ? sentinel_->changes() : 0;
}

void router::stop_subscribers() {
    if (cluster_) return cluster_->stop_subscribers();
    for (auto& n : nodes_)
        n->stop_subscriber();
}

} // namespace dlock::detail
