#include "redis/topology/node.hpp"

namespace dlock::detail {

node::node(asio::io_context& io, const client_options& opts, net::target where, pubsub::mode m)
    : conn_(std::make_shared<net::connection>(io, opts, where, net::connection::mode::command))
    , sub_(io, opts, where, m) {
    if (opts.sync_io == blocking_io::caller_thread && !opts.tls.enabled)
        lane_ = std::make_unique<net::sync_lane>(conn_->options());
}

node::~node() = default;

void node::start() {
    conn_->start(); // the subscriber connects on its first channel
}

void node::stop() {
    if (lane_) lane_->shutdown();
    conn_->stop();
}

void node::stop_subscriber() {
    sub_.stop();
}

} // namespace dlock::detail
