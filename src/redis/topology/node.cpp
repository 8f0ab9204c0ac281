#include "redis/topology/node.hpp"

namespace dlock::detail {

node::node(asio::io_context& io, const client_options& opts, net::target where, pubsub::mode m,
           std::shared_ptr<net::target_source> source)
    : source_(std::move(source))
    , conn_(std::make_shared<net::connection>(io, opts, where, net::connection::mode::command,
                                              source_))
    , sub_(io, opts, where, m, source_) {
    if (opts.sync_io == blocking_io::caller_thread && !opts.tls.enabled &&
        opts.kind != topology::cluster)
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

void node::master_changed(std::chrono::milliseconds lock_delay) {
    retarget();
    if (lock_delay.count() <= 0) return;
    const auto until = std::chrono::steady_clock::now() + lock_delay;
    paused_until_.store(until.time_since_epoch().count(), std::memory_order_release);
}

void node::retarget() {
    conn_->retarget();
    sub_.retarget();
}

void node::stop_subscriber() {
    sub_.stop();
}

} // namespace dlock::detail
