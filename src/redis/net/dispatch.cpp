// net::connection: each reply read goes to its request (dispatch_reply: the handshake's
// replies, pushes, redirects, NOSCRIPT, a moved master), and the drain that follows the master.
#include "core/log.hpp"
#include "redis/net/connection.hpp"
#include "redis/net/failure.hpp"
#include "redis/net/wire.hpp"

#include <dlock/error.hpp>

#include <asio/post.hpp>

#include <algorithm>

namespace dlock::net {
namespace {

/// `text` with every occurrence of `secret` replaced by "***" (a server that does not know
/// HELLO, Redis 5, echoes its arguments, the password among them).
std::string redacted(std::string_view text, std::string_view secret) {
    std::string s(text);
    if (secret.empty()) return s;
    for (auto at = s.find(secret); at != std::string::npos; at = s.find(secret, at + 3))
        s.replace(at, secret.size(), "***");
    return s;
}

} // namespace

void connection::dispatch_reply(resp3::value&& v) {
    if (handshaking_) {
        if (v.kind == resp3::type::push) return;
        if (!handshake_error_) {
            handshake_error_ = handshake_error(v);
            if (handshake_error_) handshake_text_ = bounded_text(redacted(v.str, opts_.password));
            // A server that is not the master (a demoted one, a replica the sentinels still
            // name): not ours; resolve again.
            if (!handshake_error_ && role_pending_ && handshake_replies_ == 1 && !role_is_master(v))
                handshake_error_ = make_error_code(errc::readonly);
        }
        if (--handshake_replies_ != 0) return;
        handshaking_ = false;
        if (handshake_error_) {
            const auto ec = handshake_error_;
            if (!handshake_text_.empty())
                note_failure("handshake with " + address() + ": " + handshake_text_);
            {
                std::lock_guard lk(mu_);
                if (ec == errc::auth_failed || ec == errc::permission_denied) sticky_error_ = ec;
            }
            return fail_connection(ec);
        }
        connect_timer_.cancel();
        backoff_ = opts_.reconnect_min;
        connected_.store(true, std::memory_order_release);
        bool again = false;
        {
            std::lock_guard lk(mu_);
            sticky_error_.clear();
            last_failure_.clear();
            ready_ = true;
            again = ++epoch_ > 1;
            fd_ = plain_fd();
            record_peer_locked();
            if (!pending_.empty()) schedule_flush_locked();
        }
        last_read_ = std::chrono::steady_clock::now();
        detail::wire_counters::bump(again ? counters_.reconnects : counters_.connects);
        if (again)
            detail::log_reconnected(opts_.log, "redis", address_of(target_),
                                    mode_ == mode::pubsub ? "pubsub" : "command");
        arm_deadline_tick();
        if (on_state_) on_state_(true);
        return;
    }
    if (mode_ == mode::pubsub || v.kind == resp3::type::push) {
        if (on_push_) on_push_(v);
        return;
    }
    detail::request* r = nullptr;
    bool redirect = false;
    {
        std::lock_guard lk(mu_);
        if (!inflight_.empty()) {
            r = inflight_.front();
            inflight_.pop_front();
            if (on_redirect_ && cluster_redirect(v)) {
                redirect = true; // handed to the Cluster router below, outside the lock
            } else if (source_ && topology_error(v)) {
                // Not carried out here: send it again, to the master we move to.
                requeue_front_locked(*r);
                draining_ = true;
                ready_ = false; // nothing more is written to this server
                fd_ = -1;
                if (!inflight_.empty()) return;
                r = nullptr;
            } else if (needs_eval(v, r->eval_fallback)) {
                // Re-send as EVAL, queued behind whatever is pending. Only this request's own
                // outcome depends on it, so ordering among callers is unaffected.
                detail::wire_counters::bump(counters_.noscript);
                counters_.sent("EVAL");
                const auto begin = pending_buf_.size();
                encode_as_eval(pending_buf_, r->args, r->eval_fallback);
                r->eval_fallback = {};
                pending_.push_back({r, begin, pending_buf_.size()});
                schedule_flush_locked();
                return;
            }
        }
    }
    if (draining_ && !r) return finish_drain();
    if (r && v.is_error()) note_error_reply(v.str);
    if (!r) {
        // A reply nobody asked for: the stream is desynchronised. Never attribute it.
        return fail_connection(make_error_code(errc::protocol_error));
    }
    if (!redirect || !on_redirect_(*r, v)) r->complete({}, std::move(v));
    if (draining_) {
        bool empty = false;
        {
            std::lock_guard lk(mu_);
            empty = inflight_.empty();
        }
        if (empty) finish_drain();
    }
}

// ---- following the master (target source) -------------------------------------------------

void connection::retarget() {
    if (!source_) return;
    asio::post(io_, [self = shared_from_this()] {
        if (!self->connected() || self->draining_) return;
        self->source_->resolve([self, epoch = self->generation_](std::error_code ec, target t) {
            if (ec || epoch != self->generation_ || self->draining_) return;
            if (t.host == self->target_.host && t.port == self->target_.port) return;
            self->begin_drain();
        });
    });
}

void connection::begin_drain() {
    bool empty = false;
    {
        std::lock_guard lk(mu_);
        draining_ = true;
        ready_ = false;
        fd_ = -1;
        empty = inflight_.empty();
    }
    if (empty) finish_drain();
}

void connection::finish_drain() {
    fail_connection(make_error_code(errc::readonly)); // nothing in flight: nothing ambiguous
}

void connection::requeue_front_locked(detail::request& r) {
    // In order behind the requests requeued before it, ahead of everything submitted since.
    std::string bytes;
    resp3::encode_command(bytes, r.args);
    const std::size_t at = std::min(requeued_, pending_.size());
    const std::size_t byte = at == 0 ? 0 : pending_[at - 1].end;
    pending_buf_.insert(byte, bytes);
    for (auto i = at; i < pending_.size(); ++i) {
        pending_[i].begin += bytes.size();
        pending_[i].end += bytes.size();
    }
    pending_.insert(pending_.begin() + static_cast<std::ptrdiff_t>(at),
                    pending_entry{&r, byte, byte + bytes.size()});
    ++requeued_;
}

} // namespace dlock::net
