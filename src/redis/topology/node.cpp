#include "redis/topology/node.hpp"

#include "redis/topology/sentinel.hpp"

namespace dlock::detail {

node::node(asio::io_context& io, const client_options& opts, net::target where, pubsub::mode m,
           std::shared_ptr<net::target_source> source)
    : source_(std::move(source))
    , sentinel_(dynamic_cast<sentinel_source*>(source_.get()))
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

std::chrono::steady_clock::time_point node::paused_until() const noexcept {
    return sentinel_ ? sentinel_->paused_until() : std::chrono::steady_clock::time_point{};
}

void node::retarget() {
    conn_->retarget();
    sub_.retarget();
}

void node::stop_subscriber() {
    sub_.stop();
}

} // namespace dlock::detail
