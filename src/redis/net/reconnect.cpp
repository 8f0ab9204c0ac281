// net::connection: timeouts (the deadline tick, the idle check), the state queries, failing a
// connection (requests in flight ambiguous, queued ones kept or expired) and the reconnect.
#include "core/log.hpp"
#include "redis/net/connection.hpp"
#include "redis/net/failure.hpp"

#include <dlock/error.hpp>

#include <algorithm>
#include <cstring>

namespace dlock::net {

// ---- timeouts and failure ----------------------------------------------------------------

void connection::arm_deadline_tick() {
    // While connected, a coarse periodic check (a tenth of the command timeout, 5-100 ms)
    // finds the oldest in-flight request past its deadline. A per-request timer would need a
    // hop to this thread for every command written directly by a caller. A tick that finds
    // nothing in flight and nothing sent since the last one waits until the idle check is due
    // instead (an idle client does not wake ten times a second); the next request brings the
    // short tick back (submit(), flush()).
    const auto period = std::clamp(opts_.command_timeout / 10, std::chrono::milliseconds(5),
                                   std::chrono::milliseconds(100));
    bool quiet = false;
    {
        std::lock_guard lk(mu_);
        quiet = inflight_.empty() && pending_.empty() && !writing_ && !sent_since_tick_;
        sent_since_tick_ = false;
        tick_long_ = quiet;
    }
    deadline_timer_.expires_after(
        quiet ? std::max<std::chrono::steady_clock::duration>(period, until_idle_check()) : period);
    const auto gen = generation_;
    deadline_timer_.async_wait([this, self = shared_from_this(), gen](std::error_code ec) {
        if (ec || gen != generation_) return;
        bool expired = false;
        {
            std::lock_guard lk(mu_);
            expired = !inflight_.empty() &&
                      inflight_.front()->deadline <= std::chrono::steady_clock::now();
        }
        // No reply in time: outcome unknown, and the stream can no longer be trusted to line
        // up replies with requests.
        if (expired) return fail_connection(make_error_code(errc::ambiguous));
        if (!check_idle()) return;
        arm_deadline_tick();
    });
}

void connection::rearm_tick() {
    {
        std::lock_guard lk(mu_);
        if (!ready_ || stopped_) return;
    }
    arm_deadline_tick();
}

std::chrono::steady_clock::duration connection::until_idle_check() const {
    using namespace std::chrono;
    if (opts_.idle_timeout.count() <= 0) return hours(1); // no idle check: until a request
    // When check_idle() acts next (a PING; on a subscriber, also giving up), and 1 ms past it.
    auto due = last_read_ + opts_.idle_timeout;
    if (mode_ == mode::pubsub)
        due = std::min(std::max(due, last_ping_ + opts_.idle_timeout),
                       last_read_ + 2 * opts_.idle_timeout + opts_.command_timeout);
    return due - steady_clock::now() + milliseconds(1);
}

bool connection::check_idle() {
    // Health check of an idle connection: after idle_timeout without a byte from the server,
    // send a PING. On a command connection its deadline is the command timeout (a dead peer
    // then surfaces as errc::ambiguous and a reconnect); a subscriber connection, whose replies
    // all travel as pushes, is dropped when nothing arrived for two idle periods plus the
    // command timeout. Returns false when the connection was failed.
    if (opts_.idle_timeout.count() <= 0) return true;
    const auto now = std::chrono::steady_clock::now();
    const auto quiet = now - last_read_;
    if (mode_ == mode::pubsub) {
        if (quiet > 2 * opts_.idle_timeout + opts_.command_timeout) {
            fail_connection(make_error_code(errc::unavailable));
            return false;
        }
        if (quiet > opts_.idle_timeout && now - last_ping_ > opts_.idle_timeout) {
            last_ping_ = now;
            const std::string_view ping[] = {"PING"};
            submit_oneway(ping);
        }
        return true;
    }
    if (quiet > opts_.idle_timeout && !ping_.busy) {
        ping_.busy = true;
        ping_.args = ping_.cmd;
        ping_.deadline = now + opts_.command_timeout;
        submit(ping_);
    }
    return true;
}

bool connection::idle(std::uint64_t& epoch) {
    std::lock_guard lk(mu_);
    epoch = epoch_;
    return ready_ && !stopped_ && !writing_ && pending_.empty() && inflight_.empty();
}

bool connection::peer_address(sockaddr_storage& addr, socklen_t& len, std::uint64_t& epoch) {
    std::lock_guard lk(mu_);
    if (!ready_ || peer_len_ == 0) return false;
    addr = peer_;
    len = peer_len_;
    epoch = epoch_;
    return true;
}

void connection::record_peer_locked() {
    peer_len_ = 0;
    std::error_code ec;
    if (auto* s = std::get_if<tcp::socket>(&stream_)) {
        const auto ep = s->remote_endpoint(ec);
        if (ec || ep.size() > sizeof peer_) return;
        std::memcpy(&peer_, ep.data(), ep.size());
        peer_len_ = static_cast<socklen_t>(ep.size());
    } else if (std::holds_alternative<asio::local::stream_protocol::socket>(stream_)) {
        const asio::local::stream_protocol::endpoint ep(target_.unix_socket);
        if (ep.size() > sizeof peer_) return;
        std::memcpy(&peer_, ep.data(), ep.size());
        peer_len_ = static_cast<socklen_t>(ep.size());
    }
}

int connection::plain_fd() {
    // Only plain sockets may be written from caller threads; a TLS stream's state is not.
    if (auto* s = std::get_if<tcp::socket>(&stream_)) return s->native_handle();
    if (auto* u = std::get_if<asio::local::stream_protocol::socket>(&stream_))
        return u->native_handle();
    return -1;
}

void connection::close_stream() {
    std::error_code ignore;
    if (auto* s = std::get_if<tcp::socket>(&stream_))
        s->close(ignore);
    else if (auto* u = std::get_if<asio::local::stream_protocol::socket>(&stream_))
        u->close(ignore);
    else if (auto* t = std::get_if<std::unique_ptr<tls_stream>>(&stream_))
        (*t)->next_layer().close(ignore);
    // The stream object itself is kept until the next connect replaces it, because aborted
    // handlers may still reference it.
}

void connection::fail_connection(std::error_code why) {
    ++generation_;
    draining_ = false;
    // Whatever went wrong, the next connect asks where the master is (the sentinels usually
    // name the same one; a refused or demoted one they have replaced is then skipped).
    if (source_ && why != errc::cancelled) source_->invalidate(target_);
    connect_timer_.cancel();
    deadline_timer_.cancel();
    {
        std::lock_guard lk(mu_);
        fd_ = -1; // before closing: no caller may send() on a closed or reused fd
    }
    close_stream();
    handshaking_ = false;
    parser_.reset();
    read_buf_.clear();
    read_pos_ = 0;
    const bool was_connected = connected_.exchange(false, std::memory_order_acq_rel);
    std::deque<detail::request*> inflight;
    {
        std::lock_guard lk(mu_);
        ready_ = false;
        flush_scheduled_ = false;
        writing_ = false;
        fd_ = -1;
        peer_len_ = 0;
        requeued_ = 0;
        inflight.swap(inflight_);
        if (mode_ == mode::command) {
            // A command connection queues bytes without a reply slot only for the tail of a
            // partly written direct write: that command went to the old connection (it is
            // in `inflight`, now ambiguous), and its tail must not reach the next one.
            std::string buf;
            std::vector<pending_entry> keep;
            for (auto& e : pending_) {
                if (!e.req) continue;
                const auto begin = buf.size();
                buf.append(pending_buf_, e.begin, e.end - e.begin);
                keep.push_back({e.req, begin, buf.size()});
            }
            pending_buf_.swap(buf);
            pending_.swap(keep);
        }
    }
    // Everything written and unanswered has an unknown outcome.
    detail::wire_counters::bump(counters_.ambiguous, inflight.size());
    if (was_connected)
        detail::log_connection_lost(opts_.log, "redis", address_of(target_),
                                    mode_ == mode::pubsub ? "pubsub" : "command", why.message());
    const auto amb = make_error_code(errc::ambiguous);
    for (auto* r : inflight)
        r->complete(amb, {});
    if (why == errc::auth_failed || why == errc::permission_denied ||
        why == errc::configuration_error) {
        fail_all_pending(why);
    }
    if (was_connected && on_state_) on_state_(false);
    schedule_reconnect();
}

void connection::fail_all_pending(std::error_code ec) {
    std::vector<pending_entry> drop;
    {
        std::lock_guard lk(mu_);
        drop.swap(pending_);
        pending_buf_.clear();
    }
    for (auto& e : drop)
        if (e.req) e.req->complete(ec, {});
}

void connection::expire_pending(std::chrono::steady_clock::time_point now, std::error_code ec) {
    std::vector<detail::request*> expired;
    {
        std::lock_guard lk(mu_);
        if (std::none_of(pending_.begin(), pending_.end(),
                         [&](const pending_entry& e) { return e.req && e.req->deadline <= now; }))
            return;
        std::string buf;
        std::vector<pending_entry> keep;
        for (auto& e : pending_) {
            if (e.req && e.req->deadline <= now) {
                expired.push_back(e.req);
                continue;
            }
            const auto begin = buf.size();
            buf.append(pending_buf_, e.begin, e.end - e.begin);
            keep.push_back({e.req, begin, buf.size()});
        }
        pending_buf_.swap(buf);
        pending_.swap(keep);
    }
    for (auto* r : expired)
        r->complete(ec, {});
}

void connection::schedule_reconnect() {
    {
        std::lock_guard lk(mu_);
        if (stopped_) return;
    }
    // Full jitter: uniform in [min, backoff].
    const auto lo = opts_.reconnect_min.count();
    const auto hi = std::max(lo, backoff_.count());
    std::uniform_int_distribution<long long> dist(static_cast<long long>(lo),
                                                  static_cast<long long>(hi));
    const auto delay = std::chrono::milliseconds(dist(rng_));
    backoff_ = std::min(opts_.reconnect_max, backoff_ * 2);

    // Requests queued while we are down expire on their own deadline as errc::unavailable:
    // they were never written, so that outcome is certain.
    expire_pending(std::chrono::steady_clock::now(), make_error_code(errc::unavailable));
    backoff_timer_.expires_after(delay);
    backoff_timer_.async_wait([this, self = shared_from_this()](std::error_code ec) {
        if (ec) return;
        do_connect();
    });
    // While disconnected, wake for the earliest pending deadline so waiting callers get their
    // timeout on time even during a long backoff.
    std::chrono::steady_clock::time_point earliest = std::chrono::steady_clock::time_point::max();
    {
        std::lock_guard lk(mu_);
        for (auto& e : pending_)
            if (e.req) earliest = std::min(earliest, e.req->deadline);
    }
    if (earliest != std::chrono::steady_clock::time_point::max() &&
        earliest < backoff_timer_.expiry()) {
        deadline_timer_.expires_at(earliest);
        deadline_timer_.async_wait([this, self = shared_from_this()](std::error_code ec) {
            if (ec || connected()) return;
            expire_pending(std::chrono::steady_clock::now(), make_error_code(errc::unavailable));
        });
    }
}

} // namespace dlock::net
