#include "redis/pubsub/subscriber.hpp"

#include "redis/net/wire.hpp"

#include <algorithm>

namespace dlock::pubsub {

subscriber::subscriber(asio::io_context& io, const client_options& opts, net::target where, mode m,
                       std::shared_ptr<net::target_source> source)
    : io_(io)
    , conn_(std::make_shared<net::connection>(io, opts, std::move(where),
                                              net::connection::mode::pubsub, std::move(source)))
    , mode_(m)
    , sweep_timer_(io)
    , rejoin_timer_(io) {
    conn_->set_push_handler([this](const resp3::value& v) { on_push(v); });
    conn_->set_state_handler([this](bool up) { on_state(up); });
}

subscriber::~subscriber() {
    try {
        stop();
    } catch (...) { // cancel() and stop() throw only on resource exhaustion: nothing to undo
    }
}

void subscriber::stop() {
    sweep_timer_.cancel();
    rejoin_timer_.cancel();
    rejoin_.clear();
    if (conn_) conn_->stop();
}

void subscriber::arm_sweep() {
    if (sweep_armed_) return;
    sweep_armed_ = true;
    sweep_timer_.expires_after(table::linger);
    sweep_timer_.async_wait([this](std::error_code ec) {
        if (ec) return; // cancelled by stop()
        sweep_armed_ = false;
        const bool more = table_.sweep(std::chrono::steady_clock::now(), gone_);
        for (const auto& channel : gone_)
            send(unsubscribe_command(mode_), channel);
        if (more) arm_sweep();
    });
}

void subscriber::send(std::string_view cmd, const std::string& channel) {
    const std::string_view args[] = {cmd, channel};
    conn_->submit_oneway(args);
}

void subscriber::add(const std::string& channel, waiter* w, wake_rule rule) {
    if (!started_) {
        started_ = true;
        conn_->start();
    }
    const auto a = table_.add(channel, w, rule);
    if (a.subscribe) send(subscribe_command(mode_), channel);
    if (a.notify_now)
        asio::post(io_, [this, channel, w] {
            if (table_.registered(channel, w)) w->on_active(); // may have left in between
        });
}

void subscriber::remove(const std::string& channel, waiter* w) {
    const auto r = table_.remove(channel, w, std::chrono::steady_clock::now());
    if (r.unsubscribe) send(unsubscribe_command(mode_), channel);
    if (r.linger) arm_sweep();
}

void subscriber::on_state(bool connected) {
    if (!connected) return table_.disconnected();
    // Fresh connection: resubscribe everything; confirmations make the channels active again.
    table_.for_each_channel(
        [this](const std::string& channel) { send(subscribe_command(mode_), channel); });
}

void subscriber::on_refused(const resp3::value& error) {
    const bool armed = !rejoin_.empty();
    for (auto* w : table_.unconfirmed())
        if (std::none_of(rejoin_.begin(), rejoin_.end(),
                         [w](const auto& r) { return r.get() == w; }))
            rejoin_.push_back(w->share()); // alive until it joined again (or gave up meanwhile)
    if (armed || rejoin_.empty()) return;
    using std::chrono::milliseconds;
    rejoin_timer_.expires_after(net::cluster_redirect(error) ? milliseconds(50)
                                                             : milliseconds(1000));
    rejoin_timer_.async_wait([this](std::error_code ec) {
        if (ec) return; // cancelled by stop()
        const auto again = std::move(rejoin_);
        rejoin_.clear();
        for (const auto& w : again)
            w->on_dropped(); // it checks whether it still waits
    });
}

void subscriber::on_push(const resp3::value& v) {
    if (v.is_error()) return on_refused(v);
    // RESP3 push or RESP2 array: [kind, channel, payload-or-count]
    if (!v.is_aggregate() || v.elements.size() < 3) return;
    const std::string& kind = v.elements[0].str;
    const std::string& channel = v.elements[1].str;
    if (kind == "subscribe" || kind == "ssubscribe") {
        table_.confirmed(channel, std::chrono::steady_clock::now(), notify_, wake_);
        // Local copies: a callback may add or remove waiters (and reuse the scratch vectors).
        const auto notify = notify_;
        const auto wake_now = wake_;
        for (auto* w : notify)
            if (table_.registered(channel, w)) w->on_active();
        for (auto* w : wake_now)
            if (table_.registered(channel, w)) w->on_wake();
        return;
    }
    if (kind == "sunsubscribe" && table_.registered_any(channel)) {
        // Not ours (we unsubscribe only channels without waiters): the server dropped it,
        // because its slot left this node (resharding, failover). The waiters join again on
        // the slot's node now.
        for (auto* w : table_.dropped(channel))
            w->on_dropped();
        return;
    }
    if (kind != "message" && kind != "smessage") return;
    table_.message(channel, v.elements[2].str, wake_);
    if (wake_.size() == 1) return wake_.front()->on_wake(); // the common case: no copy
    const auto wake_now = wake_;
    for (auto* w : wake_now)
        if (table_.registered(channel, w)) w->on_wake();
}

} // namespace dlock::pubsub
