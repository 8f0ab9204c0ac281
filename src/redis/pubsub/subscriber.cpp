#include "redis/pubsub/subscriber.hpp"

#include <algorithm>

namespace dlock::net {

subscriber::subscriber(asio::io_context& io, const client_options& opts, target where,
                       std::string subscribe_cmd)
    : io_(io)
    , conn_(std::make_shared<connection>(io, opts, std::move(where), connection::mode::pubsub))
    , subscribe_cmd_(std::move(subscribe_cmd))
    , unsubscribe_cmd_(subscribe_cmd_ == "SSUBSCRIBE" ? "SUNSUBSCRIBE" : "UNSUBSCRIBE")
    , sweep_timer_(io) {
    conn_->set_push_handler([this](const resp3::value& v) { on_push(v); });
    conn_->set_state_handler([this](bool up) { on_state(up); });
}

subscriber::~subscriber() {
    stop();
}

void subscriber::stop() {
    sweep_timer_.cancel();
    if (conn_) conn_->stop();
}

void subscriber::arm_sweep() {
    if (sweep_armed_) return;
    sweep_armed_ = true;
    sweep_timer_.expires_after(linger);
    sweep_timer_.async_wait([this](std::error_code ec) {
        if (ec) return; // cancelled by stop()
        sweep_armed_ = false;
        sweep();
    });
}

void subscriber::sweep() {
    const auto now = std::chrono::steady_clock::now();
    bool more = false;
    for (auto it = channels_.begin(); it != channels_.end();) {
        if (!it->second.waiters.empty()) {
            ++it;
            continue;
        }
        if (now - it->second.idle_since < linger) {
            more = true;
            ++it;
            continue;
        }
        const std::string channel = it->first;
        it = channels_.erase(it);
        send(unsubscribe_cmd_, channel);
    }
    if (more) arm_sweep();
}

void subscriber::send(std::string_view cmd, const std::string& channel) {
    const std::string_view args[] = {cmd, channel};
    conn_->submit_oneway(args);
}

void subscriber::add(const std::string& channel, waiter* w) {
    if (!started_) {
        started_ = true;
        conn_->start();
    }
    auto [it, fresh] = channels_.try_emplace(channel);
    it->second.waiters.push_back(w);
    if (fresh)
        send(subscribe_cmd_, channel);
    else if (it->second.active)
        asio::post(io_, [this, channel, w] {
            // Still registered? (the waiter may have left in between)
            auto e = channels_.find(channel);
            if (e == channels_.end()) return;
            auto& ws = e->second.waiters;
            if (std::find(ws.begin(), ws.end(), w) != ws.end()) w->on_active();
        });
}

void subscriber::remove(const std::string& channel, waiter* w) {
    auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    it->second.waiters.remove(w);
    it->second.sleeping.remove(w);
    if (it->second.permits > it->second.waiters.size())
        it->second.permits = it->second.waiters.size();
    if (it->second.waiters.empty()) {
        it->second.permits = 0;
        if (!it->second.active) { // nothing to keep: not (or no longer) subscribed
            channels_.erase(it);
            send(unsubscribe_cmd_, channel);
            return;
        }
        it->second.idle_since = std::chrono::steady_clock::now();
        arm_sweep();
    }
}

bool subscriber::active_since(const std::string& channel,
                              std::chrono::steady_clock::time_point t) const {
    auto it = channels_.find(channel);
    return it != channels_.end() && it->second.active && it->second.confirmed_at <= t;
}

bool subscriber::sleep(const std::string& channel, waiter* w) {
    auto it = channels_.find(channel);
    if (it == channels_.end()) return false;
    if (it->second.permits > 0) {
        --it->second.permits;
        return true;
    }
    it->second.sleeping.push_back(w);
    return false;
}

void subscriber::awake(const std::string& channel, waiter* w) {
    auto it = channels_.find(channel);
    if (it != channels_.end()) it->second.sleeping.remove(w);
}

subscriber::waiter* subscriber::take_sleeping(const std::string& channel,
                                              const std::function<bool(waiter*)>& accept) {
    auto it = channels_.find(channel);
    if (it == channels_.end() || !it->second.active) return nullptr;
    auto& sl = it->second.sleeping;
    for (auto w = sl.begin(); w != sl.end(); ++w) {
        if (!accept(*w)) continue;
        waiter* taken = *w;
        sl.erase(w);
        return taken;
    }
    return nullptr;
}

void subscriber::on_state(bool connected) {
    if (!connected) {
        // Lingering channels are not worth resubscribing.
        std::erase_if(channels_, [](const auto& c) { return c.second.waiters.empty(); });
        for (auto& [name, e] : channels_)
            e.active = false;
        return;
    }
    // Fresh connection: resubscribe everything; confirmations make the channels active again.
    for (auto& [name, e] : channels_)
        send(subscribe_cmd_, name);
}

void subscriber::on_push(const resp3::value& v) {
    // RESP3 push or RESP2 array: [kind, channel, payload-or-count]
    if (!v.is_aggregate() || v.elements.size() < 3) return;
    const std::string& kind = v.elements[0].str;
    const std::string& channel = v.elements[1].str;
    auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    entry& e = it->second;
    if (kind == "subscribe" || kind == "ssubscribe") {
        const bool reconnect = e.active == false && !e.sleeping.empty();
        if (!e.active) e.confirmed_at = std::chrono::steady_clock::now();
        e.active = true;
        // Copy: callbacks may add/remove waiters.
        std::vector<waiter*> ws(e.waiters.begin(), e.waiters.end());
        for (auto* w : ws)
            w->on_active();
        if (reconnect) {
            auto it2 = channels_.find(channel);
            if (it2 == channels_.end()) return;
            std::vector<waiter*> sl(it2->second.sleeping.begin(), it2->second.sleeping.end());
            it2->second.sleeping.clear();
            for (auto* w : sl)
                w->on_wake();
        }
        return;
    }
    if (kind != "message" && kind != "smessage") return;
    const bool all = v.elements[2].str == "1";
    if (all) {
        std::vector<waiter*> sl(e.sleeping.begin(), e.sleeping.end());
        e.sleeping.clear();
        e.permits = e.waiters.size() - sl.size();
        for (auto* w : sl)
            w->on_wake();
        return;
    }
    if (!e.sleeping.empty()) {
        waiter* w = e.sleeping.front();
        e.sleeping.pop_front();
        w->on_wake();
        return;
    }
    if (e.permits < e.waiters.size()) ++e.permits;
}

} // namespace dlock::net
